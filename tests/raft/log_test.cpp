// Building blocks: MemoryStorage, RaftLog, quorum math, per-peer progress.
#include <catch2/catch.hpp>

#include "common/invariant.h"
#include "raft/progress.h"
#include "raft/quorum.h"
#include "raft/raft_log.h"
#include "raft/storage.h"

using namespace dueq::raft;

namespace {
Entry E(Index i, Term t, std::string data = {}) {
    return Entry{t, i, 0, EntryType::normal, std::move(data)};
}
}  // namespace

TEST_CASE("storage: append overwrites the suffix from the first new index", "[raft][storage]") {
    MemoryStorage s;
    REQUIRE(s.append({E(1, 1), E(2, 1), E(3, 1)}));
    REQUIRE(s.append({E(2, 2)}));
    CHECK(s.last_index() == 2);
    CHECK(s.term(2).value() == 2);
    CHECK(s.term(3).error() == Error::unavailable);
    // A gap is refused.
    CHECK_FALSE(s.append({E(5, 2)}));
}

TEST_CASE("storage: snapshot, compaction and the term just before the log", "[raft][storage]") {
    MemoryStorage s;
    REQUIRE(s.append({E(1, 1), E(2, 1), E(3, 2), E(4, 2)}));
    REQUIRE(s.create_snapshot(3, "state@3"));
    CHECK(s.snapshot().meta.index == 3);
    CHECK(s.snapshot().meta.term == 2);
    CHECK(s.first_index() == 1);  // create_snapshot does not compact by itself
    REQUIRE(s.compact(3));
    CHECK(s.first_index() == 4);
    CHECK(s.term(3).value() == 2);  // still known
    CHECK(s.term(2).error() == Error::compacted);
    CHECK(s.entries(3, 5, 1000).error() == Error::compacted);
    CHECK(s.entries(4, 5, 1000).value().size() == 1);
    CHECK_FALSE(s.compact(4));  // beyond the snapshot
}

TEST_CASE("storage: many compactions, each a few entries, keep the rest intact",
          "[raft][storage]") {
    // The front of the log is erased only now and then: every index must still map to
    // its own entry, before and after, and an overwrite must cut at the right place.
    MemoryStorage s;
    Index last = 0;
    Index compacted = 0;
    for (int round = 0; round < 40; ++round) {
        std::vector<Entry> batch;
        for (int k = 0; k < 7; ++k, ++last)
            batch.push_back(E(last + 1, 1 + round / 10, "e" + std::to_string(last + 1)));
        REQUIRE(s.append(batch));
        const Index upto = compacted + 1 + Index(round % 5);  // keeps a tail of 100 to 200
        if (last > upto + 100) {
            REQUIRE(s.create_snapshot(upto, "state"));
            REQUIRE(s.compact(upto));
            compacted = upto;
        }
        CHECK(s.first_index() == compacted + 1);
        CHECK(s.last_index() == last);
        auto all = s.entries(s.first_index(), last + 1, 1u << 20);
        REQUIRE(all);
        REQUIRE(all.value().size() == last - compacted);
        for (const Entry& e : all.value())
            CHECK(e.data == "e" + std::to_string(e.index));
        if (compacted > 0) {
            CHECK(s.term(compacted));
            CHECK(s.term(compacted - 1).error() == Error::compacted);
        }
    }
    REQUIRE(s.append({E(compacted + 3, 9, "new")}));
    CHECK(s.last_index() == compacted + 3);
    CHECK(s.term(compacted + 2).value() != 9);
    CHECK(s.term(compacted + 3).value() == 9);
    CHECK(s.at(compacted + 3).data == "new");
}

TEST_CASE("storage: entries honours max_bytes but returns at least one", "[raft][storage]") {
    MemoryStorage s;
    REQUIRE(s.append({E(1, 1, std::string(100, 'a')), E(2, 1, std::string(100, 'b'))}));
    CHECK(s.entries(1, 3, 0).value().size() == 1);
    CHECK(s.entries(1, 3, 1000).value().size() == 2);
}

TEST_CASE("storage: applying a snapshot replaces the whole log", "[raft][storage]") {
    MemoryStorage s;
    REQUIRE(s.append({E(1, 1), E(2, 1), E(3, 1)}));
    REQUIRE(s.apply_snapshot(Snapshot{{10, 3, 0}, "x"}));
    CHECK(s.first_index() == 11);
    CHECK(s.last_index() == 10);
    CHECK(s.term(10).value() == 3);
}

TEST_CASE("log §3.5: maybe_append checks prev, keeps matching entries, cuts conflicts",
          "[raft][log]") {
    MemoryStorage s;
    REQUIRE(s.append({E(1, 1), E(2, 1), E(3, 2)}));
    RaftLog log(s);
    // prev does not match: refused, nothing changes
    CHECK_FALSE(log.maybe_append(3, 1, 0, {E(4, 3)}));
    CHECK(log.last_index() == 3);
    // duplicates of what we have: no change, commit follows but never beyond the new entries
    auto r = log.maybe_append(1, 1, 5, {E(2, 1)});
    REQUIRE(r);
    CHECK(*r == 2);
    CHECK(log.committed() == 2);
    CHECK(log.last_index() == 3);  // entry 3 kept: no conflict was seen
    // a conflict at 3 replaces the suffix
    r = log.maybe_append(2, 1, 2, {E(3, 3), E(4, 3)});
    REQUIRE(r);
    CHECK(log.term(3).value() == 3);
    CHECK(log.last_index() == 4);
    CHECK(log.unstable_entries().size() == 2);
}

