// Configuration of one Raft node. Everything that shapes the core's behaviour is here,
// including the membership it starts from (later changes travel in the log).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "raft/types.h"

namespace dueq::raft {

// Test-only defects of the core that the simulator must be able to catch (issue 3,
// acceptance 2). Selected at run time; compiled in only when DUEQ_PLANTED_BUGS is defined,
// otherwise the field exists but is ignored. The layers above plant their own defects
// (shell::ShellDefect, queue::StoreDefect, node::NodeDefect); testing/planted names them
// all for the tests, the simulator and dueqd-test.
enum class PlantedBug : std::uint8_t {
    none,
    vote_for_stale_log,   // grant (pre-)votes without the §3.6.1 up-to-date check
    commit_prior_term,    // count replicas for entries of earlier terms (§3.6.2, Fig. 8)
    vote_before_persist,  // reply to a vote while the vote is not yet in the HardState
    apply_uncommitted,    // hand entries to apply before they are committed
    // A follower's append acknowledgement leaves before its write is durable (the core's
    // Ready::messages_before_persist holds every message).
    ack_before_persist,
    // Membership (§4.1): each breaks one rule of single-server changes.
    two_changes_in_flight,      // propose a change while the previous one is uncommitted
    change_before_term_commit,  // propose a change before an entry of the term committed
    removed_counted_in_quorum,  // a removed voter's acks still count toward commits
    learner_counted_as_voter,   // a learner's acks count toward the voters' majority
};

// True when the planted defects (of every layer) are compiled in.
bool planted_bugs_compiled();

struct Config {
    NodeId id = kNoNode;
    // The membership this node starts from: the one its applied state holds, or the
    // cluster's first one. Configuration entries in the log take over from it. Both empty:
    // a node that joins an existing cluster and learns its membership from the leader.
    std::vector<NodeId> voters;
    std::vector<NodeId> learners;
    std::string directory;  // carried with that membership (Membership::directory)
    // A learner is promoted only when its log is at most this many entries behind the
    // leader's (else not_caught_up): a voter far behind would slow every commit.
    std::uint64_t promote_lag = 1000;

    // Timing in ticks (the shell calls tick() at a fixed period, e.g. every 10 ms).
    // A follower starts an election after a random timeout in
    // [election_tick, 2*election_tick - 1] without hearing a leader (§3.4).
    int election_tick = 10;
    int heartbeat_tick = 1;

    bool pre_vote = true;      // §9.6: a node campaigns only if a majority would vote for it
    bool check_quorum = true;  // §6.2: a leader that stops hearing a majority steps down;
                               // followers that hear a leader ignore vote requests (§4.2.3)
    // §6.4.1: serve reads on the leader lease, without a round of heartbeats. Only valid
    // with check_quorum (otherwise a follower may vote while the old lease runs).
    bool lease_read = false;
    // Ticks subtracted from the lease to cover clock drift between nodes (§6.4.1).
    int lease_margin_ticks = 2;

    // Replication flow control (per follower). A message per 64 entries cost a three-node
    // put about 10% more CPU than one per 1024 (docs/benchmarks.md); the byte cap still
    // bounds a message.
    std::uint64_t max_entries_per_msg = 1024;
    std::uint64_t max_bytes_per_msg = 1 << 20;
    std::uint64_t max_inflight_msgs = 64;
    std::uint64_t max_inflight_bytes = 16 << 20;

    // The core asks the shell for a snapshot (Ready::snapshot_wanted) once this many
    // applied entries sit in the log after the last snapshot. 0 = never.
    std::uint64_t snapshot_threshold = 10000;

    // Seed of the random source for election timeouts: same inputs, same outputs.
    std::uint64_t seed = 1;

    PlantedBug planted_bug = PlantedBug::none;

    // Checks the rules above (a well-formed membership, ticks positive, lease needs
    // check_quorum). The node itself need not be a member: a removed one starts too.
    bool valid() const;
};

}  // namespace dueq::raft
