// Snapshots (§5): the core asks for them, sends them, installs them; compaction.
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

TEST_CASE("§5.1 the core asks for a snapshot once enough log is applied", "[raft][snapshot]") {
    Cluster c(3, [](Config& cfg) { cfg.snapshot_threshold = 5; });
    c.elect(1);
    for (int k = 0; k < 3; ++k)
        c.raft(1).propose(cmd(k), 0);
    c.deliver_all();
    CHECK(c.storage(1).snapshot().meta.index == 0);  // 4 applied < 5
    for (int k = 0; k < 3; ++k)
        c.raft(1).propose(cmd(k), 0);
    c.deliver_all();
    CHECK(c.storage(1).snapshot().meta.index >= 5);  // the harness took it when asked
    CHECK(c.storage(1).first_index() == c.storage(1).snapshot().meta.index + 1);
}

TEST_CASE("§5.3 a follower behind the leader's first index gets the snapshot", "[raft][snapshot]") {
    Cluster c(3, [](Config& cfg) { cfg.snapshot_threshold = 4; });
    c.elect(1);
    c.isolate(3);
    for (int k = 0; k < 10; ++k) {
        c.raft(1).propose(cmd(k), 0);
        c.deliver_all();
    }
    REQUIRE(c.storage(1).first_index() > 2);  // compacted past what node 3 has
    c.heal();
    int snapshots = 0;
    c.set_drop([&](Message& m) {
        snapshots += m.type == MessageType::snapshot ? 1 : 0;
        return false;
    });
    c.tick(1, 2);
    c.deliver_all();
    CHECK(snapshots >= 1);
    CHECK(c.raft(3).log().committed() == c.raft(1).log().committed());
    CHECK(c.storage(3).snapshot().meta.index >= 4);
    // And replication resumes normally after it.
    c.raft(1).propose(cmd(99), 0);
    c.deliver_all();
    CHECK(c.raft(3).log().last_index() == c.raft(1).log().last_index());
    CHECK(c.node(3).applied.back().data == cmd(99));
}

TEST_CASE("§5.3 a snapshot whose last entry we hold keeps the log after it", "[raft][snapshot]") {
    Cluster c(3);
    c.elect(1);
    for (int k = 0; k < 4; ++k)
        c.raft(1).propose(cmd(k), 0);
    c.deliver_all();
    Term t = c.raft(1).term();
    Index last = c.raft(2).log().last_index();
    Message snap{.type = MessageType::snapshot, .from = 1, .to = 2, .term = t};
    snap.snapshot = Snapshot{{3, t, 0}, "state@3"};
    // Make commit lag so the snapshot is not stale: a fresh node 2 view.
    c.deliver(snap);
    CHECK(c.raft(2).log().last_index() == last);  // nothing dropped
    CHECK_FALSE(c.node(2).readies.back().snapshot);
}

TEST_CASE("a stale snapshot (behind commit) is acknowledged and ignored", "[raft][snapshot]") {
    Cluster c(3);
    c.elect(1);
    for (int k = 0; k < 4; ++k)
        c.raft(1).propose(cmd(k), 0);
    c.deliver_all();
    c.tick_all(2);
    c.deliver_all();
    Index commit = c.raft(2).log().committed();
    Message snap{.type = MessageType::snapshot, .from = 1, .to = 2, .term = c.raft(1).term()};
    snap.snapshot = Snapshot{{2, 1, 0}, "old"};
    c.deliver(snap);
    const Ready& rd = c.node(2).readies.back();
    CHECK_FALSE(rd.snapshot);
    REQUIRE(rd.messages.size() == 1);
    CHECK(rd.messages[0].index == commit);
}
