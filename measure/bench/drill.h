// The refresh drill (DESIGN's introduction, scaled to the machine): N tokens whose
// expiries are spread over a compressed hour, an outage that leaves a share of them
// already expired when the refreshers start, W refreshers that each spend a fixed
// service time per refresh (the call to the provider). Reported: how many tokens that
// could still have been saved expired anyway, and how long the backlog took to drain,
// with dueq's deadline-aware order (not-late first) and with plain earliest-first order
// (lead_ms = 0, each task due `lead` before its token expires) as the baseline.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "backend.h"

namespace dueq::bench {

enum class DrillOrder { deadline, earliest };

struct DrillOptions {
    BackendKind backend = BackendKind::dueq;
    std::vector<std::string> addrs{"127.0.0.1:7700"};
    std::vector<DrillOrder> orders{DrillOrder::deadline, DrillOrder::earliest};
    std::uint64_t tokens = 1'000'000;
    std::size_t key_bytes = 16;
    std::size_t payload_bytes = 200;
    std::int64_t hour_ms = 600'000;  // a token's lifetime, compressed
    std::int64_t lead_ms = 0;        // refresh this long before expiry; 0: hour_ms / 12
    double late_share = 0.1;         // share of tokens already expired at the start
    int refreshers = 64;
    int connections = 64;          // refreshers share min(refreshers, connections)
    std::int64_t service_ms = 5;   // per refresh, the provider call
    std::int64_t poll_ms = 5;      // wait after an empty take
    double seconds = 60;           // the drill's window, the same for both orders
    double preload_rate = 40'000;  // puts/s assumed when scheduling the start
    int preload_connections = 16;
    int preload_depth = 64;
    std::string queue = "drill";
    bool progress = true;
};

struct DrillResult {
    DrillOrder order;
    std::int64_t lead_ms = 0;
    double preload_s = 0;
    std::int64_t start_delay_ms = 0;    // actual start minus the planned one
    std::uint64_t late_at_start = 0;    // expired before the refreshers started
    std::uint64_t savable_due = 0;      // not expired at start, came due in the drill
    std::uint64_t saved = 0;            // refreshed before expiry
    std::uint64_t expired_savable = 0;  // savable, yet refreshed after expiry or never
    std::uint64_t late_refreshed = 0;   // late at start, refreshed in the drill
    std::int64_t drain_ms = -1;         // -1: not drained within the window
    std::uint64_t refreshes = 0;
    double seconds = 0;
    std::uint64_t errors = 0;
    nlohmann::json options;
};

std::vector<DrillResult> run_drill(const DrillOptions& options);
nlohmann::json to_json(const DrillResult& r);
std::string to_table(const std::vector<DrillResult>& results);
std::string_view order_name(DrillOrder o);

}  // namespace dueq::bench
