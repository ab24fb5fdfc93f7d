// Linearizable reads: ReadIndex (§6.4) and the leader lease (§6.4.1).
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

TEST_CASE("§6.4 ReadIndex answers after a heartbeat round, at the commit index", "[raft][read]") {
    Cluster c(3);
    c.elect(1);
    c.raft(1).propose(cmd(1), 0);
    c.deliver_all();
    REQUIRE(c.raft(1).read_index(77));
    c.process(1);
    CHECK(c.node(1).reads.empty());  // not before a majority confirmed leadership
    c.deliver_all();
    REQUIRE(c.node(1).reads.size() == 1);
    CHECK(c.node(1).reads[0].context == 77);
    CHECK(c.node(1).reads[0].index == 2);
}

TEST_CASE("§6.4 a leader cut off from the majority never answers a read", "[raft][read]") {
    Cluster c(3);
    c.elect(1);
    c.isolate(1);
    REQUIRE(c.raft(1).read_index(5));
    for (int k = 0; k < 30; ++k) {
        c.tick(1);
        c.deliver_all();
    }
    CHECK(c.node(1).reads.empty());
    CHECK(c.raft(1).read_index(6).error() == Error::not_leader);  // it stepped down
}

TEST_CASE("§6.4 ReadIndex on a follower is refused", "[raft][read]") {
    Cluster c(3);
    c.elect(1);
    CHECK(c.raft(2).read_index(1).error() == Error::not_leader);
}

TEST_CASE("§6.4.1 lease reads: served at once while the lease holds, not after",
          "[raft][read][lease]") {
    Cluster c(3, [](Config& cfg) { cfg.lease_read = true; });
    // Lease reads forbid forget_leader(): let an election happen by the clock.
    NodeId l = 0;
    for (int k = 0; k < 200 && l == 0; ++k) {
        c.tick_all();
        c.deliver_all();
        for (NodeId id : {1, 2, 3})
            if (c.raft(id).role() == Role::leader) l = id;
    }
    REQUIRE(l != 0);
    c.tick_all(1);
    c.deliver_all();
    REQUIRE(c.raft(l).lease_valid());
    REQUIRE(c.raft(l).read_index(1));
    c.process(l);
    CHECK(c.node(l).reads.size() == 1);  // no heartbeat round needed
    // Without answers from followers the lease runs out before an election could start.
    c.isolate(l);
    int ticks = 0;
    while (c.raft(l).lease_valid() && ticks < 50) {
        c.tick(l);
        ++ticks;
    }
    CHECK(ticks <= c.raft(l).config().election_tick);
    CHECK_FALSE(c.raft(l).lease_valid());
    // Reads are then answered only after a heartbeat round, which cannot complete.
    REQUIRE(c.raft(l).read_index(2));
    c.process(l);
    CHECK(c.node(l).reads.size() == 1);
}

TEST_CASE("§6.4.1 the lease needs check quorum", "[raft][read][lease]") {
    Config cfg;
    cfg.id = 1;
    cfg.voters = {1, 2, 3};
    cfg.lease_read = true;
    cfg.check_quorum = false;
    CHECK_FALSE(cfg.valid());
    cfg.check_quorum = true;
    CHECK(cfg.valid());
}
