// storage::prezeroed_wal_fs: a WAL file is zeroed ahead of what was appended and cut back
// on a clean close; other files are not touched. And what the layer relies on in
// RocksDB's log reader: a DB whose WAL files were left with zero tails (the state after a
// kill) recovers every synced write, reading through an older file's tail into the next
// file (a tail taken for damage would end the log there).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/env.h>

#include "storage/prezeroed_wal.h"
#include "storage/storage_support.h"

using namespace dueq;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<rocksdb::FSWritableFile> open_file(rocksdb::FileSystem& fsys,
                                                   const std::string& name) {
    std::unique_ptr<rocksdb::FSWritableFile> f;
    REQUIRE(fsys.NewWritableFile(name, rocksdb::FileOptions(), &f, nullptr).ok());
    return f;
}

// The file's size with `appended` bytes in it: zeroed at least a chunk past them, in
// whole chunks.
std::uintmax_t zeroed_size(std::uintmax_t appended) {
    const auto c = storage::kZeroChunk;
    return (appended + c + c - 1) / c * c;
}

bool all_zero_from(const std::string& name, std::uintmax_t from) {
    std::ifstream in(name, std::ios::binary);
    in.seekg(std::streamoff(from));
    char c;
    while (in.get(c))
        if (c != '\0') return false;
    return true;
}

// Column family handles released before their DB closes, also when a REQUIRE fails.
struct OpenDb {
    std::unique_ptr<rocksdb::DB> db;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    OpenDb(const rocksdb::Options& o, const std::string& path,
           const std::vector<rocksdb::ColumnFamilyDescriptor>& cfs) {
        rocksdb::DB* raw = nullptr;
        REQUIRE(rocksdb::DB::Open(o, path, cfs, &handles, &raw).ok());
        db.reset(raw);
    }
    ~OpenDb() {
        for (auto* h : handles)
            db->DestroyColumnFamilyHandle(h);
    }
};

}  // namespace

TEST_CASE("only RocksDB's numbered .log files count as WAL files", "[prezeroed_wal]") {
    CHECK(storage::is_wal_file_name("/data/000123.log"));
    CHECK(storage::is_wal_file_name("000007.log"));
    CHECK_FALSE(storage::is_wal_file_name("/data/LOG"));
    CHECK_FALSE(storage::is_wal_file_name("/data/LOG.old.1700000000"));
    CHECK_FALSE(storage::is_wal_file_name("/data/000123.sst"));
    CHECK_FALSE(storage::is_wal_file_name("/data/MANIFEST-000005"));
    CHECK_FALSE(storage::is_wal_file_name("/data/x1.log"));
    CHECK_FALSE(storage::is_wal_file_name("/data/.log"));
}

TEST_CASE("a WAL file is zeroed a chunk ahead, and a close cuts it to what was appended",
          "[prezeroed_wal]") {
    test::TempDir dir("prezeroed-file");
    auto fsys = storage::prezeroed_wal_fs(rocksdb::FileSystem::Default());
    const std::string wal = dir.str() + "/000001.log";
    const rocksdb::IOOptions io;

    auto f = open_file(*fsys, wal);
    const std::string record(1000, 'r');
    REQUIRE(f->Append(record, io, nullptr).ok());
    REQUIRE(f->Sync(io, nullptr).ok());
    CHECK(f->GetFileSize(io, nullptr) == record.size());
    CHECK(fs::file_size(wal) == zeroed_size(record.size()));
    CHECK(all_zero_from(wal, record.size()));

    // Past the zeroed chunks: more are zeroed before the append lands.
    const std::string big(storage::kZeroChunk, 'b');
    REQUIRE(f->Append(big, io, nullptr).ok());
    CHECK(fs::file_size(wal) == zeroed_size(record.size() + big.size()));
    CHECK(all_zero_from(wal, record.size() + big.size()));

    REQUIRE(f->Close(io, nullptr).ok());
    CHECK(fs::file_size(wal) == record.size() + big.size());

    SECTION("a file dropped without a close keeps its zero tail, as after a kill") {
        auto g = open_file(*fsys, dir.str() + "/000002.log");
        REQUIRE(g->Append(record, io, nullptr).ok());
        g.reset();
        CHECK(fs::file_size(dir.str() + "/000002.log") == zeroed_size(record.size()));
    }
    SECTION("other files are written as RocksDB writes them") {
        auto g = open_file(*fsys, dir.str() + "/MANIFEST-000001");
        REQUIRE(g->Append(record, io, nullptr).ok());
        REQUIRE(g->Flush(io, nullptr).ok());
        CHECK(fs::file_size(dir.str() + "/MANIFEST-000001") == record.size());
        REQUIRE(g->Close(io, nullptr).ok());
    }
}

