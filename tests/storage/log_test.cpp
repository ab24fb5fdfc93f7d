// storage::Database as a Raft log: entries replace the stored suffix from their first
// index on (§3.5), the hard state comes back as written, log writes in one batch take
// effect in order, and AppliedState::trim deletes the log's head and moves its base.
#include <algorithm>
#include <catch2/catch.hpp>

#include "storage/storage_support.h"

using namespace dueq;
using namespace dueq::test;
using storage::AppliedState;
using storage::LogWrite;

namespace {

std::vector<raft::Entry> concat(std::vector<raft::Entry> a, const std::vector<raft::Entry>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("entries starting inside the stored log replace its suffix") {
    TempDir dir("suffix");
    std::vector<raft::Entry> want;
    {
        auto db = open_db(dir.str(), true);
        REQUIRE(db->write({log_write(1, 10)}, {}).ok);
        SECTION("a shorter new suffix: the old tail is gone") {
            REQUIRE(db->write({log_write(5, 7, 9)}, {}).ok);
            want = concat(entries(1, 4), entries(5, 7, 9));
        }
        SECTION("a longer new suffix") {
            REQUIRE(db->write({log_write(9, 14, 9)}, {}).ok);
            want = concat(entries(1, 8), entries(9, 14, 9));
        }
        SECTION("one entry replacing all but the first") {
            REQUIRE(db->write({log_write(2, 2, 9)}, {}).ok);
            want = concat(entries(1, 1), entries(2, 2, 9));
        }
        SECTION("replaced twice, the second time further back") {
            REQUIRE(db->write({log_write(8, 12, 5)}, {}).ok);
            REQUIRE(db->write({log_write(6, 6, 6)}, {}).ok);
            want = concat(entries(1, 5), entries(6, 6, 6));
        }
        SECTION("appended right after the end: nothing replaced") {
            REQUIRE(db->write({log_write(11, 12)}, {}).ok);
            want = entries(1, 12);
        }
    }
    queue::Store store;
    auto got = load_ok(dir.str(), store);
    REQUIRE(got.entries.size() == want.size());
    CHECK(got.entries == want);
    {
        // Not merely hidden from load: the old keys are gone.
        RawDb raw(dir.str());
        CHECK(raw.keys("log").size() == want.size());
    }
    // The database knows where its log ends after reopening: a later replacement
    // still removes the tail (this time the one written before the restart).
    {
        auto db = open_db(dir.str(), true);
        REQUIRE(db->write({log_write(3, 3, 20)}, {}).ok);
    }
    queue::Store again;
    got = load_ok(dir.str(), again);
    want.resize(2);
    want.push_back(entry_for(3, 20));
    CHECK(got.entries == want);
}

TEST_CASE("several log writes in one batch take effect in order") {
    TempDir dir("batch-order");
    {
        auto db = open_db(dir.str(), true);
        REQUIRE(db->write({log_write(1, 6)}, {}).ok);
        // Extend, cut back into the extension, extend again: as three Readies that
        // queued up behind one fsync.
        LogWrite a = log_write(7, 10), b = log_write(4, 5, 7), c = log_write(6, 8, 8);
        a.hard_state = raft::HardState{3, 1, 2};
        c.hard_state = raft::HardState{8, 2, 3};
        REQUIRE(db->write({a, b, c}, {}).ok);
    }
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.entries == concat(concat(entries(1, 3), entries(4, 5, 7)), entries(6, 8, 8)));
    CHECK(got.hard_state == raft::HardState{8, 2, 3});  // the last one wins
}

TEST_CASE("the hard state round-trips, alone or with entries, synced or not") {
    TempDir dir("hardstate");
    const raft::HardState big{~std::uint64_t(0) - 1, 0xfedcba9876543210ull, 1ull << 40};
    raft::HardState want;
    {
        auto db = open_db(dir.str(), true);
        LogWrite w = log_write(1, 3);
        w.hard_state = raft::HardState{2, 3, 1};
        REQUIRE(db->write({w}, {}).ok);
        want = *w.hard_state;
        SECTION("with entries") {}
        SECTION("a hard state only, not synced (a commit index move)") {
            LogWrite h;
            h.hard_state = raft::HardState{2, 3, 3};
            h.sync = false;
            REQUIRE(db->write({h}, {}).ok);
            want = *h.hard_state;
        }
        SECTION("large values, every byte") {
            LogWrite h;
            h.hard_state = big;
            REQUIRE(db->write({h}, {}).ok);
            want = big;
        }
        SECTION("a log write without a hard state keeps the old one") {
            REQUIRE(db->write({log_write(4, 4)}, {}).ok);
        }
    }
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.hard_state == want);
    CHECK(got.entries.size() >= 3);  // the hard state did not disturb the log
    CHECK(got.entries[0] == entry_for(1));
}

TEST_CASE("AppliedState::trim deletes the log through it and becomes the log's base") {
    TempDir dir("trim");
    queue::Store reference;
    {
        auto db = open_db(dir.str(), true);
        REQUIRE(db->write({log_write(1, 10)}, {}).ok);
        AppliedState s = apply_records(reference, 1, 8);
        s.trim = meta_of(6);
        REQUIRE(db->write({}, {s}).ok);
        // The trim waits for the applied state to be in files; the next write does it.
        REQUIRE(db->flush().ok);
        REQUIRE(db->write({}, {}).ok);
        // A later trim continues from where the last one ended.
        AppliedState s2 = apply_records(reference, 9, 9);
        s2.trim = meta_of(7);
        REQUIRE(db->write({}, {s2}).ok);
    }
    {
        RawDb raw(dir.str());
        CHECK(raw.keys("log") == std::vector<std::string>{log_key(8), log_key(9), log_key(10)});
    }
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.base == meta_of(7));
    CHECK(got.entries == entries(8, 10));
    CHECK(got.applied_index == 9);
    CHECK(got.applied_time == log_time_of(9));
    CHECK(contents(store) == contents(reference));
}

