// storage::Database: what is written comes back on restart, exactly; trimming; and
// damaged or missing records are refused, never served (DESIGN §3, src/storage).
#include <catch2/catch.hpp>

#include "queue/command_codec.h"
#include "storage/storage_support.h"

using namespace dueq;
using namespace dueq::test;
using storage::AppliedState;
using storage::LogRecord;

namespace {

std::vector<LogRecord> records(std::uint64_t from, std::uint64_t to) {
    std::vector<LogRecord> out;
    for (std::uint64_t i = from; i <= to; ++i) out.push_back(record_for(i));
    return out;
}

// Log 1..last, applied state at `applied` (0: none), written in several batches like
// the node does.
void build(const std::string& path, std::uint64_t last, std::uint64_t applied,
           std::uint64_t trim_through = 0) {
    auto db = open_db(path, true);
    queue::Store store;
    REQUIRE(db->write(records(1, last / 2), {}).ok);
    REQUIRE(db->write(records(last / 2 + 1, last), {}).ok);
    if (applied > 0) {
        AppliedState s = apply_records(store, 1, applied);
        s.trim_through = trim_through;
        REQUIRE(db->write({}, {s}).ok);
    }
}

storage::Status load(const std::string& path, std::vector<LogRecord>& tail) {
    auto db = open_db(path, true);
    queue::Store store;
    std::uint64_t applied = 0;
    std::int64_t time = 0;
    return db->load(store, applied, time, tail);
}

}  // namespace

TEST_CASE("reopen: load returns the applied tasks and exactly the log after the applied index") {
    TempDir dir("reopen");
    queue::Store reference;
    {
        auto db = open_db(dir.str(), true);
        CHECK(db->syncs());
        CHECK(db->last_log_index() == 0);
        REQUIRE(db->write(records(1, 4), {}).ok);
        // Applied states interleave with appends; the last one (index 6) wins.
        AppliedState a1 = apply_records(reference, 1, 3);
        REQUIRE(db->write(records(5, 8), {a1}).ok);
        AppliedState a2 = apply_records(reference, 4, 6);
        REQUIRE(db->write({}, {a2}).ok);
        CHECK(db->last_log_index() == 8);
    }
    auto db = open_db(dir.str(), true);
    CHECK(db->last_log_index() == 8);
    CHECK(db->first_log_index() == 1);

    queue::Store store;
    std::uint64_t applied = 0;
    std::int64_t applied_time = 0;
    std::vector<LogRecord> tail;
    auto st = db->load(store, applied, applied_time, tail);
    INFO(st.message);
    REQUIRE(st.ok);
    CHECK(applied == 6);
    CHECK(applied_time == log_time_of(6));
    REQUIRE(tail.size() == 2);
    for (std::size_t i = 0; i < tail.size(); ++i) {
        const LogRecord want = record_for(7 + i);
        CHECK(tail[i].index == want.index);
        CHECK(tail[i].time == want.time);
        CHECK(tail[i].command == want.command);
    }

    // The loaded store holds exactly the applied tasks, field for field.
    CHECK(store.task_count() == 6);
    for (std::uint64_t i = 1; i <= 6; ++i) {
        auto got = store.get("q", "k" + std::to_string(i));
        auto want = reference.get("q", "k" + std::to_string(i));
        REQUIRE(got);
        REQUIRE(want);
        CHECK(same_task(*got, *want));
    }
    CHECK_FALSE(store.get("q", "k7"));
    CHECK(store.encode_meta() == reference.encode_meta());

    // Replaying the tail ends where a store that applied everything ends.
    for (const auto& r : tail) {
        auto cmd = queue::decode_command(r.command);
        REQUIRE(cmd);
        REQUIRE(store.apply(*cmd, r.time).ok());
    }
    apply_records(reference, 7, 8);
    for (std::uint64_t i = 1; i <= 8; ++i) {
        auto got = store.get("q", "k" + std::to_string(i));
        REQUIRE(got);
        CHECK(same_task(*got, *reference.get("q", "k" + std::to_string(i))));
    }
}

TEST_CASE("an empty database loads as empty") {
    TempDir dir("empty");
    std::vector<LogRecord> tail;
    auto st = load(dir.str(), tail);
    CHECK(st.ok);
    CHECK(tail.empty());
}

TEST_CASE("deleted tasks are gone after reopen") {
    TempDir dir("delete");
    {
        auto db = open_db(dir.str(), true);
        queue::Store store;
        REQUIRE(db->write({}, {apply_records(store, 1, 3)}).ok);
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
        CHECK_FALSE(s.changes[0].encoded);
        REQUIRE(db->write({}, {s}).ok);
    }
    auto db = open_db(dir.str(), true);
    queue::Store store;
    std::uint64_t applied = 0;
    std::int64_t time = 0;
    std::vector<LogRecord> tail;
    REQUIRE(db->load(store, applied, time, tail).ok);
    CHECK(store.task_count() == 2);
    CHECK(store.get("q", "k1"));
    CHECK_FALSE(store.get("q", "k2"));
    CHECK(store.get("q", "k3"));
}

