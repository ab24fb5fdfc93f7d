// Persistence hooks: what drain_changes reports, and that a Loader's meta + task rebuild a
// store that then behaves exactly like the one that never restarted.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include <msgpack.hpp>

#include "queue/store.h"
#include "queue/store_loader.h"

using namespace dueq::queue;

namespace {

constexpr Millis T0 = 1'700'000'000'000;
using Image = std::map<std::pair<std::string, std::string>, std::optional<std::string>>;

Image drain(Store& s) {
    Image out;
    s.drain_changes(
        [&](std::string_view q, std::string_view k, const std::optional<std::string>& enc) {
            auto [it, fresh] = out.emplace(std::pair{std::string(q), std::string(k)}, enc);
            if (!fresh) FAIL("key reported twice in one drain: " << k);
        });
    return out;
}

using Records = std::vector<std::array<std::string, 3>>;  // queue, key, encoded task

Records records_of(const Store& from) {
    Records out;
    from.for_each_task([&](std::string_view q, std::string_view k, std::string_view enc) {
        out.push_back({std::string(q), std::string(k), std::string(enc)});
    });
    return out;
}

// A store rebuilt from a meta record and task records, as a restart does; `bulk`: by one
// Loader, else one Loader per record (each in the indexes before the next).
std::unique_ptr<Store> load_records(const std::string& meta, const Records& records,
                                    bool bulk = false) {
    auto s = std::make_unique<Store>();
    REQUIRE(Store::Loader(*s).meta(meta));
    if (bulk) {
        Store::Loader load(*s, records.size());
        for (const auto& [q, k, enc] : records)
            REQUIRE(load.task(q, k, enc));
    } else {
        for (const auto& [q, k, enc] : records)
            REQUIRE(Store::Loader(*s).task(q, k, enc));
    }
    return s;
}

std::unique_ptr<Store> reload(const Store& from) {
    return load_records(from.encode_meta(), records_of(from));
}

void same_task(const Store& a, const Store& b, const std::string& q, const std::string& k) {
    auto x = a.get(q, k), y = b.get(q, k);
    REQUIRE(x.has_value() == y.has_value());
    if (!x) return;
    CHECK(x->payload == y->payload);
    CHECK(x->status == y->status);
    CHECK(x->time == y->time);
    CHECK(x->attempts == y->attempts);
    CHECK(x->version == y->version);
    CHECK(x->hlc == y->hlc);
    CHECK(x->lease == y->lease);
    CHECK(x->lease_until == y->lease_until);
    CHECK(x->owner == y->owner);
    CHECK(x->release_on_disconnect == y->release_on_disconnect);
    CHECK(x->not_before == y->not_before);
    CHECK(x->done_until == y->done_until);
}

}  // namespace

TEST_CASE("drain_changes reports each changed key once, deletions as tombstones",
          "[queue][persist]") {
    Store s;
    REQUIRE(s.apply(Put{"q", "a", "1"}, T0).ok());
    REQUIRE(s.apply(Put{"q", "a", "2"}, T0).ok());
    REQUIRE(s.apply(Put{"q", "b", "1"}, T0).ok());
    Image first = drain(s);
    CHECK(first.size() == 2);
    CHECK(first.at({"q", "a"}).has_value());
    CHECK(drain(s).empty());  // forgotten once drained

    REQUIRE(s.apply(Delete{"q", "a"}, T0).ok());
    REQUIRE(s.apply(Put{"q", "c", "1"}, T0).ok());
    REQUIRE(s.apply(Delete{"q", "c"}, T0).ok());  // never persisted: still reported
    REQUIRE(s.apply(Delete{"q", "b"}, T0).ok());
    REQUIRE(s.apply(Put{"q", "b", "again"}, T0).ok());  // deleted then re-created
    Image second = drain(s);
    CHECK(second.size() == 3);
    // A deleted key is remembered for retention_ms (docs/semantics.md, Retention): its
    // record is the tombstone, until that runs out.
    CHECK(second.at({"q", "a"}).has_value());
    CHECK(second.at({"q", "c"}).has_value());
    CHECK(s.tombstone_hlc("q", "a").has_value());
    CHECK_FALSE(s.tombstone_hlc("q", "b").has_value());  // re-created
    CHECK(second.at({"q", "b"}).has_value());
    s.advance(T0 + s.settings("q").retention_ms);
    Image expired = drain(s);
    CHECK(expired.size() == 2);
    CHECK_FALSE(expired.at({"q", "a"}).has_value());
    CHECK_FALSE(expired.at({"q", "c"}).has_value());

    // Refused commands change nothing, so report nothing.
    CHECK(s.apply(Put{"q", "b", "x", std::nullopt, PutMode::insert}, T0).code == Code::exists);
    CHECK(drain(s).empty());
}

