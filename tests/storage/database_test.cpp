// storage::Database: what is written comes back on restart, exactly; and damaged, moved
// or missing records are refused, never served (docs/internals/replication.md, src/storage). The log's own
// rules (suffix replacement, hard state, trimming) are in log_test.cpp; snapshots and
// checkpoints in snapshot_test.cpp.
#include <catch2/catch.hpp>

#include "queue/command_codec.h"
#include "storage/storage_support.h"

using namespace dueq;
using namespace dueq::test;
using storage::AppliedState;

namespace {

// Log 1..last written in two synced writes, a hard state, and the applied state at
// `applied` (0: none) with the log trimmed through `trim` (0: none). A trim waits for the
// applied state to be in files: the applied state is flushed, then written again with it.
void build(const std::string& path, std::uint64_t last, std::uint64_t applied,
           std::uint64_t trim = 0) {
    auto db = open_db(path, true);
    queue::Store store;
    REQUIRE(db->write({log_write(1, last / 2)}, {}).ok);
    storage::LogWrite w = log_write(last / 2 + 1, last);
    w.hard_state = raft::HardState{term_of(last), 2, applied};
    REQUIRE(db->write({w}, {}).ok);
    if (applied > 0) {
        AppliedState s = apply_records(store, 1, applied);
        REQUIRE(db->write({}, {s}).ok);
        if (trim) {
            REQUIRE(db->flush().ok);
            s.trim = meta_of(trim);
            REQUIRE(db->write({}, {s}).ok);
        }
    }
}

}  // namespace

TEST_CASE("reopen: load returns the applied tasks, the hard state and the whole log in order") {
    TempDir dir("reopen");
    queue::Store reference;
    {
        auto db = open_db(dir.str(), true);
        CHECK(db->syncs());
        REQUIRE(db->write({log_write(1, 4)}, {}).ok);
        // Applied states interleave with appends; the last one (index 6) wins.
        AppliedState a1 = apply_records(reference, 1, 3);
        storage::LogWrite w = log_write(5, 8);
        w.hard_state = raft::HardState{3, 1, 6};
        REQUIRE(db->write({w}, {a1}).ok);
        AppliedState a2 = apply_records(reference, 4, 6);
        REQUIRE(db->write({}, {a2}).ok);
    }
    queue::Store store;
    const storage::Loaded got = load_ok(dir.str(), store);
    CHECK(got.applied_index == 6);
    CHECK(got.applied_time == log_time_of(6));
    CHECK(got.hard_state == raft::HardState{3, 1, 6});
    CHECK(got.base == raft::SnapshotMeta{});
    // Unlike the old tail, the log is whole: Raft needs the entries it has applied too.
    REQUIRE(got.entries.size() == 8);
    for (std::size_t i = 0; i < got.entries.size(); ++i) {
        INFO("entry " << i + 1);
        CHECK(got.entries[i] == entry_for(i + 1));
    }

    // The loaded store holds exactly the applied tasks, field for field.
    CHECK(store.task_count() == 6);
    for (std::uint64_t i = 1; i <= 6; ++i) {
        auto got_task = store.get("q", "k" + std::to_string(i));
        auto want = reference.get("q", "k" + std::to_string(i));
        REQUIRE(got_task);
        REQUIRE(want);
        CHECK(same_task(*got_task, *want));
    }
    CHECK_FALSE(store.get("q", "k7"));
    CHECK(store.encode_meta() == reference.encode_meta());

    // Replaying the entries after the applied index ends where a store that applied
    // everything ends.
    for (const auto& e : got.entries) {
        if (e.index <= got.applied_index) continue;
        auto cmd = queue::decode_command(e.data);
        REQUIRE(cmd);
        REQUIRE(store.apply(*cmd, e.time).ok());
    }
    apply_records(reference, 7, 8);
    CHECK(contents(store) == contents(reference));
    CHECK(store.task_count() == 8);
}

