// Cluster helpers: which member leads, and the failover drill (kill -9 of the leader →
// first successful write on the new leader), measured the same way for dueq and etcd.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "backend.h"

namespace dueq::bench {

// The index in `addrs` of the member that leads now; waits up to timeout_s for exactly
// one to say so. Throws std::runtime_error when none does in time.
std::size_t find_leader(BackendKind kind, const std::vector<std::string>& addrs,
                        double timeout_s = 30);

struct FailoverOptions {
    BackendKind backend = BackendKind::dueq;
    std::vector<std::string> addrs;
    std::vector<int> pids;    // the members' process ids, in addrs' order
    std::string restart_cmd;  // shell command; "{i}" → member number (1-based)
    int kills = 10;
    std::int64_t probe_ms = 10;     // pause between probes of one member
    std::int64_t settle_ms = 3000;  // after a restart, once a leader is known again
    double timeout_s = 60;          // per kill, for the new leader to answer
    std::string queue = "failover";
    // kill: SIGKILL, a crash (on one host the kernel closes the dead process's sockets at
    // once, so peers can see it go). stop: SIGSTOP, a hang or a partition (sockets stay
    // open; only missing heartbeats tell). A stopped leader is killed once measured.
    bool stop_instead = false;
    bool progress = true;
};

// Per kill: the member that led, and the ms from the kill to the first successful op
// (dueq: a take answered ok; etcd: a put answered 200) on any survivor.
struct FailoverResult {
    std::vector<std::size_t> leaders;
    std::vector<double> ms;
    nlohmann::json to_json(const FailoverOptions& o) const;
};

FailoverResult run_failover(FailoverOptions& options);

}  // namespace dueq::bench
