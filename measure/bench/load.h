// The throughput scenarios: put, get, refresh, mixed and preload, each driven by many
// connections with a pipelining depth, a warm-up and a fixed duration or op count.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend.h"
#include "histogram.h"
#include "key_of.h"

namespace dueq::bench {

enum class Scenario { put, get, refresh, mixed, preload };
std::string_view scenario_name(Scenario s);

// The ops a scenario reports on. `refresh` is one whole take → ack cycle.
enum class Op { put, get, take, ack, refresh };
inline constexpr std::size_t kOpCount = 5;
std::string_view op_name(Op op);

struct LoadOptions {
    BackendKind backend = BackendKind::dueq;
    std::vector<std::string> addrs{"127.0.0.1:7700"};
    Scenario scenario = Scenario::put;
    int connections = 16;
    int depth = 1;
    int threads = 1;
    double warmup_s = 1;
    double seconds = 10;
    std::uint64_t max_ops = 0;  // 0: run for `seconds`
    std::uint64_t keys = 100'000;
    std::size_t key_bytes = 16;
    std::size_t payload_bytes = 200;
    std::string queue = "bench";
    std::int64_t lead_ms = 0;
    std::int64_t ttr_ms = 60'000;
    bool preload = true;               // get/refresh/mixed: put the keys first
    std::int64_t spread_ms = 0;        // preload: due times spread over this span from now
    std::int64_t time_offset_ms = -1;  // preload: first due time relative to now
    std::int64_t base_time_ms = 0;     // preload: first due time, absolute (overrides offset)
    // preload: each payload a different run of random printable bytes (like real tokens,
    // which neither store's log or snapshot compression can shrink); else all 'x'.
    bool random_payloads = false;
    int refreshers = 0;       // mixed: connections that refresh (0: a quarter)
    double read_share = 0.9;  // mixed: share of front-end ops that are gets
    bool progress = true;
    int connect_timeout_ms = 5000;
    // Key numbers in [0, keys) the load may use; empty: all of them. dueq-bench fills it
    // with the keys of one shard (--only-shard), so that a shard's leader can be loaded
    // without forwarding, or with forwarding only.
    std::vector<std::uint64_t> key_numbers;
};

struct OpStats {
    std::uint64_t ops = 0, errors = 0;
    Histogram latency;
};

struct LoadResult {
    std::string scenario;
    LoadOptions options;
    double seconds = 0;  // the measured window
    std::array<OpStats, kOpCount> ops;
    std::map<std::string, std::uint64_t> errors;  // by error code, measured window only
    std::uint64_t empty_takes = 0;
    std::uint64_t superseded = 0;    // mixed: acks refused because a put replaced the task
    std::uint64_t main_ops() const;  // the scenario's headline op count
};

// Runs one scenario to its end. Throws std::runtime_error when it cannot connect.
LoadResult run_load(const LoadOptions& options);


nlohmann::json to_json(const LoadResult& r);
// One table row per op that ran, with throughput and latency percentiles.
std::string to_table(const std::vector<LoadResult>& results);

std::int64_t wall_ms();

}  // namespace dueq::bench
