// Elections: §3.3 terms, §3.4 timeouts and votes, §3.6.1 up-to-date logs, §9.6 PreVote,
// §6.2 CheckQuorum.
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

TEST_CASE("§3.4 a follower campaigns after a randomized timeout in [et, 2et)", "[raft][election]") {
    std::set<int> seen;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        Cluster c(3, [&](Config& cfg) {
            cfg.seed = seed;
            cfg.pre_vote = false;
        });
        Raft& r = c.raft(1);
        int ticks = 0;
        while (r.role() == Role::follower && ticks < 100) {
            r.tick(0);
            ++ticks;
        }
        CHECK(ticks >= 10);
        CHECK(ticks <= 19);
        seen.insert(ticks);
    }
    CHECK(seen.size() >= 5);  // actually randomized
}

TEST_CASE("§3.4 the core is deterministic given its seed", "[raft][election]") {
    auto timeouts = [](std::uint64_t seed) {
        Cluster c(3, [&](Config& cfg) { cfg.seed = seed; });
        std::vector<int> out;
        for (NodeId id : {1, 2, 3}) {
            int t = 0;
            while (c.raft(id).role() == Role::follower) {
                c.raft(id).tick(0);
                ++t;
            }
            out.push_back(t);
        }
        return out;
    };
    CHECK(timeouts(7) == timeouts(7));
}

TEST_CASE("§3.4 a candidate persists term and self-vote before asking", "[raft][election]") {
    Cluster c(3, [](Config& cfg) { cfg.pre_vote = false; });
    c.elect(1);
    REQUIRE(c.raft(1).role() == Role::leader);
    const Ready& first = c.node(1).readies.front();
    REQUIRE(first.hard_state);
    CHECK(first.hard_state->term == 1);
    CHECK(first.hard_state->vote == 1);
    int vote_requests = 0;
    for (const Message& m : first.messages)
        vote_requests += m.type == MessageType::vote ? 1 : 0;
    CHECK(vote_requests == 2);
}

TEST_CASE("§3.4 a vote is granted once per term and travels with its hard state",
          "[raft][election]") {
    Cluster c(3, [](Config& cfg) { cfg.pre_vote = false; });
    Message req{
        .type = MessageType::vote, .from = 2, .to = 1, .term = 5, .index = 0, .log_term = 0};
    c.deliver(req);
    const Ready& rd = c.node(1).readies.back();
    REQUIRE(rd.hard_state);
    CHECK(rd.hard_state->term == 5);
    CHECK(rd.hard_state->vote == 2);
    REQUIRE(rd.messages.size() == 1);
    CHECK(rd.messages[0].type == MessageType::vote_resp);
    CHECK_FALSE(rd.messages[0].reject);
    CHECK(c.storage(1).hard_state().vote == 2);

    Message other = req;
    other.from = 3;
    c.deliver(other);
    const Ready& rd2 = c.node(1).readies.back();
    REQUIRE(rd2.messages.size() == 1);
    CHECK(rd2.messages[0].reject);  // already voted for 2 in term 5

    c.deliver(req);  // the same candidate asking again is answered the same way
    CHECK_FALSE(c.node(1).readies.back().messages[0].reject);
}

TEST_CASE("§3.4 a vote survives a restart", "[raft][election]") {
    Cluster c(3, [](Config& cfg) {
        cfg.pre_vote = false;
        cfg.check_quorum = false;
    });
    c.deliver({.type = MessageType::vote, .from = 2, .to = 1, .term = 5});
    c.restart(1);
    CHECK(c.raft(1).term() == 5);
    CHECK(c.raft(1).vote() == 2);
    c.deliver({.type = MessageType::vote, .from = 3, .to = 1, .term = 5});
    CHECK(c.node(1).readies.back().messages[0].reject);
}

TEST_CASE("§3.6.1 no vote for a candidate whose log is behind", "[raft][election]") {
    Cluster c(3, [](Config& cfg) {
        cfg.pre_vote = false;
        cfg.check_quorum = false;
    });
    c.elect(1);
    c.raft(1).propose(cmd(1), 0);
    c.deliver_all();
    // Node 3 asks with an older log (last index 1, term 1 < node 2's last index 2).
    c.deliver(
        {.type = MessageType::vote, .from = 3, .to = 2, .term = 9, .index = 1, .log_term = 1});
    auto& resp = c.node(2).readies.back().messages;
    REQUIRE(resp.size() == 1);
    CHECK(resp[0].reject);
    CHECK(c.raft(2).term() == 9);  // the term is still adopted (§3.3)
    // A higher last term wins even with a shorter log.
    c.deliver(
        {.type = MessageType::vote, .from = 3, .to = 2, .term = 10, .index = 1, .log_term = 5});
    CHECK_FALSE(c.node(2).readies.back().messages[0].reject);
}

