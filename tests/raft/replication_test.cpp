// Log replication (§3.5), commitment (§3.6.2), flow control, batching, log time.
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

namespace {
int count(const std::vector<Message>& msgs, MessageType t, NodeId to = 0) {
    int n = 0;
    for (const Message& m : msgs)
        n += m.type == t && (to == 0 || m.to == to) ? 1 : 0;
    return n;
}
}  // namespace

TEST_CASE("§3.6.2 a new leader appends a no-op of its term", "[raft][replication]") {
    Cluster c(3);
    c.elect(1);
    const RaftLog& log = c.raft(1).log();
    CHECK(log.last_index() == 1);
    CHECK(log.term(1).value() == c.raft(1).term());
    CHECK(c.storage(2).at(1).type == EntryType::noop);
    CHECK(log.committed() == 1);
}

TEST_CASE("§3.5 entries reach every follower and are applied in order", "[raft][replication]") {
    Cluster c(3);
    c.elect(1);
    for (int k = 0; k < 5; ++k)
        REQUIRE(c.raft(1).propose(cmd(k), 0));
    c.deliver_all();
    for (NodeId id : {1, 2, 3}) {
        CHECK(c.raft(id).log().committed() == 6);
        REQUIRE(c.node(id).applied.size() == 6);
        CHECK(c.node(id).applied[3].data == cmd(2));
        CHECK(c.node(id).applied[3].index == 4);
    }
}

TEST_CASE("persist before send: an append is acked only in the Ready that stores it",
          "[raft][replication]") {
    Cluster c(3);
    c.elect(1);
    REQUIRE(c.raft(1).propose(cmd(1), 0));
    auto msgs = c.take_messages();
    REQUIRE(count(msgs, MessageType::append, 2) == 1);
    for (const Message& m : msgs) {
        if (m.to == 2) c.raft(2).step(m);
    }
    REQUIRE(c.raft(2).has_ready());
    Ready rd = c.raft(2).ready();
    REQUIRE(rd.entries.size() == 1);
    REQUIRE(count(rd.messages, MessageType::append_resp) == 1);  // sent after rd.entries are stored
    CHECK(c.storage(2).last_index() == 1);                       // not yet stored
    c.raft(2).advance(rd);  // (what the shell would do after storing them)
}

TEST_CASE("persist before count: the leader counts itself only after advance()",
          "[raft][replication]") {
    Cluster c(3);
    c.elect(1);
    c.cut(1, 2);
    c.cut(1, 3);
    REQUIRE(c.raft(1).propose(cmd(1), 0));
    Ready rd = c.raft(1).ready();
    REQUIRE(rd.entries.size() == 1);
    // Follower 2 acks entry 2 before the leader has stored it: 1 of 3 is not a majority.
    c.raft(1).step({.type = MessageType::append_resp,
                    .from = 2,
                    .to = 1,
                    .term = c.raft(1).term(),
                    .index = 2,
                    .context = c.raft(1).progress(2)->generation});
    CHECK(c.raft(1).log().committed() == 1);
    c.storage(1).append(rd.entries);
    c.raft(1).advance(rd);
    CHECK(c.raft(1).log().committed() == 2);
}

TEST_CASE("§3.5 a follower rejects an append whose previous entry does not match",
          "[raft][replication]") {
    Cluster c(3);
    c.deliver({.type = MessageType::append,
               .from = 2,
               .to = 1,
               .term = 3,
               .index = 5,
               .log_term = 3,
               .entries = {Entry{3, 6, 0, EntryType::normal, "x"}}});
    auto& out = c.node(1).readies.back().messages;
    REQUIRE(out.size() == 1);
    CHECK(out[0].reject);
    CHECK(out[0].index == 5);
    CHECK(out[0].hint_index == 0);  // empty log: the leader should start from 1
    CHECK(c.raft(1).log().last_index() == 0);
}

