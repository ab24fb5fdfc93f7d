// The deterministic cluster simulator: N replicas of what dueqd runs (the Raft shell, the
// Raft core and the task store) in one process, on a simulated clock, disk and network,
// with faults, the product's workload and invariant checks after every step (cluster.h,
// checker.h, task_history.h). The same options (seed included) replay bit-for-bit.
#pragma once

#include <cstdint>
#include <string>

#include "node/planted_defects.h"

namespace dueq::sim {

struct SimOptions {
    std::uint64_t seed = 1;
    int nodes = 3;
    bool faults = true;             // drops, duplicates, delays, partitions, crashes, slow disks
    std::uint64_t fault_ms = 3000;  // simulated time with faults on (then everything heals)
    std::uint64_t heal_limit_ms = 20000;  // liveness bound after healing
    node::PlantedDefects planted;  // the test-only defects every node runs with
    bool trace = false;  // print every event to stderr
    // Checks of the core's contract itself (a granted vote is durable; only committed
    // entries are applied). Off, only the consequences are checked (two leaders,
    // diverging state machines, lost acknowledged commands...), to show that a broken
    // contract is caught by what it breaks, too.
    bool contract_checks = true;
    // Membership changes (sim/membership.cpp): learners added, promoted, members removed
    // (the leader too) and machines lost for good. -1: in half the seeds, by the seed.
    int membership = -1;
};

struct SimStats {
    std::uint64_t events = 0;
    std::uint64_t messages = 0;
    std::uint64_t proposed = 0;           // commands submitted by the workload
    std::uint64_t acked = 0;              // commands acknowledged to the workload
    std::uint64_t leases = 0;             // tasks handed out (each checked against G3)
    std::uint64_t abandoned = 0;          // leases clients walked away from (checked for G2)
    std::uint64_t disconnects = 0;        // client connections closed
    std::uint64_t blocking_timeouts = 0;  // blocking takes that waited and found nothing
    std::uint64_t sessions_released = 0;  // ReleaseSession entries the write path logged
    std::uint64_t reads = 0;              // linearizable reads checked
    std::uint64_t elections = 0;          // distinct leader terms
    std::uint64_t crashes = 0;
    std::uint64_t torn_crashes = 0;  // crashes that kept some unsynced writes, not all
    std::uint64_t link_downs = 0;
    std::uint64_t partitions = 0;
    std::uint64_t snapshots_sent = 0;
    std::uint64_t sim_ms = 0;              // simulated time at the end
    std::uint64_t heal_to_live_ms = 0;     // time from healing to a quiet, complete cluster
    std::uint64_t autonomous_answers = 0;  // answered by nodes in autonomous mode
    std::uint64_t merged = 0;              // writes of autonomous mode merged (all nodes)
    std::uint64_t merges_taken_over = 0;   // ... that became the task
    std::uint64_t membership_changes = 0;  // membership changes committed
};

struct SimResult {
    bool ok = true;
    std::string violation;  // what broke, when and where (empty when ok)
    SimStats stats;
};

SimResult run_simulation(const SimOptions& opts);

// The one command that replays `opts` (with a trace), for failure messages.
std::string replay_command(const SimOptions& opts);

}  // namespace dueq::sim