TEST_CASE("trim_through removes the log entries up to it, in the same batch as the applied state") {
    TempDir dir("trim");
    {
        auto db = open_db(dir.str(), true);
        queue::Store store;
        REQUIRE(db->write(records(1, 10), {}).ok);
        AppliedState s = apply_records(store, 1, 8);
        s.trim_through = 6;
        REQUIRE(db->write({}, {s}).ok);
        CHECK(db->first_log_index() == 7);
        CHECK(db->last_log_index() == 10);
        // A later trim continues from where the last one ended.
        AppliedState s2 = apply_records(store, 9, 9);
        s2.trim_through = 7;
        REQUIRE(db->write({}, {s2}).ok);
        CHECK(db->first_log_index() == 8);
    }
    {
        RawDb raw(dir.str());
        CHECK(raw.keys("log") == std::vector<std::string>{log_key(8), log_key(9), log_key(10)});
    }
    auto db = open_db(dir.str(), true);
    CHECK(db->first_log_index() == 8);
    CHECK(db->last_log_index() == 10);
    queue::Store store;
    std::uint64_t applied = 0;
    std::int64_t time = 0;
    std::vector<LogRecord> tail;
    auto st = db->load(store, applied, time, tail);
    INFO(st.message);
    REQUIRE(st.ok);
    CHECK(applied == 9);
    REQUIRE(tail.size() == 1);
    CHECK(tail[0].index == 10);
    CHECK(store.task_count() == 9);
}

TEST_CASE("a flipped byte in any stored record makes load fail, naming the record") {
    TempDir dir("corrupt");
    build(dir.str(), 6, 4);
    // Each damage is made on a fresh copy of the intact database.
    struct Damage {
        const char* cf;
        std::string key;
        int byte;
        const char* expect;  // in the error message
    };
    const std::vector<Damage> damages{
        {"meta", "applied", 0, "meta/applied"},       // in the checksum itself
        {"meta", "applied", -1, "meta/applied"},      // in the body
        {"meta", "store", -1, "meta/store"},
        {"tasks", storage::task_key("q", "k2"), 6, "tasks"},
        {"tasks", storage::task_key("q", "k4"), -1, "tasks"},
        {"log", log_key(5), -1, "log entry 5"},
        {"log", log_key(6), 2, "log entry 6"},
    };
    for (const auto& d : damages) {
        DYNAMIC_SECTION(d.expect << " damaged at byte " << d.byte) {
            TempDir copy("corrupt-copy");
            std::filesystem::copy(dir.path(), copy.path(),
                                  std::filesystem::copy_options::recursive |
                                      std::filesystem::copy_options::overwrite_existing);
            {
                RawDb raw(copy.str());
                raw.flip_byte(d.cf, d.key, d.byte);
            }
            std::vector<LogRecord> tail;
            auto st = load(copy.str(), tail);
            INFO("load said: " << st.message);
            CHECK_FALSE(st.ok);
            CHECK(st.message.find(d.expect) != std::string::npos);
        }
    }
    SECTION("the intact database loads") {
        std::vector<LogRecord> tail;
        auto st = load(dir.str(), tail);
        INFO(st.message);
        CHECK(st.ok);
        CHECK(tail.size() == 2);
    }
}

TEST_CASE("a record too short to be valid is refused even with a correct checksum") {
    TempDir dir("short");
    build(dir.str(), 4, 2);
    {
        RawDb raw(dir.str());
        raw.put("meta", "applied", storage::seal("12345678", "applied"));  // 8 bytes, not 16
    }
    std::vector<LogRecord> tail;
    auto st = load(dir.str(), tail);
    CHECK_FALSE(st.ok);
    CHECK(st.message.find("meta/applied") != std::string::npos);
}

TEST_CASE("a gap in the log after the applied index is reported") {
    TempDir dir("gap");
    build(dir.str(), 8, 3);
    {
        RawDb raw(dir.str());
        raw.del("log", log_key(6));
    }
    std::vector<LogRecord> tail;
    auto st = load(dir.str(), tail);
    INFO(st.message);
    CHECK_FALSE(st.ok);
    CHECK(st.message.find("log gap") != std::string::npos);
    CHECK(st.message.find("expected entry 6") != std::string::npos);
}

TEST_CASE("a log that starts after the applied index + 1 is a gap too") {
    TempDir dir("gap-front");
    build(dir.str(), 8, 3);
    {
        RawDb raw(dir.str());
        raw.del("log", log_key(4));
    }
    std::vector<LogRecord> tail;
    auto st = load(dir.str(), tail);
    INFO(st.message);
    CHECK_FALSE(st.ok);
    CHECK(st.message.find("expected entry 4, found 5") != std::string::npos);
}
