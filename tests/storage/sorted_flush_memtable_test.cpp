// storage::sorted_flush_memtable: a RocksDB that uses it reads back exactly what a model
// map holds, in order, from its mutable memtable, from flushed files and from a snapshot
// taken before later writes, whatever the keys share: long common prefixes, keys that are
// prefixes of others, zero and 0xff bytes, keys rewritten within one memtable.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include <rocksdb/db.h>

#include "storage/sorted_flush_memtable.h"
#include "storage/storage_support.h"

using namespace dueq;
using Model = std::map<std::string, std::string>;

namespace {

// With `memtables`, the factory is handed out, so that a test can see what it keeps.
std::unique_ptr<rocksdb::DB> open_rocksdb(
    const std::string& path, std::size_t write_buffer,
    std::shared_ptr<storage::SortedFlushMemTableFactory>* memtables = nullptr) {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.allow_concurrent_memtable_write = false;
    auto factory = storage::sorted_flush_memtable(write_buffer / 8);
    if (memtables) *memtables = factory;
    o.memtable_factory = factory;
    o.write_buffer_size = write_buffer;
    rocksdb::DB* db = nullptr;
    auto s = rocksdb::DB::Open(o, path, &db);
    REQUIRE(s.ok());
    return std::unique_ptr<rocksdb::DB>(db);
}

// Keys after a shared head, like the task records' (queue length, queue name, and the
// zeros of dueq-bench's keys with `long_head`): short tails over a few bytes, so that
// 8-byte words often tie and keys end inside one another.
bool long_head = false;
std::string random_key(std::mt19937_64& rng) {
    static const char alphabet[] = {'\0', '\x01', 'a', 'b', '\x7f', '\x80', '\xff'};
    std::string k = long_head ? std::string("\0\x01qk000000000", 14) : std::string("\0\x01q", 3);
    const std::size_t tail = rng() % 14;
    for (std::size_t i = 0; i < tail; ++i)
        k.push_back(alphabet[rng() % sizeof(alphabet)]);
    return k;
}

Model read_all(rocksdb::DB& db, const rocksdb::Snapshot* at = nullptr) {
    rocksdb::ReadOptions ro;
    ro.snapshot = at;
    std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(ro));
    Model m;
    std::optional<std::string> previous;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const std::string k = it->key().ToString();
        if (previous) REQUIRE(*previous < k);
        previous = k;
        m[k] = it->value().ToString();
    }
    REQUIRE(it->status().ok());
    return m;
}

// Seek, SeekForPrev and Get at random keys answer as the model does.
void check_positioning(rocksdb::DB& db, const Model& model, std::mt19937_64& rng) {
    std::unique_ptr<rocksdb::Iterator> it(db.NewIterator({}));
    for (int i = 0; i < 200; ++i) {
        const std::string target = random_key(rng);
        it->Seek(target);
        auto up = model.lower_bound(target);
        REQUIRE(it->Valid() == (up != model.end()));
        if (up != model.end()) REQUIRE(it->key().ToString() == up->first);

        it->SeekForPrev(target);
        auto down = model.upper_bound(target);
        const bool any = down != model.begin();
        REQUIRE(it->Valid() == any);
        if (any) REQUIRE(it->key().ToString() == std::prev(down)->first);

        std::string value;
        auto s = db.Get({}, target, &value);
        auto found = model.find(target);
        REQUIRE(s.ok() == (found != model.end()));
        if (found != model.end()) REQUIRE(value == found->second);
    }
    // Backwards from the end, every key once.
    std::size_t n = 0;
    auto expect = model.rbegin();
    for (it->SeekToLast(); it->Valid(); it->Prev(), ++expect, ++n)
        REQUIRE(it->key().ToString() == expect->first);
    REQUIRE(n == model.size());
}

void write_random(rocksdb::DB& db, Model& model, std::mt19937_64& rng, int writes) {
    for (int i = 0; i < writes; ++i) {
        const std::string k = random_key(rng);
        if (rng() % 5 == 0) {
            REQUIRE(db.Delete({}, k).ok());
            model.erase(k);
        } else {
            // Now and then a long value: an entry that takes its own slab, or a whole
            // memtable's worth of the small ones.
            const auto shape = rng() % 1000;
            const std::string v = shape == 0   ? std::string(300'000 + rng() % 1000, char(rng()))
                                  : shape < 20 ? std::string(2000 + rng() % 3000, char(rng()))
                                               : std::to_string(rng());
            REQUIRE(db.Put({}, k, v).ok());
            model[k] = v;
        }
    }
}

// A fresh database (64 MiB memtables: no flush unless asked) with `writes` random writes.
struct Filled {
    Filled(const std::string& name, std::uint64_t seed, int writes)
        : dir(name), db(open_rocksdb(dir.str(), 64 << 20)), rng(seed) {
        write_random(*db, model, rng, writes);
    }
    test::TempDir dir;
    std::unique_ptr<rocksdb::DB> db;
    std::mt19937_64 rng;
    Model model;
};

}  // namespace

