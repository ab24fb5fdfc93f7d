// Bug found by the simulator (seed 1013837, 5 nodes, before commit 4428473): while a
// follower's Ready was being persisted, a new leader replaced the *last* entry of that
// Ready. advance() then marked nothing durable (it only looked at the last entry), the
// shell meanwhile snapshotted and compacted at the commit index, and the next Ready
// handed out the old entries again - now below the storage's first index.
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

TEST_CASE("bug: entries handed out again below the compaction point", "[raft][ready][bug]") {
    Cluster c(3, [](Config& cfg) {
        cfg.check_quorum = false;
        cfg.pre_vote = false;
        cfg.snapshot_threshold = 3;
    });
    Raft& f = c.raft(3);
    MemoryStorage& s = c.storage(3);
    std::vector<Entry> batch;
    for (Index i = 1; i <= 5; ++i)
        batch.push_back(Entry{1, i, 0, EntryType::normal, "e" + std::to_string(i)});
    f.step({.type = MessageType::append,
            .from = 1,
            .to = 3,
            .term = 1,
            .index = 0,
            .log_term = 0,
            .commit = 4,
            .entries = batch});
    Ready rd = f.ready();  // entries 1..5, entries 1..4 to apply, a snapshot wanted
    REQUIRE(rd.entries.size() == 5);
    REQUIRE(rd.committed_entries.size() == 4);
    REQUIRE(rd.snapshot_wanted);
    // Before that Ready is durable, the leader of term 2 replaces entry 5.
    f.step({.type = MessageType::append,
            .from = 2,
            .to = 3,
            .term = 2,
            .index = 4,
            .log_term = 1,
            .commit = 4,
            .entries = {Entry{2, 5, 0, EntryType::normal, "new5"}}});
    // The shell carries out the first Ready: persist, apply, snapshot and compact at 4.
    REQUIRE(s.append(rd.entries));
    REQUIRE(s.set_hard_state(*rd.hard_state));
    REQUIRE(s.create_snapshot(*rd.snapshot_wanted, "state@4"));
    REQUIRE(s.compact(*rd.snapshot_wanted));
    f.advance(rd);
    REQUIRE(f.has_ready());
    Ready next = f.ready();
    REQUIRE(next.entries.size() == 1);
    CHECK(next.entries.front().index == 5);  // not 1: those are durable and compacted
    CHECK(next.entries.front().data == "new5");
    CHECK(s.append(next.entries));
    f.advance(next);
    CHECK(s.at(5).data == "new5");
}