TEST_CASE("log: committed entries are never truncated", "[raft][log]") {
    MemoryStorage s;
    REQUIRE(s.append({E(1, 1), E(2, 1)}));
    RaftLog log(s);
    log.commit_to(2);
    CHECK_FALSE(log.maybe_append(1, 1, 2, {E(2, 5)}));
    CHECK(log.term(2).value() == 1);
}

TEST_CASE("log: a commit or an apply beyond the last index stops the node, never clamps",
          "[raft][log]") {
    MemoryStorage s;
    REQUIRE(s.append({E(1, 1), E(2, 1)}));
    RaftLog log(s);
    CHECK_THROWS_AS(log.commit_to(3), dueq::InvariantBroken);
    CHECK(log.committed() == 0);  // nothing changed
    log.commit_to(2);
    CHECK(log.committed() == 2);
    CHECK_THROWS_AS(log.applied_to(3), dueq::InvariantBroken);
    CHECK_THROWS_WITH(log.commit_to(9), Catch::Contains("was the log truncated or lost?"));
}

TEST_CASE("log §3.6.1: up-to-date compares last term, then length", "[raft][log]") {
    MemoryStorage s;
    REQUIRE(s.append({E(1, 1), E(2, 2)}));
    RaftLog log(s);
    CHECK(log.is_up_to_date(1, 3));        // higher last term wins even if shorter
    CHECK(log.is_up_to_date(2, 2));        // equal
    CHECK_FALSE(log.is_up_to_date(1, 2));  // same term, shorter
    CHECK_FALSE(log.is_up_to_date(9, 1));  // longer but older term
}

TEST_CASE("log: find_conflict_by_term skips whole terms", "[raft][log]") {
    MemoryStorage s;
    REQUIRE(s.append({E(1, 1), E(2, 1), E(3, 2), E(4, 2), E(5, 4), E(6, 4)}));
    RaftLog log(s);
    CHECK(log.find_conflict_by_term(6, 3) == 4);
    CHECK(log.find_conflict_by_term(6, 4) == 6);
    CHECK(log.find_conflict_by_term(6, 1) == 2);
    CHECK(log.find_conflict_by_term(6, 0) == 0);
    CHECK(log.find_conflict_by_term(99, 4) == 6);  // clamped to the last index
}

TEST_CASE("log: stable_to ignores a batch that was replaced meanwhile", "[raft][log]") {
    MemoryStorage s;
    RaftLog log(s);
    log.append({E(1, 1), E(2, 1)});
    std::vector<Entry> handed = log.unstable_entries();  // the shell writes these...
    log.append({E(2, 2)});                               // ...while a new leader rewrites 2
    s.append(handed);
    log.stable_to(2, 1);  // term 1 at 2 is gone: nothing is marked stable (1 is rewritten)
    CHECK(log.unstable_entries().size() == 2);
    CHECK(log.term(2).value() == 2);
    CHECK(log.stable_last_index() == 0);
    log.stable_to(2, 2);
    CHECK(log.unstable_entries().empty());
    CHECK(log.stable_last_index() == 2);
}

TEST_CASE("quorum: majority value of match indexes", "[raft][quorum]") {
    CHECK(majority(3) == 2);
    CHECK(majority(4) == 3);
    CHECK(majority(5) == 3);
    CHECK(quorum_value({5, 1, 3}) == 3);
    CHECK(quorum_value({5, 5, 1, 1, 1}) == 1);
    CHECK(quorum_value({5, 5, 4, 1, 1}) == 4);
    CHECK(quorum_value({7}) == 7);
}

TEST_CASE("quorum: vote tally wins, loses, ignores repeats", "[raft][quorum]") {
    VoteTally t(5);
    t.record(1, true);
    t.record(2, true);
    CHECK(t.result() == VoteResult::pending);
    t.record(2, false);  // a repeated answer does not count twice nor flip
    CHECK(t.granted() == 2);
    t.record(3, false);
    t.record(4, false);
    CHECK(t.result() == VoteResult::pending);
    t.record(5, false);
    CHECK(t.result() == VoteResult::lost);
    VoteTally w(3);
    w.record(1, true);
    w.record(3, true);
    CHECK(w.result() == VoteResult::won);
}

TEST_CASE("progress: the inflight window caps messages and bytes", "[raft][progress]") {
    Progress pr(1, 2, 1000);
    pr.become_replicate();
    pr.on_sent(5, 100, true);
    CHECK_FALSE(pr.paused());
    pr.on_sent(9, 100, true);
    CHECK(pr.paused());  // two messages in flight
    pr.on_ack(5);
    CHECK_FALSE(pr.paused());
    CHECK(pr.next == 10);
    Progress big(1, 100, 150);
    big.become_replicate();
    big.on_sent(3, 200, true);
    CHECK(big.paused());  // over the byte budget
}

TEST_CASE("progress: probe sends one at a time; snapshot pauses", "[raft][progress]") {
    Progress pr(8, 4, 1000);
    CHECK_FALSE(pr.paused());
    pr.on_sent(8, 10, true);
    CHECK(pr.paused());
    pr.become_snapshot(20);
    CHECK(pr.paused());
    pr.become_probe();
    CHECK(pr.next == 21);  // after a snapshot the follower holds at least its entries
}