TEST_CASE("§3.5 a leader overwrites a follower's conflicting suffix", "[raft][replication]") {
    Cluster c(3);
    c.elect(1);
    c.isolate(1);
    // The isolated leader appends entries nobody else gets.
    for (int k = 0; k < 3; ++k)
        c.raft(1).propose(cmd(100 + k), 0);
    c.deliver_all();
    c.heal();
    c.cut(1, 2);
    c.cut(1, 3);
    c.elect(2);
    REQUIRE(c.raft(2).role() == Role::leader);
    c.raft(2).propose(cmd(7), 0);
    c.deliver_all();
    c.heal();
    c.tick(2, 3);
    c.deliver_all();
    CHECK(c.raft(1).role() == Role::follower);
    CHECK(c.raft(1).log().last_index() == c.raft(2).log().last_index());
    for (Index i = 1; i <= c.raft(2).log().last_index(); ++i) {
        CHECK(c.raft(1).log().term(i).value() == c.raft(2).log().term(i).value());
    }
    for (const Entry& e : c.node(1).applied)
        CHECK(e.data.view().rfind("cmd10", 0) != 0);  // never applied
}

TEST_CASE("§5.3 fast backtracking skips a term of conflicts per round trip",
          "[raft][replication]") {
    // Follower 3 holds 50 entries of a dead term; the new leader must find the match
    // point in a few round trips, not 50.
    Cluster c(3, [](Config& cfg) { cfg.max_entries_per_msg = 1000; });
    c.elect(1);
    c.isolate(1);
    c.cut_one_way(1, 3);
    for (int k = 0; k < 50; ++k)
        c.raft(1).propose(cmd(k), 0);
    c.heal();
    c.cut(1, 2);
    c.cut(2, 3);
    c.cut_one_way(1, 3);
    c.deliver_all();  // node 3 gets the 50 entries; they never commit
    c.heal();
    c.isolate(1);
    c.elect(2);
    REQUIRE(c.raft(2).role() == Role::leader);
    for (int k = 0; k < 5; ++k)
        c.raft(2).propose(cmd(200 + k), 0);
    int rejects = 0;
    c.set_drop([&](Message& m) {
        if (m.type == MessageType::append_resp && m.reject) ++rejects;
        return false;
    });
    c.cut(1, 2);
    c.cut(1, 3);
    c.deliver_all();
    CHECK(c.raft(3).log().last_index() == c.raft(2).log().last_index());
    CHECK(rejects <= 2);
}

TEST_CASE("flow control: at most max_inflight_msgs appends in flight per follower",
          "[raft][flow]") {
    Cluster c(3, [](Config& cfg) {
        cfg.max_entries_per_msg = 1;
        cfg.max_inflight_msgs = 4;
    });
    c.elect(1);
    for (int k = 0; k < 20; ++k)
        c.raft(1).propose(cmd(k), 0);
    auto msgs = c.take_messages();
    CHECK(count(msgs, MessageType::append, 2) == 4);
    CHECK(count(msgs, MessageType::append, 3) == 4);
    for (const Message& m : msgs)
        c.deliver(m);
    c.deliver_all();
    CHECK(c.raft(2).log().last_index() == 21);  // the window slides as acks return
}

TEST_CASE("batching: proposals between two Readies share one append per follower", "[raft][flow]") {
    Cluster c(3);
    c.elect(1);
    for (int k = 0; k < 10; ++k)
        c.raft(1).propose(cmd(k), 0);
    auto msgs = c.take_messages();
    REQUIRE(count(msgs, MessageType::append, 2) == 1);
    for (const Message& m : msgs) {
        if (m.to == 2 && m.type == MessageType::append) CHECK(m.entries.size() == 10);
    }
    // And a batch propose is one call.
    std::vector<std::string> batch{cmd(1), cmd(2), cmd(3)};
    auto first = c.raft(1).propose(batch, 0);
    REQUIRE(first);
    CHECK(c.raft(1).log().last_index() == first.value() + 2);
}