TEST_CASE("a DB whose WAL files kept their zero tails recovers every synced write",
          "[prezeroed_wal]") {
    test::TempDir dir("prezeroed-db");
    const std::string live = dir.str() + "/live";
    const std::string after_kill = dir.str() + "/after-kill";
    auto env = rocksdb::NewCompositeEnv(storage::prezeroed_wal_fs(rocksdb::FileSystem::Default()));
    rocksdb::Options o;
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    o.env = env.get();
    const std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
        {rocksdb::kDefaultColumnFamilyName, o}, {"other", o}};

    auto live_db = std::make_unique<OpenDb>(o, live, cfs);
    auto& db = live_db->db;
    const auto& handles = live_db->handles;
    rocksdb::WriteOptions synced;
    synced.sync = true;
    const int n = 3000;  // about 3 MB of log: past several zeroed chunks
    auto value = [](int i) { return std::string(1000, char('a' + i % 26)); };
    for (int i = 0; i < n / 2; ++i)
        REQUIRE(db->Put(synced, handles[0], "k" + std::to_string(i), value(i)).ok());
    // Flushing the other column family starts a new WAL file; the first stays alive, for
    // the default column family's unflushed half. Recovery must read through the first
    // file's zero tail into the second: a tail it took for damage would end the log there.
    REQUIRE(db->Put(synced, handles[1], "x", "y").ok());
    REQUIRE(db->Flush({}, handles[1]).ok());
    for (int i = n / 2; i < n; ++i)
        REQUIRE(db->Put(synced, handles[0], "k" + std::to_string(i), value(i)).ok());

    // A copy of the directory while the DB is open is what a kill would leave: the newest
    // WAL file with its zero tail, the default column family not flushed. RocksDB closes
    // (and so cuts) a WAL file some time after it moves to the next; a kill before that
    // leaves the older file with a tail too, so the copy is given one.
    fs::copy(live, after_kill);
    std::vector<fs::path> wals;
    for (const auto& e : fs::directory_iterator(after_kill))
        if (storage::is_wal_file_name(e.path().string())) wals.push_back(e.path());
    std::sort(wals.begin(), wals.end());
    REQUIRE(wals.size() == 2);
    CHECK(fs::file_size(wals.back()) % storage::kZeroChunk == 0);
    const auto closed_size = fs::file_size(wals.front());
    if (closed_size % storage::kZeroChunk != 0) {
        std::ofstream out(wals.front(), std::ios::binary | std::ios::app);
        out << std::string(storage::kZeroChunk - closed_size % storage::kZeroChunk, '\0');
    }
    live_db.reset();

    // Opened with RocksDB's own file system: the zero tails need nothing from this layer.
    rocksdb::Options plain;
    plain.paranoid_checks = true;
    OpenDb recovered(plain, after_kill,
                     {{rocksdb::kDefaultColumnFamilyName, plain}, {"other", plain}});
    for (int i = 0; i < n; ++i) {
        std::string v;
        REQUIRE(recovered.db->Get({}, recovered.handles[0], "k" + std::to_string(i), &v).ok());
        REQUIRE(v == value(i));
    }
    std::string v;
    CHECK(recovered.db->Get({}, recovered.handles[0], "k" + std::to_string(n), &v).IsNotFound());
}