TEST_CASE("trim edge cases: no trim, an old trim, the whole log, and appending after it") {
    TempDir dir("trim-edges");
    queue::Store reference;
    {
        auto db = open_db(dir.str(), true);
        REQUIRE(db->write({log_write(1, 6)}, {apply_records(reference, 1, 2)}).ok);  // trim 0
        AppliedState s = apply_records(reference, 3, 4);
        s.trim = meta_of(3);
        REQUIRE(db->write({}, {s}).ok);
        REQUIRE(db->flush().ok);
        AppliedState old = apply_records(reference, 5, 5);
        old.trim = meta_of(2);  // already trimmed past: changes nothing
        REQUIRE(db->write({}, {old}).ok);
    }
    {
        queue::Store store;
        const auto got = load_ok(dir.str(), store);
        CHECK(got.base == meta_of(3));
        CHECK(got.entries == entries(4, 6));
        CHECK(got.applied_index == 5);
    }
    {
        // After a reopen: trim the whole log, then append after it.
        auto db = open_db(dir.str(), true);
        AppliedState all = apply_records(reference, 6, 6);
        all.trim = meta_of(6);
        REQUIRE(db->write({}, {all}).ok);
        REQUIRE(db->flush().ok);
        REQUIRE(db->write({log_write(7, 8)}, {}).ok);
    }
    {
        RawDb raw(dir.str());
        CHECK(raw.keys("log") == std::vector<std::string>{log_key(7), log_key(8)});
    }
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.base == meta_of(6));
    CHECK(got.entries == entries(7, 8));
    CHECK(got.applied_index == 6);
    CHECK(contents(store) == contents(reference));
}

TEST_CASE("entries and a trim of them in the same batch") {
    TempDir dir("trim-same-batch");
    queue::Store reference;
    {
        auto db = open_db(dir.str(), true);
        AppliedState s = apply_records(reference, 1, 5);
        REQUIRE(db->write({log_write(1, 6)}, {s}).ok);
        REQUIRE(db->flush().ok);
        AppliedState again = s;
        again.trim = meta_of(4);
        REQUIRE(db->write({log_write(7, 8)}, {again}).ok);
    }
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.base == meta_of(4));
    CHECK(got.entries == entries(5, 8));
    CHECK(got.applied_index == 5);
}

TEST_CASE("a trim waits until the applied state it came with is in files") {
    TempDir dir("trim-waits");
    queue::Store reference;
    {
        auto db = open_db(dir.str(), true);
        AppliedState s = apply_records(reference, 1, 5);
        s.trim = meta_of(4);
        REQUIRE(db->write({log_write(1, 8)}, {s}).ok);
        REQUIRE(db->write({log_write(9, 9)}, {}).ok);
        // Closing flushes the applied state at 5, and the log with it. That flush leaves
        // out the entries below the trim the state covers and keeps the trim point, but the
        // trim itself waited: no new start of the log is recorded.
    }
    auto log_keys = [](std::uint64_t from, std::uint64_t to) {
        std::vector<std::string> keys;
        for (std::uint64_t i = from; i <= to; ++i)
            keys.push_back(log_key(i));
        return keys;
    };
    {
        RawDb raw(dir.str());
        CHECK(raw.keys("log") == log_keys(4, 9));
        const auto meta = raw.keys("meta");
        CHECK(std::find(meta.begin(), meta.end(), "logbase") == meta.end());
    }
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.base == meta_of(4));
    CHECK(got.entries == entries(5, 9));
    CHECK(got.applied_index == 5);
    CHECK(contents(store) == contents(reference));
    {
        // Reopened, the applied state at 5 is in files: a trim up to it is done at once,
        // one beyond it waits.
        auto db = open_db(dir.str(), true);
        AppliedState beyond = apply_records(reference, 6, 6);
        beyond.trim = meta_of(6);
        REQUIRE(db->write({}, {beyond}).ok);
        AppliedState within = beyond;
        within.trim = meta_of(5);
        REQUIRE(db->write({}, {within}).ok);
    }
    {
        RawDb raw(dir.str());
        CHECK(raw.keys("log") == log_keys(6, 9));
    }
    queue::Store reloaded;
    const auto after = load_ok(dir.str(), reloaded);
    CHECK(after.base == meta_of(5));
    CHECK(after.entries == entries(6, 9));
    {
        // A clean stop's flush does the trims that waited for it.
        auto db = open_db(dir.str(), true);
        AppliedState next = apply_records(reference, 7, 7);
        next.trim = meta_of(7);
        REQUIRE(db->write({}, {next}).ok);
        REQUIRE(db->flush().ok);
    }
    queue::Store flushed;
    const auto last = load_ok(dir.str(), flushed);
    CHECK(last.base == meta_of(7));
    CHECK(last.entries == entries(8, 9));
    CHECK(last.applied_index == 7);
}