TEST_CASE("sorted-flush memtable: reads match a model before and after flushes") {
    const auto seed = GENERATE(1, 2, 3);
    long_head = GENERATE(false, true);
    std::mt19937_64 rng(seed);
    test::TempDir dir("sorted-flush-" + std::to_string(seed) + (long_head ? "-long" : ""));
    Model model;
    {
        // Small memtables: RocksDB also switches and flushes them on its own, mid-run.
        // Freed memtables' slabs (8 KiB each) are kept, four at most, and reused by the
        // next ones: what a reused slab held before must never show through.
        std::shared_ptr<storage::SortedFlushMemTableFactory> memtables;
        auto db = open_rocksdb(dir.str(), 64 << 10, &memtables);
        memtables->keep_freed_slabs(32 << 10);
        bool kept_some = false;
        for (int round = 0; round < 6; ++round) {
            write_random(*db, model, rng, 3000);
            REQUIRE(read_all(*db) == model);
            check_positioning(*db, model, rng);
            if (round % 2 == 1) {
                REQUIRE(db->Flush({}).ok());
                REQUIRE(read_all(*db) == model);
            }
            REQUIRE(memtables->kept_slab_bytes() <= (32u << 10));
            kept_some = kept_some || memtables->kept_slab_bytes() > 0;
        }
        CHECK(kept_some);
    }
    // Reopened: the WAL's tail is replayed into a new memtable of this kind.
    auto db = open_rocksdb(dir.str(), 64 << 10);
    REQUIRE(read_all(*db) == model);
    check_positioning(*db, model, rng);
}

TEST_CASE("sorted-flush memtable: a snapshot sees a key's older value in the same memtable") {
    Filled f("sorted-flush-snapshot", 7, 2000);
    auto& [dir, db, rng, model] = f;
    const Model before = model;
    const rocksdb::Snapshot* snap = db->GetSnapshot();
    write_random(*db, model, rng, 2000);
    REQUIRE(read_all(*db, snap) == before);
    REQUIRE(read_all(*db) == model);
    // Point lookups at the snapshot find each key's older version, or its absence.
    rocksdb::ReadOptions at;
    at.snapshot = snap;
    for (const auto& [k, v] : model) {
        std::string value;
        auto s = db->Get(at, k, &value);
        auto old = before.find(k);
        REQUIRE(s.ok() == (old != before.end()));
        if (old != before.end()) REQUIRE(value == old->second);
    }
    REQUIRE(db->Flush({}).ok());
    REQUIRE(read_all(*db, snap) == before);
    REQUIRE(read_all(*db) == model);
    db->ReleaseSnapshot(snap);
}

TEST_CASE("sorted-flush memtable: log keys in index order, and one index written twice") {
    test::TempDir dir("sorted-flush-log");
    auto db = open_rocksdb(dir.str(), 64 << 20);
    Model model;
    auto index_key = [](std::uint64_t i) {
        std::string k(8, '\0');
        for (int b = 0; b < 8; ++b)
            k[std::size_t(b)] = char(i >> (56 - 8 * b));
        return k;
    };
    for (std::uint64_t i = 1; i <= 5000; ++i) {
        REQUIRE(db->Put({}, index_key(i), "t1").ok());
        model[index_key(i)] = "t1";
    }
    // A new leader replaces the log's tail: the same keys again, later in the memtable.
    for (std::uint64_t i = 4000; i <= 4500; ++i) {
        REQUIRE(db->Put({}, index_key(i), "t2").ok());
        model[index_key(i)] = "t2";
    }
    REQUIRE(read_all(*db) == model);
    REQUIRE(db->Flush({}).ok());
    REQUIRE(read_all(*db) == model);
}

TEST_CASE("sorted-flush memtable: a memtable waiting for its flush is read sorted in place") {
    Filled f("sorted-flush-waiting", 11, 3000);
    auto& [dir, db, rng, model] = f;
    // The memtable becomes read-only, and stays unflushed while background work is held.
    REQUIRE(db->PauseBackgroundWork().ok());
    rocksdb::FlushOptions no_wait;
    no_wait.wait = false;
    REQUIRE(db->Flush(no_wait).ok());
    std::uint64_t waiting = 0;
    REQUIRE(db->GetIntProperty("rocksdb.num-immutable-mem-table", &waiting));
    REQUIRE(waiting == 1);
    REQUIRE(read_all(*db) == model);
    check_positioning(*db, model, rng);
    REQUIRE(db->ContinueBackgroundWork().ok());
    REQUIRE(db->Flush({}).ok());
    REQUIRE(read_all(*db) == model);
}
