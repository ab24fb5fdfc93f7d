// Classic bug: a freshly elected leader answers ReadIndex with its own commit index,
// which may lag what the previous leader committed (and acknowledged). §6.4 step 1:
// hold reads until the leader has committed an entry of its own term.
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

TEST_CASE("bug: stale ReadIndex on a fresh leader", "[raft][read][bug]") {
    Cluster c(3);
    c.elect(1);
    c.raft(1).propose(cmd(1), 0);
    // Entry 2 commits on 1 and 2; node 2 does not learn the new commit index.
    c.cut(1, 3);
    c.set_drop([](Message& m) {
        return m.type == MessageType::heartbeat ||
               (m.type == MessageType::append && m.entries.empty());
    });
    c.deliver_all();
    REQUIRE(c.raft(1).log().committed() == 2);
    REQUIRE(c.raft(2).log().committed() == 1);
    // Node 1 dies; node 2 wins (its log is complete) with commit index still 1.
    // Appends are blocked so that the new leader's no-op cannot commit yet.
    c.set_drop([](Message& m) { return m.type == MessageType::append; });
    c.heal();
    c.isolate(1);
    c.elect(2);
    REQUIRE(c.raft(2).role() == Role::leader);
    REQUIRE(c.raft(2).log().committed() == 1);
    REQUIRE(c.raft(2).read_index(42));
    c.tick(2, 3);
    c.deliver_all();
    CHECK(c.node(2).reads.empty());  // held: answering now would return index 1 < 2
    // Once the no-op commits, the read is answered at an index covering entry 2.
    c.set_drop({});
    c.tick(2);
    c.deliver_all();
    REQUIRE(c.node(2).reads.size() == 1);
    CHECK(c.node(2).reads[0].index >= 3);
}
