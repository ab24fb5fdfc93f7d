// Classic bug: a follower that still hears a healthy leader grants a pre-vote to a
// node that merely lost contact (one-way partition), letting it depose the leader.
// With PreVote + CheckQuorum, such a follower refuses (§9.6 + §4.2.3).
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

TEST_CASE("bug: pre-vote granted by a follower that still hears the leader",
          "[raft][prevote][bug]") {
    Cluster c(3);
    c.elect(1);
    Term t = c.raft(1).term();
    // Node 3 stops hearing the leader (but everyone else is fine).
    c.cut_one_way(1, 3);
    for (int k = 0; k < 60; ++k) {
        c.tick_all();
        c.deliver_all();
    }
    CHECK(c.raft(1).role() == Role::leader);
    CHECK(c.raft(1).term() == t);
    CHECK(c.raft(2).term() == t);
    CHECK(c.raft(3).term() == t);  // never got past the pre-vote
}

TEST_CASE("bug: pre-vote is granted once the leader is really gone", "[raft][prevote][bug]") {
    Cluster c(3);
    c.elect(1);
    Term t = c.raft(1).term();
    c.isolate(1);
    for (int k = 0; k < 60 && c.raft(2).role() != Role::leader && c.raft(3).role() != Role::leader;
         ++k) {
        c.tick_all();
        c.deliver_all();
    }
    bool new_leader = c.raft(2).role() == Role::leader || c.raft(3).role() == Role::leader;
    CHECK(new_leader);  // the refusal above is not a refusal of every pre-vote
    CHECK(std::max(c.raft(2).term(), c.raft(3).term()) == t + 1);
}
