// The kill-the-leader scenario, shared by the failover test (which must find nothing
// wrong) and the planted-bug test (which must find something): a steady load through
// clients that know every node; the leader SIGKILLed `kills` times, each time timed
// until a new leader answers a put, then restarted; then the cluster settles and the
// history is checked against every node.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cluster/cluster.h"
#include "cluster/workload.h"

namespace dueq::test {

struct FailoverRound {
    bool froze_followers = false;  // SIGSTOPped the followers before the kill
    std::string killed;            // the leader's node id
    std::uint64_t old_term = 0;
    std::string new_leader;  // "" if none answered a put in time
    std::uint64_t new_term = 0;
    // From the kill (or, when the followers were frozen, from their SIGCONT) until a
    // live node said it leads a newer term.
    long elected_ms = -1;
    long served_ms = -1;            // ... until that node answered a put
    std::size_t ok_ops_before = 0;  // load ops answered ok up to the kill
    // The puts acknowledged before the kill, read from the new leader at once (the
    // killed node still down).
    Verdict on_new_leader;
};

struct FailoverReport {
    std::vector<FailoverRound> rounds;
    bool settled = false;  // the cluster agreed on a leader and caught up at the end
    std::size_t puts_ok = 0, takes = 0, acks_ok = 0;
    std::string errors;          // the clients' error counts
    std::vector<Verdict> nodes;  // check_node of every node, in node order
    LeaseVerdict leases;
    std::size_t problems() const;  // lost or wrong writes on any node + lease problems
    std::string summary() const;
};

struct FailoverPlan {
    int kills = 3;
    // The last `frozen_kills` of the kills first freeze both followers (SIGSTOP) for
    // `freeze`, shorter than an election timeout so the leader keeps its role, then
    // SIGKILL the leader and thaw the followers. A leader may answer nothing while its
    // followers are frozen: nothing it proposes then can commit, and it all dies with it.
    int frozen_kills = 0;
    std::chrono::milliseconds freeze = 300ms;
    std::chrono::milliseconds load_before_kill = 1500ms;
    // How long to wait for a new leader to answer a put before giving the round up.
    std::chrono::milliseconds give_up = 10s;
};

// Starts every node of `cluster`, runs the scenario and returns what it saw. Fails the
// test only when the harness itself cannot go on (no first leader, preload failed).
FailoverReport run_failover(Cluster& cluster, const LoadOptions& load, const FailoverPlan& plan);

}  // namespace dueq::test
