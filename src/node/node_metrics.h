// What a node counts for its admin endpoints (docs/admin.md): requests by op and result,
// their latency, leader changes and the acknowledgement history the dashboard charts.
// Owned by the event loop; the latency histograms are atomics only because Histogram is.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "common/histogram.h"
#include "net/request.h"
#include "wire/error_code.h"

namespace dueq::node {

class RequestMeter {
  public:
    using Clock = std::chrono::steady_clock;
    // net::Op's values, then one for frames that did not decode.
    static constexpr std::size_t kOps = wire::kOps.size() + 1;
    static constexpr std::size_t kInvalid = kOps - 1;
    static constexpr std::size_t kCodes = std::size_t(wire::Code::unknown) + 1;

    static std::size_t slot(net::Op op) { return std::size_t(op); }
    static const char* op_name(std::size_t slot) {
        return slot == kInvalid ? "invalid" : net::to_string(net::Op(slot));
    }

    void record(std::size_t op, wire::Code code, Clock::time_point started) {
        ++counts_[op][std::size_t(code) < kCodes ? std::size_t(code) : kCodes - 1];
        const auto us =
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count();
        latency_[op].record_us(us > 0 ? std::uint64_t(us) : 0);
    }
    std::uint64_t count(std::size_t op, std::size_t code) const { return counts_[op][code]; }
    const Histogram& latency(std::size_t op) const { return latency_[op]; }

  private:
    std::array<std::array<std::uint64_t, kCodes>, kOps> counts_{};
    std::array<Histogram, kOps> latency_{};
};

struct LeaderChange {
    std::int64_t at_ms = 0;  // wall clock
    std::uint64_t term = 0;
    std::string from, to;  // member ids; empty: none
    std::string reason;
};

struct NodeMetrics {
    RequestMeter requests;
    std::uint64_t leader_changes = 0;         // this node saw its leader change (to none included)
    std::uint64_t elections_started = 0;      // terms this node began as a candidate
    std::deque<LeaderChange> recent_changes;  // the latest kKeptChanges, oldest first
    static constexpr std::size_t kKeptChanges = 20;

    // What observe_raft() last saw.
    std::uint64_t seen_leader = 0;  // raft id; 0: none
    std::uint64_t seen_term = 0;
    std::int64_t leaderless_since = 0;  // wall ms; meaningful while seen_leader == 0

    // Acks over every queue, sampled every kSampleMs for the dashboard's refresh chart.
    struct Sample {
        std::int64_t at_ms = 0;
        std::uint64_t acks = 0, takes = 0, puts = 0;
    };
    std::deque<Sample> history;
    // Per queue, acks at the last kRateSamples sample times: its acks per second over the
    // last minute. Bounded by the store's limit on queues.
    std::map<std::string, std::deque<std::pair<std::int64_t, std::uint64_t>>> queue_acks;
    static constexpr std::size_t kRateSamples = 13;  // twelve intervals of 5 s
    static constexpr std::int64_t kSampleMs = 5000;
    static constexpr std::size_t kKeptSamples = 120;  // ten minutes

    // Each wait a blocking take spent parked on the leader (its request duration leaves
    // the wait out).
    Histogram take_wait;
    // Acks on the leader: the task's time minus when the ack came, so how early it was
    // refreshed; negative when the task was already late.
    static constexpr std::array<double, 15> kMarginBounds{-3600, -600, -300, -60, -10, -1,   0,   1,
                                                          10,    30,   60,   300, 600, 1800, 3600};
    Histogram refresh_margin{kMarginBounds};
};

}  // namespace dueq::node
