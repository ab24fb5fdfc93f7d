// Classic bug: a follower installs a snapshot but keeps its log because it has *an*
// entry at the snapshot's index, without checking the term. The entry conflicts, and so
// may everything after it; the whole log must go (§5.3).
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

TEST_CASE("bug: conflicting entry at the snapshot index", "[raft][snapshot][bug]") {
    Cluster c(3);
    // Node 2 holds entries 1..4 of term 1 (uncommitted, from a leader that died).
    c.deliver(
        {.type = MessageType::append,
         .from = 1,
         .to = 2,
         .term = 1,
         .index = 0,
         .log_term = 0,
         .entries = {Entry{1, 1, 0, EntryType::noop, {}}, Entry{1, 2, 0, EntryType::normal, "a"},
                     Entry{1, 3, 0, EntryType::normal, "b"},
                     Entry{1, 4, 0, EntryType::normal, "c"}}});
    REQUIRE(c.storage(2).last_index() == 4);
    // The leader of term 3 sends a snapshot ending at index 3, term 2.
    Message snap{.type = MessageType::snapshot, .from = 3, .to = 2, .term = 3};
    snap.snapshot = Snapshot{{3, 2, 0}, "state@3"};
    c.deliver(snap);
    const Ready& rd = c.node(2).readies.back();
    REQUIRE(rd.snapshot);
    CHECK(c.raft(2).log().last_index() == 3);     // entry 4 (after the conflict) is gone
    CHECK(c.raft(2).log().term(3).value() == 2);  // the snapshot's term
    CHECK(c.raft(2).log().committed() == 3);
    CHECK(c.storage(2).last_index() == 3);
    CHECK(c.storage(2).term(3).value() == 2);
    REQUIRE(rd.messages.size() == 1);
    CHECK(rd.messages[0].index == 3);
    CHECK_FALSE(rd.messages[0].reject);
    // Entries after it come from the leader again, and apply after the snapshot.
    c.deliver({.type = MessageType::append,
               .from = 3,
               .to = 2,
               .term = 3,
               .index = 3,
               .log_term = 2,
               .commit = 4,
               .entries = {Entry{3, 4, 0, EntryType::noop, {}}}});
    CHECK(c.raft(2).log().term(4).value() == 3);
    CHECK(c.raft(2).log().committed() == 4);
    REQUIRE_FALSE(c.node(2).applied.empty());
    CHECK(c.node(2).applied.back().index == 4);
    CHECK(c.node(2).applied.back().term == 3);
}