TEST_CASE("drain_changes reports what time did: expiries, ends of delays, removals",
          "[queue][persist]") {
    Store s;
    Declare d{"q"};
    d.ttr_ms = 100;
    d.retention_ms = 100;
    REQUIRE(s.apply(d, T0).ok());
    REQUIRE(s.apply(Put{"q", "a", "1", T0}, T0).ok());
    REQUIRE(s.apply(Put{"q", "b", "1", T0}, T0).ok());
    Result r = s.apply(Take{"q", 2}, T0);
    REQUIRE(r.tasks.size() == 2);
    REQUIRE(s.apply(Ack{"q", "a", r.tasks[0].lease}, T0).ok());
    drain(s);
    s.advance(T0 + 100);  // b's lease ends, a's retention ends
    Image changes = drain(s);
    CHECK(changes.size() == 2);
    CHECK_FALSE(changes.at({"q", "a"}).has_value());
    CHECK(changes.at({"q", "b"}).has_value());
}

TEST_CASE("restart rebuilds leases, sessions, delays, retention and counters", "[queue][persist]") {
    Store s;
    Declare d{"q"};
    d.ttr_ms = 1000;
    d.late_share = 0.5;
    d.lead_ms = 10'000;
    d.max_attempts = 3;
    REQUIRE(s.apply(d, T0).ok());
    for (int i = 0; i < 6; ++i) {
        REQUIRE(s.apply(Put{"q", "late" + std::to_string(i), "p", T0 - 10 + i}, T0).ok());
        REQUIRE(s.apply(Put{"q", "fresh" + std::to_string(i), "p", T0 + 10 + i}, T0).ok());
    }
    Result r = s.apply(Take{"q", 3, std::nullopt, 42, true}, T0);  // leaves the credit at 0.5
    REQUIRE(r.tasks.size() == 3);
    REQUIRE(s.apply(Release{"q", r.tasks[1].key, r.tasks[1].lease, 400}, T0 + 1).ok());
    REQUIRE(s.apply(Ack{"q", r.tasks[2].key, r.tasks[2].lease}, T0 + 2).ok());
    REQUIRE(s.apply(Put{"other", "x", "y"}, T0 + 3).ok());
    REQUIRE(s.apply(Delete{"other", "x"}, T0 + 3).ok());  // the queue stays

    auto t = reload(s);
    CHECK(t->queue_names() == s.queue_names());
    CHECK(t->encode_meta() == s.encode_meta());
    CHECK(t->task_count() == s.task_count());
    CHECK(t->settings("q") == s.settings("q"));
    for (int i = 0; i < 6; ++i) {
        same_task(s, *t, "q", "late" + std::to_string(i));
        same_task(s, *t, "q", "fresh" + std::to_string(i));
    }
    // Continue both with the same commands: identical answers.
    std::vector<std::pair<Command, Millis>> more = {
        {Take{"q", 2, std::nullopt, 43, true}, T0 + 10},
        {ReleaseSession{42}, T0 + 20},
        {Take{"q", 4}, T0 + 30},
        {Touch{"q", r.tasks[0].key, r.tasks[0].lease}, T0 + 40},
        {Take{"q", 10}, T0 + 500},
        {Put{"q", r.tasks[2].key, "again", std::nullopt, PutMode::insert}, T0 + 600},
        {Take{"q", 10}, T0 + 5000},
    };
    for (const auto& [cmd, at] : more) {
        Result a = s.apply(cmd, at), b = t->apply(cmd, at);
        REQUIRE(a.code == b.code);
        REQUIRE(a.tasks.size() == b.tasks.size());
        for (std::size_t i = 0; i < a.tasks.size(); ++i) {
            CHECK(a.tasks[i].key == b.tasks[i].key);
            CHECK(a.tasks[i].lease == b.tasks[i].lease);
            CHECK(a.tasks[i].attempts == b.tasks[i].attempts);
        }
        CHECK(a.lease_until == b.lease_until);
        CHECK(a.version == b.version);
    }
    CHECK(t->encode_meta() == s.encode_meta());
    for (int i = 0; i < 6; ++i)
        same_task(s, *t, "q", "late" + std::to_string(i));
}

