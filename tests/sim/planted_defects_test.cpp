// The simulator can fail: each planted defect, of the Raft core or of the shell dueqd
// runs, must be caught within a bounded number of seeds. Seeds are searched from 1
// upwards, so the result is repeatable. Any change to the core, the shell, the store or
// the simulator reshuffles runs, so the bounds come from measured catch rates
// (docs/internals/simulation.md) with a miss probability below 1e-5: e.g. commit_prior_term is
// caught in about 1 seed of 2,900 with 3 nodes, so 33,000 seeds. Rarer cases (5 nodes)
// are in the long sweep, not here.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "sim/sim.h"
#include "testing/planted/planted.h"

using dueq::sim::SimOptions;

namespace {
// Every defect a case below plants; the last test checks that none was left out.
std::set<std::string>& planted_here() {
    static std::set<std::string> names;
    return names;
}

struct Case {
    std::string_view defect;  // its name (testing/planted/planted.h)
    int nodes;
    bool contract_checks;  // false: only the consequences of the bug can catch it
    std::uint64_t within;
    std::uint64_t fault_ms = 3000;
    int membership = -1;  // SimOptions::membership
};

// Returns the first seed (counting from 1) whose run reports a violation, or 0.
std::uint64_t first_failing_seed(const Case& c, std::string* what) {
    for (std::uint64_t seed = 1; seed <= c.within; ++seed) {
        SimOptions o;
        o.seed = seed;
        o.nodes = c.nodes;
        o.planted = *dueq::testing::parse_planted(c.defect);
        o.contract_checks = c.contract_checks;
        o.fault_ms = c.fault_ms;
        o.membership = c.membership;
        auto r = dueq::sim::run_simulation(o);
        if (!r.ok) {
            *what = r.violation;
            return seed;
        }
    }
    return 0;
}

void expect_caught(const Case& c) {
    REQUIRE(dueq::testing::parse_planted(c.defect));
    planted_here().insert(std::string(c.defect));
    std::string what;
    std::uint64_t seed = first_failing_seed(c, &what);
    INFO("bug " << c.defect << ", " << c.nodes << " nodes, contract checks "
                << (c.contract_checks ? "on" : "off"));
    CHECK(seed != 0);
    if (seed != 0) {
        WARN("planted " << c.defect << " (" << c.nodes << " nodes, contract checks "
                        << (c.contract_checks ? "on" : "off") << ") caught at seed " << seed << ": "
                        << what);
    }
}
}  // namespace

TEST_CASE("sim catches a vote granted to a candidate with an older log", "[sim][planted]") {
    expect_caught({"vote_for_stale_log", 3, true, 50});
    expect_caught({"vote_for_stale_log", 5, true, 50});
}

TEST_CASE("sim catches commitment of a previous-term entry by counting", "[sim][planted]") {
    // About 1 seed in 2,900 (3 nodes); rarer with 5 nodes (docs/internals/simulation.md).
    expect_caught({"commit_prior_term", 3, true, 33000});
}

TEST_CASE("sim catches a vote replied before it is persisted", "[sim][planted]") {
    expect_caught({"vote_before_persist", 3, true, 10});
    // By its consequences alone (a crash between the reply and the write, then a second
    // candidate in the same term): about 1 seed in 555 with 3 nodes.
    expect_caught({"vote_before_persist", 3, false, 7000});
}

TEST_CASE("sim catches an entry applied before it is committed", "[sim][planted]") {
    expect_caught({"apply_uncommitted", 3, true, 10});
    expect_caught({"apply_uncommitted", 3, false, 50});
}

TEST_CASE("sim catches a follower acknowledging an append before it is durable", "[sim][planted]") {
    expect_caught({"ack_before_persist", 3, true, 10});
    expect_caught({"ack_before_persist", 3, false, 50});
    expect_caught({"ack_before_persist", 5, false, 50});
}

TEST_CASE("sim catches a shell that applies entries before they are committed", "[sim][planted]") {
    expect_caught({"shell_applies_uncommitted", 3, true, 10});
    expect_caught({"shell_applies_uncommitted", 3, false, 50});
}

TEST_CASE("sim catches leases computed from the local clock instead of the log time",
          "[sim][planted]") {
    expect_caught({"lease_from_local_clock", 3, false, 10});
    expect_caught({"lease_from_local_clock", 5, false, 10});
}