TEST_CASE("every field of an entry survives, including type, empty data and large times") {
    TempDir dir("entry-fields");
    std::vector<raft::Entry> want{
        {7, 1, 0, raft::EntryType::noop, ""},
        {7, 2, 1'700'000'000'123, raft::EntryType::normal, std::string("\0\xff\x01", 3)},
        {9, 3, ~std::uint64_t(0) >> 1, raft::EntryType::normal, std::string(100'000, 'x')},
    };
    {
        auto db = open_db(dir.str(), true);
        storage::LogWrite w;
        w.entries = want;
        REQUIRE(db->write({w}, {}).ok);
    }
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.entries == want);
    CHECK(got.applied_index == 0);
    CHECK(got.hard_state.empty());
}

TEST_CASE("an empty database loads as empty") {
    TempDir dir("empty");
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.entries.empty());
    CHECK(got.hard_state.empty());
    CHECK(got.base == raft::SnapshotMeta{});
    CHECK(got.applied_index == 0);
    CHECK(got.applied_time == 0);
    CHECK(store.task_count() == 0);
}

TEST_CASE("deleted tasks are gone after reopen") {
    TempDir dir("delete");
    {
        auto db = open_db(dir.str(), true);
        queue::Store store;
        REQUIRE(db->write({log_write(1, 4)}, {apply_records(store, 1, 3)}).ok);
        REQUIRE(store.apply(queue::Delete{"q", "k2"}, log_time_of(4)).ok());
        AppliedState s;
        s.applied_index = 4;
        s.applied_time = log_time_of(4);
        store.drain_changes([&](std::string_view q, std::string_view k,
                                const std::optional<std::string>& e) {
            s.changes.push_back({std::string(q), std::string(k), e});
        });
        s.store_meta = store.encode_meta();
        REQUIRE(s.changes.size() == 1);
        CHECK(s.changes[0].encoded);  // the tombstone, kept for retention_ms
        REQUIRE(db->write({}, {s}).ok);
    }
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.applied_index == 4);
    CHECK(store.task_count() == 2);
    CHECK(store.get("q", "k1"));
    CHECK_FALSE(store.get("q", "k2"));
    CHECK(store.tombstone_hlc("q", "k2").has_value());
    CHECK(store.get("q", "k3"));
}

TEST_CASE("a flipped byte in any stored record makes load fail, naming the record") {
    TempDir dir("corrupt");
    build(dir.str(), 8, 6, 2);  // log 3..8 after base 2, hard state, applied 6
    struct Damage {
        const char* cf;
        std::string key;
        int byte;
        const char* expect;  // in the error message
    };
    const std::vector<Damage> damages{
        {"meta", "applied", 0, "meta/applied"},  // in the checksum itself
        {"meta", "applied", -1, "meta/applied"},  // in the body
        {"meta", "hardstate", 1, "meta/hardstate"},
        {"meta", "hardstate", -1, "meta/hardstate"},
        {"meta", "logbase", 3, "meta/logbase"},
        {"meta", "logbase", -1, "meta/logbase"},
        {"meta", "store", -1, "meta/store"},
        {"tasks", storage::task_key("q", "k2"), 6, "tasks"},
        {"tasks", storage::task_key("q", "k4"), -1, "tasks"},
        {"log", log_key(3), 5, "log entry 3"},  // the first entry after the base
        {"log", log_key(5), -1, "log entry 5"},  // in the data
        {"log", log_key(6), 2, "log entry 6"},   // in the checksum
        {"log", log_key(8), 4 + 8, "log entry 8"},  // in the time
    };
    // Each damage is made on a fresh copy of the intact database.
    for (const auto& d : damages) {
        DYNAMIC_SECTION(d.expect << " damaged at byte " << d.byte) {
            TempDir copy("corrupt-copy");
            copy_dir(dir.path(), copy.path());
            {
                RawDb raw(copy.str());
                raw.flip_byte(d.cf, d.key, d.byte);
            }
            queue::Store store;
            storage::Loaded out;
            auto st = load_db(copy.str(), store, out);
            INFO("load said: " << st.message);
            CHECK_FALSE(st.ok);
            CHECK(st.message.find(d.expect) != std::string::npos);
        }
    }
    SECTION("the intact database loads") {
        queue::Store store;
        const auto got = load_ok(dir.str(), store);
        CHECK(got.base == meta_of(2));
        CHECK(got.entries.size() == 6);
        CHECK(got.applied_index == 6);
        CHECK(store.task_count() == 6);
    }
}