TEST_CASE("proposals are refused with not_leader on a follower", "[raft][replication]") {
    Cluster c(3);
    c.elect(1);
    auto r = c.raft(2).propose(cmd(1), 0);
    REQUIRE_FALSE(r);
    CHECK(r.error() == Error::not_leader);
    CHECK(c.raft(2).leader() == 1);
}

TEST_CASE("log time: stamped by the leader, never going back across leaders", "[raft][logtime]") {
    Cluster c(3);
    c.now_ms = 5000;
    c.elect(1);
    c.raft(1).propose(cmd(1), 5000);
    c.raft(1).propose(cmd(2), 4000);  // the leader's clock steps back: time holds
    c.deliver_all();
    CHECK(c.raft(1).log().last_time() == 5000);
    // A new leader whose clock is far behind still stamps >= the last entry's time.
    c.isolate(1);
    c.now_ms = 100;
    c.elect(2);
    REQUIRE(c.raft(2).role() == Role::leader);
    c.raft(2).propose(cmd(3), 100);
    c.raft(2).propose(cmd(4), 6000);
    c.deliver_all();
    Millis prev = 0;
    for (const Entry& e : c.node(2).applied) {
        CHECK(e.time >= prev);
        prev = e.time;
    }
    CHECK(prev == 6000);
    CHECK(c.node(2).applied.size() == 6);
}

TEST_CASE("restart: the core resumes from storage and re-applies committed entries",
          "[raft][replication]") {
    Cluster c(3);
    c.elect(1);
    for (int k = 0; k < 3; ++k)
        c.raft(1).propose(cmd(k), 0);
    c.deliver_all();
    c.tick_all(2);
    c.deliver_all();
    Term t = c.raft(2).term();
    c.restart(2);
    CHECK(c.raft(2).term() == t);
    CHECK(c.raft(2).log().last_index() == 4);
    c.process(2);
    CHECK(c.node(2).applied.size() == 4);  // commit index was persisted with the hard state
}

TEST_CASE("async shell: input between ready() and advance() lands in the next Ready",
          "[raft][ready]") {
    // A storage thread may still be writing Ready N while the loop steps a message that
    // rewrites the same entries; Ready N+1 must carry the rewrite, and nothing written
    // by N may be taken as durable in its place.
    Cluster c(3, [](Config& cfg) {
        cfg.check_quorum = false;
        cfg.pre_vote = false;
    });
    Raft& f = c.raft(3);
    f.step({.type = MessageType::append,
            .from = 1,
            .to = 3,
            .term = 1,
            .index = 0,
            .log_term = 0,
            .entries = {Entry{1, 1, 0, EntryType::noop, {}},
                        Entry{1, 2, 0, EntryType::normal, "old"}}});
    Ready first = f.ready();
    REQUIRE(first.entries.size() == 2);
    // Before `first` is durable, the leader of term 2 replaces entry 2.
    f.step({.type = MessageType::append,
            .from = 2,
            .to = 3,
            .term = 2,
            .index = 1,
            .log_term = 1,
            .entries = {Entry{2, 2, 0, EntryType::normal, "new"}}});
    c.storage(3).append(first.entries);
    c.storage(3).set_hard_state(*first.hard_state);
    f.advance(first);
    CHECK(f.log().stable_last_index() == 1);  // entry 2 on disk is the old one
    REQUIRE(f.has_ready());
    Ready second = f.ready();
    REQUIRE(second.entries.size() == 1);
    CHECK(second.entries[0].data == "new");
    // The acknowledgement of entry 2 to the new leader travels with the rewrite.
    bool acked_new = false;
    for (const Message& m : second.messages)
        acked_new |= m.to == 2 && !m.reject && m.index == 2;
    CHECK(acked_new);
    for (const Message& m : first.messages)
        CHECK(m.to != 2);
    c.storage(3).append(second.entries);
    f.advance(second);
    CHECK(c.storage(3).at(2).data == "new");
    CHECK(f.log().stable_last_index() == 2);
}
