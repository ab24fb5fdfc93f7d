// Membership changes (§4.1 single-server changes, §4.2.1 learners).
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

namespace {

Membership members(std::vector<NodeId> voters, std::vector<NodeId> learners = {}) {
    return Membership{std::move(voters), std::move(learners), {}};
}

// Proposes `next` on `leader`, delivers everything and checks that it is in force.
void change(Cluster& c, NodeId leader, const Membership& next) {
    auto r = c.raft(leader).propose_membership(next, 0);
    REQUIRE(r.has_value());
    c.deliver_all();
    c.tick(leader);  // the next heartbeat carries the commit index
    c.deliver_all();
    REQUIRE(c.raft(leader).log().committed() >= r.value());
}

}  // namespace

TEST_CASE("membership: encoding round trip and malformed data", "[raft][membership]") {
    Membership m{{1, 2, 5}, {7}, "who is who"};
    auto d = decode_membership(encode_membership(m));
    REQUIRE(d.has_value());
    CHECK(*d == m);
    CHECK_FALSE(decode_membership(""));
    CHECK_FALSE(decode_membership(encode_membership(members({2, 1}))));       // not sorted
    CHECK_FALSE(decode_membership(encode_membership(members({1, 2}, {2}))));  // both roles
    CHECK_FALSE(decode_membership(encode_membership(members({}))));           // no voter
    std::string cut = encode_membership(m);
    CHECK_FALSE(decode_membership(std::string_view(cut).substr(0, 12)));
}

TEST_CASE("membership: a learner catches up but neither votes nor counts", "[raft][membership]") {
    Cluster c(3);
    c.elect(1);
    c.add_node(4);
    CHECK(c.raft(4).membership().empty());
    change(c, 1, members({1, 2, 3}, {4}));
    CHECK(c.raft(4).membership() == members({1, 2, 3}, {4}));
    CHECK(c.raft(4).log().last_index() == c.raft(1).log().last_index());

    // A learner never campaigns, however long it hears nothing.
    c.isolate(4);
    Term t = c.raft(4).term();
    c.tick(4, 10 * c.raft(4).config().election_tick);
    CHECK(c.raft(4).role() == Role::follower);
    CHECK(c.raft(4).term() == t);

    // Its acknowledgement does not count toward a commit.
    c.heal();
    c.cut(1, 2);
    c.cut(1, 3);
    Index before = c.raft(1).log().committed();
    REQUIRE(c.raft(1).propose(cmd(1), 0));
    c.deliver_all();
    CHECK(c.raft(4).log().last_index() == c.raft(1).log().last_index());
    CHECK(c.raft(1).log().committed() == before);
}

TEST_CASE("membership: promotion waits for the learner to catch up", "[raft][membership]") {
    Cluster c(3, [](Config& cfg) { cfg.promote_lag = 2; });
    c.elect(1);
    c.add_node(4);
    change(c, 1, members({1, 2, 3}, {4}));
    c.cut(1, 4);
    for (int k = 0; k < 5; ++k)
        REQUIRE(c.raft(1).propose(cmd(k), 0));
    c.deliver_all();
    CHECK(c.raft(1).propose_membership(members({1, 2, 3, 4}), 0).error() == Error::not_caught_up);
    c.heal();
    c.tick(1);
    c.deliver_all();
    change(c, 1, members({1, 2, 3, 4}));
    CHECK(c.raft(4).is_voter());
    // Four voters: a commit needs three of them.
    c.cut(1, 2);
    c.cut(1, 3);
    Index before = c.raft(1).log().committed();
    REQUIRE(c.raft(1).propose(cmd(9), 0));
    c.deliver_all();
    CHECK(c.raft(1).log().committed() == before);
    c.heal();
    c.cut(1, 3);
    c.tick(1);
    c.deliver_all();
    CHECK(c.raft(1).log().committed() > before);
}

TEST_CASE("membership: one change at a time, and only after the term's first commit",
          "[raft][membership]") {
    Cluster c(3);
    c.elect(1);
    c.add_node(4);
    c.add_node(5);
    REQUIRE(c.raft(1).propose_membership(members({1, 2, 3}, {4}), 0));
    CHECK(c.raft(1).propose_membership(members({1, 2, 3}, {4, 5}), 0).error() ==
          Error::change_pending);
    c.deliver_all();
    c.tick(1);
    c.deliver_all();
    // Two voters at once, a new node straight to voter, or no change at all: refused.
    CHECK(c.raft(1).propose_membership(members({1}, {4}), 0).error() == Error::invalid);
    CHECK(c.raft(1).propose_membership(members({1, 2, 3, 5}, {4}), 0).error() == Error::invalid);
    CHECK(c.raft(1).propose_membership(members({1, 2, 3}, {4}), 0).error() == Error::invalid);
    CHECK(c.raft(2).propose_membership(members({1, 2, 3}, {4, 5}), 0).error() == Error::not_leader);

    // A new leader must first commit an entry of its own term.
    c.isolate(1);
    c.set_drop([](Message& m) { return m.type == MessageType::append_resp; });
    c.elect(2);
    REQUIRE(c.raft(2).role() == Role::leader);
    CHECK(c.raft(2).log().committed() < c.raft(2).log().last_index());
    CHECK(c.raft(2).propose_membership(members({1, 2, 3}, {4, 5}), 0).error() ==
          Error::change_pending);
}