TEST_CASE("lease ids are not reused after a restart", "[queue][persist]") {
    Store s;
    REQUIRE(s.apply(Put{"q", "a", "p"}, T0).ok());
    LeaseId first = s.apply(Take{"q"}, T0).tasks.at(0).lease;
    REQUIRE(s.apply(Ack{"q", "a", first, std::nullopt, T0}, T0).ok());  // no lease left in tasks
    auto t = reload(s);
    CHECK(t->apply(Take{"q"}, T0 + 1).tasks.at(0).lease > first);
}

TEST_CASE("records that do not decode are refused", "[queue][persist]") {
    Store s;
    REQUIRE(s.apply(Put{"q", "a", "p"}, T0).ok());
    std::string meta = s.encode_meta();
    std::string task;
    s.for_each_task(
        [&](std::string_view, std::string_view, std::string_view enc) { task = std::string(enc); });
    REQUIRE_FALSE(task.empty());

    Store t;
    CHECK_FALSE(Store::Loader(t).meta(""));
    CHECK_FALSE(Store::Loader(t).meta("garbage"));
    CHECK_FALSE(Store::Loader(t).meta(meta.substr(0, meta.size() - 1)));
    CHECK(t.queue_names().empty());
    CHECK_FALSE(Store::Loader(t).task("q", "a", ""));
    CHECK_FALSE(Store::Loader(t).task("q", "a", task.substr(0, task.size() - 1)));
    CHECK_FALSE(Store::Loader(t).task("q", "a", task + "x"));
    CHECK_FALSE(Store::Loader(t).task("q", "", task));
    CHECK_FALSE(Store::Loader(t).task("", "a", task));
    std::string newer = task;
    newer[1] = 2;  // the format byte after the array header
    CHECK_FALSE(Store::Loader(t).task("q", "a", newer));
    CHECK(t.task_count() == 0);
    // Records carry no checksum of their own (storage checksums them); what is checked
    // here is that no prefix and no broken type byte gets through.
    for (std::size_t n = 0; n < task.size(); ++n)
        CHECK_FALSE(Store::Loader(t).task("q", "a", task.substr(0, n)));
    for (std::size_t i : {0, 1, 2, 3}) {
        std::string c = task;
        c[i] = '\xc1';
        CHECK_FALSE(Store::Loader(t).task("q", "a", c));
    }
    CHECK(Store::Loader(t).meta(meta));
    CHECK(Store::Loader(t).task("q", "a", task));
    CHECK(t.get("q", "a")->payload == "p");
    CHECK(Store::Loader(t).task("q", "a", task));  // loading a key twice replaces it
    CHECK(t.task_count() == 1);
}