TEST_CASE("sim catches a reply sent before the entry is applied", "[sim][planted]") {
    expect_caught({"reply_before_commit", 3, false, 10});
    expect_caught({"reply_before_commit", 5, false, 10});
}

TEST_CASE("sim catches merges that drop the writes of autonomous mode", "[sim][planted]") {
    // About 1 seed in 8: the workload's queue is autonomous in half the seeds, and a node
    // must be cut off long enough to serve a write there.
    expect_caught({"merge_dropped", 3, true, 100});
    expect_caught({"merge_dropped", 5, true, 100});
}

TEST_CASE("sim catches a put in autonomous mode stamped below the fork's own deletion",
          "[sim][planted]") {
    // About 1 seed in 35 with 20 s of faults (3 and 5 nodes); never with the default 3 s.
    expect_caught({"fork_put_below_deletion", 3, true, 400, 20000});
    expect_caught({"fork_put_below_deletion", 5, true, 400, 20000});
}

TEST_CASE("sim catches a merged finish that wins over a newer write of autonomous mode",
          "[sim][planted]") {
    // Needs two cut-off sides writing one key: about 1 seed in 300 with 5 nodes and 60 s
    // of faults. G4 must not take such a finish for a removal that excuses the write.
    expect_caught({"merge_older_finish_wins", 5, true, 3500, 60000});
}

// Membership changes (§4.1), each with changes in every seed. Caught by the rule's own
// check (one change in flight, proposed after the term's first commit), and by what a
// wrong quorum breaks: an entry committed that a majority of voters lacks. Measured over
// 3,000 seeds of 3 and 5 nodes: two in flight 1 in 18, before the term's commit 1 in 3.3,
// a removed voter counted 1 in 57, a learner counted 1 in 3; the bounds keep the miss
// probability below 1e-5.
TEST_CASE("sim catches two membership changes in flight", "[sim][planted]") {
    expect_caught({"two_changes_in_flight", 3, true, 300, 3000, 1});
    expect_caught({"two_changes_in_flight", 5, true, 300, 3000, 1});
    // By its consequence alone (a commit a majority of some membership lacks): 1 in 210.
    expect_caught({"two_changes_in_flight", 5, false, 4000, 3000, 1});
}

TEST_CASE("sim catches a membership change before the term's first commit", "[sim][planted]") {
    expect_caught({"change_before_term_commit", 3, true, 50, 3000, 1});
    expect_caught({"change_before_term_commit", 5, true, 50, 3000, 1});
}

TEST_CASE("sim catches a removed voter still counted toward commits", "[sim][planted]") {
    expect_caught({"removed_counted_in_quorum", 3, false, 800, 3000, 1});
    expect_caught({"removed_counted_in_quorum", 5, false, 800, 3000, 1});
}

TEST_CASE("sim catches a learner counted as a voter", "[sim][planted]") {
    expect_caught({"learner_counted_as_voter", 3, false, 50, 3000, 1});
    expect_caught({"learner_counted_as_voter", 5, false, 50, 3000, 1});
}

TEST_CASE("without a planted bug the same seeds pass", "[sim][planted]") {
    // The contrast that gives the cases above their meaning.
    for (std::uint64_t seed = 1; seed <= 50; ++seed) {
        SimOptions o;
        o.seed = seed;
        o.nodes = 3;
        auto r = dueq::sim::run_simulation(o);
        INFO("seed " << seed << ": " << r.violation);
        REQUIRE(r.ok);
    }
}

TEST_CASE("every planted defect but the node's is caught above", "[sim][planted]") {
    // The node's need real nodes: shard_serves_every_key two shards
    // (tests/shard/two_shards_test.cpp), leader_reads_unconfirmed a cut link
    // (tests/cluster/stale_leader_read.py). Catch2 runs the cases above first, in file order.
    std::set<std::string> expected;
    for (auto name : dueq::testing::planted_names())
        if (dueq::testing::parse_planted(name)->node == dueq::node::NodeDefect::none)
            expected.insert(std::string(name));
    CHECK(planted_here() == expected);
    for (auto name : dueq::testing::planted_names())
        CHECK(dueq::testing::planted_name(*dueq::testing::parse_planted(name)) == name);
    CHECK_FALSE(dueq::testing::parse_planted("no_such_defect"));
}
