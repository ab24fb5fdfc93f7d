// What the core says about ordering (ready.h): which messages may leave before the
// write, and which writes must be fsynced. The shell only obeys these.
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

namespace {
int count(const std::vector<Message>& msgs, MessageType t) {
    int n = 0;
    for (const Message& m : msgs)
        n += m.type == t ? 1 : 0;
    return n;
}
}  // namespace

TEST_CASE("a leader's appends may leave before its own write; they need a sync", "[raft][ready]") {
    Cluster c(3);
    c.elect(1);
    REQUIRE(c.raft(1).propose(cmd(1), 0));
    Ready rd = c.raft(1).ready();
    REQUIRE(rd.entries.size() == 1);
    CHECK(rd.must_sync);
    CHECK(count(rd.messages_before_persist, MessageType::append) == 2);
    CHECK(count(rd.messages, MessageType::append) == 0);
    c.raft(1).advance(rd);
}

TEST_CASE("a follower's acknowledgement waits for its synced write", "[raft][ready]") {
    Cluster c(3);
    c.elect(1);
    REQUIRE(c.raft(1).propose(cmd(1), 0));
    c.process(1);
    for (const Message& m : c.take_messages())
        if (m.to == 2 && m.type == MessageType::append) c.raft(2).step(m);
    Ready rd = c.raft(2).ready();
    REQUIRE(rd.entries.size() == 1);
    CHECK(rd.must_sync);
    CHECK(rd.messages_before_persist.empty());
    CHECK(count(rd.messages, MessageType::append_resp) == 1);
    c.raft(2).advance(rd);
}

TEST_CASE("a vote needs a sync and leaves after it", "[raft][ready]") {
    Cluster c(3, [](Config& cfg) { cfg.pre_vote = false; });
    c.raft(2).forget_leader();
    c.raft(1).campaign_now();
    c.process(1);
    for (const Message& m : c.take_messages())
        if (m.to == 2) c.raft(2).step(m);
    Ready rd = c.raft(2).ready();
    REQUIRE(rd.hard_state);
    CHECK(rd.hard_state->vote == 1);
    CHECK(rd.must_sync);
    CHECK(rd.messages_before_persist.empty());
    CHECK(count(rd.messages, MessageType::vote_resp) == 1);
    c.raft(2).advance(rd);
}

TEST_CASE("a commit index that moved alone needs no sync", "[raft][ready]") {
    Cluster c(3);
    c.elect(1);
    REQUIRE(c.raft(1).propose(cmd(1), 0));
    c.process(1);
    // Entry 2 reaches node 2 and node 3; their acks commit it on the leader, whose next
    // heartbeat tells node 2 only that the commit index moved.
    for (const Message& m : c.take_messages())
        if (m.type == MessageType::append) c.deliver(m);
    for (const Message& m : c.take_messages())
        if (m.to == 1) c.deliver(m);
    REQUIRE(c.raft(1).log().committed() == 2);
    c.take_messages();
    c.tick(1, 2);  // heartbeat
    bool saw_commit_only = false;
    for (const Message& m : c.take_messages()) {
        if (m.to != 2 || m.type != MessageType::heartbeat) continue;
        c.raft(2).step(m);
        Ready rd = c.raft(2).ready();
        if (rd.hard_state && rd.entries.empty()) {
            CHECK(rd.hard_state->commit == 2);
            CHECK_FALSE(rd.must_sync);
            saw_commit_only = true;
        }
        c.raft(2).advance(rd);
        break;
    }
    CHECK(saw_commit_only);
}

TEST_CASE("what commits while the leader's own write is in flight is taken once, in order",
          "[raft][ready]") {
    Cluster c(3);
    c.elect(1);
    REQUIRE(c.raft(1).propose(cmd(1), 0));
    Ready writing = c.raft(1).ready();  // the leader's write of the entry, not done yet
    REQUIRE(writing.entries.size() == 1);
    const Index index = writing.entries[0].index;
    // Both followers store it and acknowledge: a majority without the leader's own disk.
    for (const Message& m : writing.messages_before_persist)
        if (m.type == MessageType::append) c.deliver(m);
    for (const Message& m : c.take_messages())
        if (m.to == 1) c.raft(1).step(m);
    REQUIRE(c.raft(1).log().committed() == index);

    CHECK(c.raft(1).take_committed(index - 1).empty());  // not past the limit
    auto taken = c.raft(1).take_committed(index);
    REQUIRE(taken.size() == 1);
    CHECK(taken[0].data == cmd(1));
    CHECK(c.raft(1).take_committed(index).empty());  // and only once
    c.raft(1).advance(writing);
    if (c.raft(1).has_ready()) {
        Ready next = c.raft(1).ready();
        CHECK(next.committed_entries.empty());  // no Ready hands it out again
        c.raft(1).advance(next);
    }
}