TEST_CASE("times beyond what a task record holds are clamped or refused", "[queue][persist]") {
    // A task keeps its times in 48-bit fields. Log times are clamped to the range of
    // command times, so nothing derived from them (a lease's end, here) overflows it.
    const Millis kMaxTime = (Millis{1} << 46) - 1;
    Store s;
    REQUIRE(s.apply(Put{"q", "a", "p"}, INT64_MAX).ok());
    CHECK(s.get("q", "a")->time == kMaxTime);
    auto taken = s.apply(Take{"q"}, INT64_MAX);
    REQUIRE(taken.tasks.size() == 1);
    REQUIRE(s.apply(Put{"q", "b", "p"}, INT64_MIN).ok());
    CHECK(s.get("q", "b")->time == kMaxTime);  // the store's time never goes back

    Store low;
    REQUIRE(low.apply(Put{"q", "a", "p"}, INT64_MIN).ok());
    CHECK(low.get("q", "a")->time == -kMaxTime);

    // A record with a time a task cannot hold is corrupt.
    std::string task;
    s.for_each_task([&](std::string_view, std::string_view k, std::string_view enc) {
        if (k == "a") task = std::string(enc);
    });
    REQUIRE_FALSE(task.empty());
    auto with_time = [&](std::size_t field, std::int64_t value) {
        auto oh = msgpack::unpack(task.data(), task.size());
        msgpack::object o = oh.get();
        o.via.array.ptr[field] = msgpack::object(value);
        msgpack::sbuffer b;
        msgpack::pack(b, o);
        return std::string(b.data(), b.size());
    };
    const std::int64_t kLargest = (std::int64_t{1} << 47) - 1;
    for (std::size_t field : {2, 3}) {  // time, aux
        Store t;
        CHECK(Store::Loader(t).task("q", "a", with_time(field, kLargest)));
        CHECK(Store::Loader(t).task("q", "a", with_time(field, -kLargest)));
        CHECK_FALSE(Store::Loader(t).task("q", "a", with_time(field, kLargest + 1)));
        CHECK_FALSE(Store::Loader(t).task("q", "a", with_time(field, -kLargest - 1)));
        CHECK_FALSE(Store::Loader(t).task("q", "a", with_time(field, INT64_MAX)));
    }
    Store t;
    REQUIRE(Store::Loader(t).task("q", "a", with_time(2, kLargest)));
    CHECK(t.get("q", "a")->time == kLargest);

    // A meta written before log times were clamped may carry a later store time.
    const std::string encoded_meta = s.encode_meta();
    auto meta_oh = msgpack::unpack(encoded_meta.data(), encoded_meta.size());
    msgpack::object meta = meta_oh.get();
    meta.via.array.ptr[1] = msgpack::object(INT64_MAX);  // the store's time
    msgpack::sbuffer mb;
    msgpack::pack(mb, meta);
    Store m;
    REQUIRE(Store::Loader(m).meta(std::string(mb.data(), mb.size())));
    REQUIRE(m.apply(Put{"q", "c", "p"}, T0).ok());
    CHECK(m.get("q", "c")->time == kMaxTime);
}

TEST_CASE("a meta record whose late_share Declare would refuse is refused", "[queue][persist]") {
    // Found by fuzz/fuzz_records: a meta with late_share 1e19 loaded, and the store then
    // wrote a meta it could not load again (msgpack-c packs 1e19 as an unsigned
    // integer); one with 2^64 made msgpack-c's packer convert 2^64 to uint64_t
    // (undefined behaviour) when the store wrote its meta.
    auto meta = [](auto pack_share) {
        msgpack::sbuffer buf;
        msgpack::packer<msgpack::sbuffer> p(buf);
        p.pack_array(4);
        p.pack(1), p.pack(T0), p.pack(1);
        p.pack_array(1);
        p.pack_array(7);
        p.pack(std::string("q"));
        for (int i = 0; i < 4; ++i)
            p.pack_nil();
        pack_share(p);
        p.pack(0);
        return std::string(buf.data(), buf.size());
    };
    // msgpack-c's pack_float itself converts 2^64 to uint64_t (clang's UBSan says so), so
    // that float is written by hand: 0xca, then its bits big-endian.
    auto raw_float = [](auto& p, float f) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &f, sizeof bits);
        const char b[5] = {char(0xca), char(bits >> 24), char(bits >> 16), char(bits >> 8),
                           char(bits)};
        p.pack_bin_body(b, sizeof b);
    };
    Store s;
    CHECK_FALSE(Store::Loader(s).meta(meta([](auto& p) { p.pack_float(1e19f); })));
    CHECK_FALSE(Store::Loader(s).meta(meta([](auto& p) { p.pack_double(1e19); })));
    CHECK_FALSE(
        Store::Loader(s).meta(meta([&](auto& p) { raw_float(p, 18446744073709551616.0f); })));
    CHECK_FALSE(Store::Loader(s).meta(meta([](auto& p) { p.pack_double(std::nan("")); })));
    CHECK_FALSE(Store::Loader(s).meta(meta([](auto& p) { p.pack_double(-0.5); })));
    CHECK(s.queue_names().empty());
    REQUIRE(Store::Loader(s).meta(meta([](auto& p) { p.pack_double(1.0); })));
    REQUIRE(Store::Loader(s).meta(meta([](auto& p) { p.pack_double(0.25); })));
    auto t = reload(s);
    CHECK(t->encode_meta() == s.encode_meta());
}