TEST_CASE("membership: a removed leader steps down once the change commits", "[raft][membership]") {
    Cluster c(3);
    c.elect(1);
    change(c, 1, members({2, 3}));
    c.tick(1);
    c.deliver_all();
    CHECK(c.raft(1).role() == Role::follower);
    CHECK_FALSE(c.raft(1).is_voter());
    // It handed over at once (TimeoutNow to a caught-up voter).
    bool handed = c.raft(2).role() == Role::leader || c.raft(3).role() == Role::leader;
    CHECK(handed);
    // The removed node never campaigns again.
    Term t = c.raft(1).term();
    c.isolate(1);
    c.tick(1, 10 * c.raft(1).config().election_tick);
    CHECK(c.raft(1).term() == t);
    // Two voters: a commit needs both.
    NodeId leader = c.raft(2).role() == Role::leader ? 2 : 3;
    NodeId other = leader == 2 ? 3 : 2;
    c.heal();
    c.cut(leader, other);
    Index before = c.raft(leader).log().committed();
    REQUIRE(c.raft(leader).propose(cmd(1), 0));
    c.deliver_all();
    CHECK(c.raft(leader).log().committed() == before);
}

TEST_CASE("membership: a voter that alone holds its removal campaigns and commits it",
          "[raft][membership]") {
    // Two voters; the leader removes itself, the change reaches only its own log, and it
    // loses its lead. The other's log is shorter, so it cannot win without the removed
    // one's vote, which goes only to a log as long: the removed one must run, win under
    // the new membership, commit it and hand over.
    Cluster c(3);
    c.elect(1);
    change(c, 1, members({1, 2}));
    c.isolate(1);
    REQUIRE(c.raft(1).propose_membership(members({2}), 0));
    c.deliver_all();
    c.tick(1, 3 * c.raft(1).config().election_tick);  // check quorum: it steps down
    REQUIRE(c.raft(1).role() != Role::leader);
    CHECK_FALSE(c.raft(1).is_voter());
    CHECK(c.raft(1).may_campaign());
    c.heal();
    for (int round = 0; round < 60 && !(c.raft(2).role() == Role::leader); ++round) {
        c.tick_all(1);
        c.deliver_all();
    }
    CHECK(c.raft(2).role() == Role::leader);
    CHECK(c.raft(2).membership() == members({2}));
    CHECK(c.raft(2).log().committed() >= c.raft(2).membership_index());
}

TEST_CASE("membership: an uncommitted change that is overwritten is undone", "[raft][membership]") {
    Cluster c(3);
    c.elect(1);
    c.isolate(1);
    c.add_node(4);
    REQUIRE(c.raft(1).propose_membership(members({1, 2, 3}, {4}), 0));
    CHECK(c.raft(1).membership() == members({1, 2, 3}, {4}));  // in force once in the log
    c.elect(2);
    REQUIRE(c.raft(2).role() == Role::leader);
    c.raft(2).propose(cmd(1), 0);
    c.deliver_all();
    c.heal();
    c.tick(2);
    c.deliver_all();
    CHECK(c.raft(1).leader() == 2);
    CHECK(c.raft(1).membership() == members({1, 2, 3}));
    CHECK(c.raft(1).log().last_index() == c.raft(2).log().last_index());
}

TEST_CASE("membership: it survives a restart and travels with a snapshot", "[raft][membership]") {
    Cluster c(3, [](Config& cfg) { cfg.snapshot_threshold = 4; });
    c.elect(1);
    c.add_node(4);
    change(c, 1, members({1, 2, 3}, {4}));
    c.restart(4);
    CHECK(c.raft(4).membership() == members({1, 2, 3}, {4}));

    // Node 5 joins after the leader's log was compacted past the change: it learns the
    // membership from the snapshot.
    for (int k = 0; k < 10; ++k)
        c.raft(1).propose(cmd(k), 0);
    c.deliver_all();
    c.tick(1);
    c.deliver_all();
    REQUIRE(c.storage(1).first_index() > 3);
    c.add_node(5);
    change(c, 1, members({1, 2, 3}, {4, 5}));
    c.tick(1);
    c.deliver_all();
    CHECK(c.raft(5).membership() == members({1, 2, 3}, {4, 5}));
    CHECK(c.raft(5).log().last_index() == c.raft(1).log().last_index());
}
