// Classic bug: a node cut off for a long time keeps raising its term; when it comes
// back its higher term forces the healthy leader to step down. PreVote keeps its term.
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

namespace {
Term rejoin_disruption(bool pre_vote) {
    Cluster c(3, [&](Config& cfg) {
        cfg.pre_vote = pre_vote;
        cfg.check_quorum = pre_vote;
    });
    c.elect(1);
    c.raft(1).propose(cmd(1), 0);
    c.deliver_all();
    Term before = c.raft(1).term();
    c.isolate(3);
    for (int k = 0; k < 100; ++k) {
        c.tick_all();
        c.deliver_all();
    }
    c.heal();
    for (int k = 0; k < 30; ++k) {
        c.tick_all();
        c.deliver_all();
    }
    return c.raft(1).term() - before + (c.raft(1).role() == Role::leader ? 0 : 100);
}
}  // namespace

TEST_CASE("bug: a partitioned node disrupts the cluster on rejoin", "[raft][prevote][bug]") {
    CHECK(rejoin_disruption(true) == 0);   // leader kept, term unchanged
    CHECK(rejoin_disruption(false) != 0);  // without PreVote it does disrupt: the test can tell
}