TEST_CASE("§3.3 a higher term turns a leader into a follower", "[raft][election]") {
    Cluster c(3);
    c.elect(1);
    REQUIRE(c.raft(1).role() == Role::leader);
    c.deliver({.type = MessageType::append_resp, .from = 2, .to = 1, .term = 7});
    CHECK(c.raft(1).role() == Role::follower);
    CHECK(c.raft(1).term() == 7);
}

TEST_CASE("§3.3 a message from an older term is refused with the current term",
          "[raft][election]") {
    Cluster c(3);
    c.elect(1);
    Term t = c.raft(2).term();
    c.deliver({.type = MessageType::append, .from = 3, .to = 2, .term = t - 1, .index = 0});
    auto& out = c.node(2).readies.back().messages;
    REQUIRE(out.size() == 1);
    CHECK(out[0].type == MessageType::append_resp);
    CHECK(out[0].term == t);  // tells the stale leader it is stale
    CHECK(c.raft(2).leader() == 1);
}

TEST_CASE("§3.4 a split vote is retried with a new timeout until someone wins",
          "[raft][election]") {
    Cluster c(3, [](Config& cfg) { cfg.pre_vote = false; });
    for (int round = 0; round < 200; ++round) {
        c.tick_all();
        c.deliver_all();
        int leaders = 0;
        for (NodeId id : {1, 2, 3})
            leaders += c.raft(id).role() == Role::leader ? 1 : 0;
        if (leaders == 1) break;
    }
    int leaders = 0;
    for (NodeId id : {1, 2, 3})
        leaders += c.raft(id).role() == Role::leader ? 1 : 0;
    CHECK(leaders == 1);
}

TEST_CASE("§9.6 pre-vote: a node cut off from everyone does not raise its term",
          "[raft][prevote]") {
    Cluster c(3);
    c.elect(1);
    Term t = c.raft(1).term();
    c.isolate(3);
    for (int k = 0; k < 10; ++k) {
        c.tick(3, 30);
        c.deliver_all();
    }
    CHECK(c.raft(3).term() == t);
    CHECK(c.raft(3).role() == Role::pre_candidate);
}

TEST_CASE("§6.2 check quorum: a leader that hears no majority steps down", "[raft][checkquorum]") {
    Cluster c(3);
    c.elect(1);
    c.isolate(1);
    for (int k = 0; k < 25; ++k) {
        c.tick(1);
        c.deliver_all();
    }
    CHECK(c.raft(1).role() == Role::follower);
}

TEST_CASE("§6.2 without check quorum the isolated leader stays leader", "[raft][checkquorum]") {
    Cluster c(3, [](Config& cfg) {
        cfg.check_quorum = false;
        cfg.pre_vote = false;
    });
    c.elect(1);
    c.isolate(1);
    for (int k = 0; k < 25; ++k) {
        c.tick(1);
        c.deliver_all();
    }
    CHECK(c.raft(1).role() ==
          Role::leader);  // the contrast that makes the test above mean something
}

TEST_CASE("§4.2.3 a follower that hears its leader ignores vote requests", "[raft][checkquorum]") {
    Cluster c(3);
    c.elect(1);
    Term t = c.raft(2).term();
    c.deliver({.type = MessageType::vote,
               .from = 3,
               .to = 2,
               .term = t + 1,
               .index = 99,
               .log_term = 99});
    CHECK(c.raft(2).term() == t);
    bool answered = !c.node(2).readies.empty() && !c.node(2).readies.back().messages.empty() &&
                    c.node(2).readies.back().messages.back().type == MessageType::vote_resp;
    CHECK_FALSE(answered);
    CHECK(c.raft(2).leader() == 1);
}

TEST_CASE("a single-node cluster elects itself and commits alone", "[raft][election]") {
    Cluster c(1);
    c.tick(1, 30);
    REQUIRE(c.raft(1).role() == Role::leader);
    REQUIRE(c.raft(1).propose(cmd(1), 0));
    c.process(1);
    CHECK(c.raft(1).log().committed() == 2);
    CHECK(c.node(1).applied.size() == 2);
}