TEST_CASE("a valid record moved under another key is refused") {
    TempDir dir("moved");
    build(dir.str(), 8, 6, 2);
    struct Move {
        const char* cf;
        std::string from, to;
        const char* expect;
    };
    // Same-sized records, so only the key in the checksum can tell them apart.
    const std::vector<Move> moves{
        {"log", log_key(5), log_key(6), "log entry 6"},
        {"meta", "hardstate", "logbase", "meta/logbase"},
        {"meta", "logbase", "hardstate", "meta/hardstate"},
        {"tasks", storage::task_key("q", "k3"), storage::task_key("q", "k4"), "tasks"},
    };
    for (const auto& m : moves) {
        DYNAMIC_SECTION(m.cf << " record copied over " << m.expect) {
            TempDir copy("moved-copy");
            copy_dir(dir.path(), copy.path());
            {
                RawDb raw(copy.str());
                raw.put(m.cf, m.to, raw.get(m.cf, m.from));
            }
            queue::Store store;
            storage::Loaded out;
            auto st = load_db(copy.str(), store, out);
            INFO("load said: " << st.message);
            CHECK_FALSE(st.ok);
            CHECK(st.message.find(m.expect) != std::string::npos);
        }
    }
}

TEST_CASE("a record too short to be valid is refused even with a correct checksum") {
    TempDir dir("short");
    build(dir.str(), 4, 2);
    SECTION("meta/applied") {
        RawDb(dir.str()).put("meta", "applied", storage::seal("12345678", "applied"));
    }
    SECTION("meta/hardstate") {
        RawDb(dir.str()).put("meta", "hardstate", storage::seal("1234567812345678", "hardstate"));
    }
    SECTION("a log entry without its type byte") {
        RawDb(dir.str()).put("log", log_key(3),
                             storage::seal("1234567812345678", log_key(3)));
    }
    const std::string message = load_error(dir.str());
    CHECK_THAT(message, Catch::Contains("corrupt"));
}

TEST_CASE("a log entry of an unknown type is refused, not loaded") {
    TempDir dir("entry-type");
    build(dir.str(), 4, 2);
    std::string body(16, '\x01');
    body += '\x03';  // EntryType has normal (0), noop (1) and config (2)
    body += "data";
    RawDb(dir.str()).put("log", log_key(3), storage::seal(body, log_key(3)));
    const std::string message = load_error(dir.str());
    CHECK_THAT(message, Catch::Contains("corrupt log entry 3"));
}

TEST_CASE("decode_log_record reads what the log holds and refuses any other shape") {
    // term 5, time 9, noop, data "xy"
    const std::string body = std::string(7, '\0') + '\x05' + std::string(7, '\0') + "\x09\x01xy";
    auto e = storage::decode_log_record(log_key(7), storage::seal(body, log_key(7)));
    REQUIRE(e.has_value());
    CHECK(*e == raft::Entry{5, 7, 9, raft::EntryType::noop, "xy"});
    // The key must be 8 bytes (it was read as 8 whatever its length).
    CHECK_FALSE(storage::decode_log_record("", storage::seal(body, "")));
    CHECK_FALSE(storage::decode_log_record("1234567", storage::seal(body, "1234567")));
    const std::string short_body = body.substr(0, 16);
    CHECK_FALSE(storage::decode_log_record(log_key(7), storage::seal(short_body, log_key(7))));
    CHECK_FALSE(storage::decode_log_record(log_key(7), storage::seal(body, log_key(8))));
}

TEST_CASE("a gap in the log is reported") {
    TempDir dir("gap");
    build(dir.str(), 8, 3);
    RawDb(dir.str()).del("log", log_key(6));
    const std::string message = load_error(dir.str());
    CHECK_THAT(message, Catch::Contains("log gap"));
    CHECK_THAT(message, Catch::Contains("expected entry 6, found 7"));
}

