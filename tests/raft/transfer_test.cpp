// Leadership transfer (§3.10).
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

TEST_CASE("§3.10 transfer: the target is caught up, then told to campaign", "[raft][transfer]") {
    Cluster c(3);
    c.elect(1);
    c.cut(1, 3);
    c.raft(1).propose(cmd(1), 0);
    c.deliver_all();
    Term t1 = c.raft(1).term();
    REQUIRE(c.raft(3).log().last_index() == 1);  // behind: needs entry 2 first
    c.heal();
    REQUIRE(c.raft(1).transfer_leadership(3));
    // While the transfer runs, new writes are refused.
    CHECK(c.raft(1).propose(cmd(2), 0).error() == Error::transfer_in_progress);
    c.tick(1);  // the next heartbeat interval resumes the probe to node 3
    c.deliver_all();
    CHECK(c.raft(3).role() == Role::leader);
    CHECK(c.raft(1).role() == Role::follower);
    CHECK(c.raft(1).leader() == 3);
    CHECK(c.raft(3).term() == t1 + 1);
    CHECK(c.raft(3).log().term(2).value() == t1);
    CHECK(c.raft(3).log().last_index() == 3);  // entry 2 was kept, plus its own no-op
}

TEST_CASE("§3.10 a transfer that cannot finish is abandoned after an election timeout",
          "[raft][transfer]") {
    Cluster c(3);
    c.elect(1);
    c.isolate(3);
    REQUIRE(c.raft(1).transfer_leadership(3));
    c.tick(1, c.raft(1).config().election_tick + 1);
    c.deliver_all();
    CHECK(c.raft(1).role() == Role::leader);
    CHECK(c.raft(1).transfer_target() == 0);
    CHECK(c.raft(1).propose(cmd(1), 0));
}

TEST_CASE("§3.10 transfer arguments are checked", "[raft][transfer]") {
    Cluster c(3);
    c.elect(1);
    CHECK(c.raft(1).transfer_leadership(1).error() == Error::invalid);
    CHECK(c.raft(1).transfer_leadership(9).error() == Error::unknown_peer);
    CHECK(c.raft(2).transfer_leadership(3).error() == Error::not_leader);
}