TEST_CASE("a bulk load (one Loader) rebuilds the same store in any record order",
          "[queue][persist]") {
    // Many ties on time (the trees then order by key), every tree in use, tombstones.
    Store s;
    Declare d{"q"};
    d.ttr_ms = 1000;
    d.retention_ms = 5000;
    REQUIRE(s.apply(d, T0).ok());
    auto key_of = [](int i) { return "k" + std::to_string((i * 7919) % 1000); };
    for (int i = 0; i < 600; ++i) {
        const std::string key = key_of(i);
        REQUIRE(s.apply(Put{i % 3 ? "q" : "r", key, "p", T0 + i % 7}, T0).ok());
    }
    Result taken = s.apply(Take{"q", 40}, T0 + 10);
    REQUIRE(taken.tasks.size() == 40);
    for (int i = 0; i < 10; ++i) {
        const auto& t = taken.tasks[std::size_t(i)];
        if (i % 3 == 0) REQUIRE(s.apply(Ack{"q", t.key, t.lease}, T0 + 11).ok());  // done
        if (i % 3 == 1)
            REQUIRE(s.apply(Release{"q", t.key, t.lease, 300}, T0 + 11).ok());  // delayed
        if (i % 3 == 2) REQUIRE(s.apply(Bury{"q", t.key, t.lease}, T0 + 11).ok());
    }
    std::array<std::string, 3> before_delete;  // a task record of a key deleted next
    for (const auto& r : records_of(s))
        if (r[0] == "r" && r[1] == key_of(0)) before_delete = r;
    REQUIRE(!before_delete[2].empty());
    for (int i = 0; i < 90; i += 3)
        REQUIRE(s.apply(Delete{"r", key_of(i)}, T0 + 12).ok());

    const Records records = records_of(s);
    REQUIRE(records.size() > 500);
    auto by_key = records;
    std::sort(by_key.begin(), by_key.end());  // as RocksDB hands them: by queue, then key
    auto shuffled = records;
    std::mt19937 rng(7);
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    // Keys loaded twice: the later record replaces the earlier, a task by a task, a task
    // by a tombstone.
    auto twice = by_key;
    twice.insert(twice.begin(), before_delete);
    twice.insert(twice.begin() + 10, twice[20]);

    auto load = [&](const Records& recs, bool bulk) {
        return load_records(s.encode_meta(), recs, bulk);
    };
    std::vector<std::unique_ptr<Store>> loaded;
    loaded.push_back(load(records, false));
    loaded.push_back(load(by_key, true));
    loaded.push_back(load(shuffled, true));
    loaded.push_back(load(twice, true));
    auto same_counts = [](const QueueStats& a, const QueueStats& b) {
        return std::tie(a.ready, a.taken, a.buried, a.done, a.due_now, a.next_due) ==
               std::tie(b.ready, b.taken, b.buried, b.done, b.due_now, b.next_due);
    };
    for (auto& t : loaded)
        for (const char* q : {"q", "r"})
            CHECK(same_counts(t->stats(q, T0 + 20), s.stats(q, T0 + 20)));
    // The same commands on the original and on every reload: the same answers, in order.
    const std::vector<std::pair<Command, Millis>> more = {
        {Take{"q", 25}, T0 + 20},   {Take{"r", 50}, T0 + 20},   {Kick{"q", 100}, T0 + 30},
        {Take{"q", 500}, T0 + 400}, {Take{"r", 500}, T0 + 400}, {Take{"q", 500}, T0 + 2000},
        {Take{"r", 10}, T0 + 9000},
    };
    for (const auto& [cmd, at] : more) {
        const Result want = s.apply(cmd, at);
        for (auto& t : loaded) {
            const Result got = t->apply(cmd, at);
            REQUIRE(got.code == want.code);
            REQUIRE(got.tasks.size() == want.tasks.size());
            for (std::size_t i = 0; i < want.tasks.size(); ++i) {
                CHECK(got.tasks[i].key == want.tasks[i].key);
                CHECK(got.tasks[i].lease == want.tasks[i].lease);
            }
        }
    }
    for (auto& t : loaded) {
        CHECK(t->task_count() == s.task_count());
        CHECK(t->encode_meta() == s.encode_meta());
    }
}