TEST_CASE("a gap the applied state covers starts the log after it; one beyond it is refused") {
    // A flush may leave out log entries its applied state covers (flushed_applied.h).
    SECTION("entries missing up to the applied index: the log starts at the next one") {
        TempDir dir("gap-covered");
        build(dir.str(), 8, 6, 3);  // base 3, applied 6
        {
            RawDb raw(dir.str());
            raw.del("log", log_key(4));
            raw.del("log", log_key(5));
        }
        queue::Store store;
        const auto got = load_ok(dir.str(), store);
        CHECK(got.base == meta_of(6));
        CHECK(got.entries == entries(7, 8));
        CHECK(got.applied_index == 6);
    }
    SECTION("the entry after the gap is past the applied index") {
        TempDir dir("gap-front");
        build(dir.str(), 8, 5, 3);  // base 3: the log must start at 4
        {
            RawDb raw(dir.str());
            for (std::uint64_t i : {4, 5})
                raw.del("log", log_key(i));
        }
        const std::string message = load_error(dir.str());
        CHECK_THAT(message, Catch::Contains("expected entry 4, found 6"));
    }
}

TEST_CASE("an applied index outside the log is refused") {
    TempDir dir("applied-range");
    build(dir.str(), 8, 6, 4);
    std::string body;
    auto applied_record = [&](std::uint64_t index) {
        body.clear();
        for (std::uint64_t v : {index, std::uint64_t(log_time_of(index))})
            for (int i = 7; i >= 0; --i) body.push_back(char(v >> (8 * i)));
        return storage::seal(body, "applied");
    };
    std::string expect;
    SECTION("behind the base") {
        RawDb(dir.str()).put("meta", "applied", applied_record(3));
        expect = "behind the log";
    }
    SECTION("past the last entry") {
        RawDb(dir.str()).put("meta", "applied", applied_record(9));
        expect = "past the end of the log";
    }
    const std::string message = load_error(dir.str());
    CHECK_THAT(message, Catch::Contains(expect));
}

TEST_CASE(
    "a load of many chunks rebuilds every task in order, and a late damaged record stops it") {
    // Over 64 MiB of records: the reading thread hands over many chunks and the store
    // faults in its memory ahead of the load (storage/task_scan.h).
    TempDir dir("large");
    queue::Store reference;
    constexpr std::uint64_t kTasks = 100'000;
    {
        auto db = open_db(dir.str(), false);
        REQUIRE(db->write({log_write(1, 10)}, {}).ok);
        for (std::uint64_t from = 1; from <= kTasks; from += 10'000) {
            for (std::uint64_t i = from; i < from + 10'000; ++i) {
                queue::Put p;
                p.queue = i % 3 ? "tokens" : "other";
                p.key = "key-" + std::to_string(i * 7919 % 1'000'003);
                // A msgpack bin16 of 700 bytes, different for each task.
                p.payload = std::string("\xc5\x02\xbc", 3) + std::string(700, char('a' + i % 26));
                p.payload[3] = char(i);
                // Due times out of key order, many equal: ties keep key order in a tree.
                p.time = 1'000'000 + std::int64_t(i * 31 % 5000);
                REQUIRE(reference.apply(p, 1000).ok());
            }
            AppliedState applied;
            applied.applied_index = 10;  // what the log holds: only its size is checked
            applied.applied_time = 1000;
            reference.drain_changes([&](std::string_view q, std::string_view k,
                                        const std::optional<std::string>& encoded) {
                applied.changes.push_back(
                    storage::TaskChange{std::string(q), std::string(k), encoded});
            });
            applied.store_meta = reference.encode_meta();
            REQUIRE(db->write({}, {applied}).ok);
        }
    }
    auto order = [](const queue::Store& s) {
        std::vector<std::string> keys;
        s.for_each_task([&](std::string_view q, std::string_view k, std::string_view) {
            keys.push_back(std::string(q) + "/" + std::string(k));
        });
        return keys;
    };
    SECTION("intact") {
        queue::Store store;
        load_ok(dir.str(), store);
        CHECK(store.task_count() == reference.task_count());
        CHECK(contents(store) == contents(reference));
        CHECK(order(store) == order(reference));
    }
    SECTION("one record damaged near the end") {
        {
            RawDb raw(dir.str());
            raw.flip_byte("tasks",
                          storage::task_key(
                              "tokens", "key-" + std::to_string((kTasks - 2) * 7919 % 1'000'003)),
                          -1);
        }
        queue::Store store;
        storage::Loaded out;
        auto st = load_db(dir.str(), store, out);
        CHECK_FALSE(st.ok);
        CHECK(st.message.find("corrupt task record") != std::string::npos);
    }
}
