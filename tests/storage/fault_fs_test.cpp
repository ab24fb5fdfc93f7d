// The power-cut harness (fault_fs.h) against storage::Database: records written with
// sync survive a crash that drops every unsynced byte; records written without sync
// do not, which shows the harness really drops data.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "storage/fault_fs.h"
#include "storage/storage_support.h"

using namespace dueq;
using namespace dueq::test;

namespace {

struct Loaded {
    std::uint64_t applied = 0;
    std::vector<storage::LogRecord> tail;
    std::size_t tasks = 0;
    std::uint64_t last_log_index = 0;
};

Loaded reopen_and_load(const std::string& path) {
    auto db = open_db(path, true);  // the default environment: a fresh boot
    Loaded out;
    queue::Store store;
    std::int64_t time = 0;
    auto st = db->load(store, out.applied, time, out.tail);
    INFO("load: " << st.message);
    REQUIRE(st.ok);
    out.tasks = store.task_count();
    out.last_log_index = db->last_log_index();
    return out;
}

// Writes log 1..n one synced write at a time (as a busy node would), with an unsynced
// applied state after every tenth record, then crashes and writes more.
void write_then_crash(const std::string& path, FaultEnv& env, bool sync, std::uint64_t n) {
    auto db = open_db(path, sync, env.get());
    queue::Store store;
    std::uint64_t applied = 0;
    for (std::uint64_t i = 1; i <= n; ++i) {
        REQUIRE(db->write({record_for(i)}, {}).ok);
        if (i % 10 == 5) {
            REQUIRE(db->write({}, {apply_records(store, applied + 1, i)}).ok);
            applied = i;
        }
    }
    // Applied states are never synced on their own; this last one is still unsynced.
    REQUIRE(db->write({}, {apply_records(store, applied + 1, n)}).ok);
    env.fs->crash();
    // After the cut nothing reaches the disk, but nothing fails either.
    for (std::uint64_t i = n + 1; i <= n + 20; ++i) REQUIRE(db->write({record_for(i)}, {}).ok);
    db.reset();  // closes the DB: no effect on disk
}

}  // namespace

TEST_CASE("power cut with sync: every record whose write returned is there") {
    TempDir dir("fault-sync");
    auto env = make_fault_env();
    constexpr std::uint64_t n = 200;
    write_then_crash(dir.str(), env, true, n);
    auto dropped = env.fs->drop_unsynced();
    INFO("dropped " << dropped.bytes_dropped << " bytes in " << dropped.files_truncated
                    << " files, deleted " << dropped.files_deleted << " files");

    CHECK(dropped.bytes_dropped > 0);

    auto got = reopen_and_load(dir.str());
    CHECK(got.last_log_index == n);  // all synced records, none written after the cut
    CHECK(got.applied == n - 5);     // the unsynced applied state was lost ...
    CHECK(got.tasks == n - 5);
    REQUIRE(got.tail.size() == 5);   // ... and the log still has what it covered
    for (std::size_t i = 0; i < got.tail.size(); ++i) {
        const auto want = record_for(got.applied + 1 + i);
        CHECK(got.tail[i].index == want.index);
        CHECK(got.tail[i].command == want.command);
    }
}

TEST_CASE("power cut without sync: unsynced records are lost (the harness drops data)") {
    TempDir dir("fault-nosync");
    auto env = make_fault_env();
    constexpr std::uint64_t n = 200;
    {
        auto db = open_db(dir.str(), false, env.get());
        for (std::uint64_t i = 1; i <= n; ++i) REQUIRE(db->write({record_for(i)}, {}).ok);
        CHECK(env.fs->unsynced_bytes() > 0);
        env.fs->crash();
    }
    auto dropped = env.fs->drop_unsynced();
    CHECK(dropped.bytes_dropped + dropped.files_deleted > 0);

    auto got = reopen_and_load(dir.str());
    INFO(got.last_log_index << " of " << n << " records survived");
    CHECK(got.last_log_index < n);
}

TEST_CASE("power cut after a reopen that moved the log into table files") {
    // The reopen replays RocksDB's WAL into an SST, writes a new MANIFEST and WAL and
    // syncs directories, all through the fault file system: none of that may be lost.
    TempDir dir("fault-reopen");
    auto env = make_fault_env();
    {
        auto db = open_db(dir.str(), true, env.get());
        for (std::uint64_t i = 1; i <= 50; ++i) REQUIRE(db->write({record_for(i)}, {}).ok);
    }
    {
        auto db = open_db(dir.str(), true, env.get());
        CHECK(db->last_log_index() == 50);
        for (std::uint64_t i = 51; i <= 100; ++i) REQUIRE(db->write({record_for(i)}, {}).ok);
        env.fs->crash();
    }
    env.fs->drop_unsynced();
    auto got = reopen_and_load(dir.str());
    CHECK(got.last_log_index == 100);
    CHECK(got.tail.size() == 100);
}

TEST_CASE("the fault file system truncates files to their synced size and deletes unnamed ones") {
    TempDir dir("fault-files");
    auto env = make_fault_env();
    auto& fs = *env.fs;
    const rocksdb::IOOptions io;
    const std::string a = (dir.path() / "a").string(), b = (dir.path() / "b").string(),
                      c = (dir.path() / "c").string();
    std::unique_ptr<rocksdb::FSDirectory> d;
    REQUIRE(fs.NewDirectory(dir.str(), io, &d, nullptr).ok());
    std::unique_ptr<rocksdb::FSWritableFile> fa, fb;
    REQUIRE(fs.NewWritableFile(a, {}, &fa, nullptr).ok());
    REQUIRE(fs.NewWritableFile(b, {}, &fb, nullptr).ok());
    REQUIRE(fa->Append("synced", io, nullptr).ok());
    REQUIRE(fa->Sync(io, nullptr).ok());
    REQUIRE(fa->Append("+unsynced", io, nullptr).ok());
    REQUIRE(fa->RangeSync(0, 15, io, nullptr).ok());  // not a durability promise
    REQUIRE(fb->Append("fully synced", io, nullptr).ok());
    REQUIRE(fb->Sync(io, nullptr).ok());
    REQUIRE(d->Fsync(io, nullptr).ok());  // a's and b's names are durable now
    std::unique_ptr<rocksdb::FSWritableFile> fc;
    REQUIRE(fs.NewWritableFile(c, {}, &fc, nullptr).ok());
    REQUIRE(fc->Append("created after the directory sync", io, nullptr).ok());
    REQUIRE(fc->Sync(io, nullptr).ok());
    CHECK(fs.unsynced_bytes() == 9);

    fs.crash();
    CHECK(fa->Append("after crash", io, nullptr).ok());
    CHECK(fa->Sync(io, nullptr).ok());
    CHECK(fs.RenameFile(b, a, io, nullptr).ok());
    CHECK(fs.DeleteFile(b, io, nullptr).ok());
    std::unique_ptr<rocksdb::FSWritableFile> fd;
    CHECK(fs.NewWritableFile((dir.path() / "d").string(), {}, &fd, nullptr).ok());
    CHECK(fd->Append("x", io, nullptr).ok());
    for (auto* f : {fa.get(), fb.get(), fc.get(), fd.get()}) CHECK(f->Close(io, nullptr).ok());
    fa.reset(), fb.reset(), fc.reset(), fd.reset();
    CHECK(std::filesystem::file_size(a) == 15);  // the crash changed nothing
    CHECK(std::filesystem::exists(b));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "d"));

    auto stats = fs.drop_unsynced();
    CHECK(stats.files_truncated == 1);
    CHECK(stats.bytes_dropped == 9);
    CHECK(stats.files_deleted == 1);
    std::ifstream in(a);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(content == "synced");
    CHECK(std::filesystem::file_size(b) == 12);
    CHECK_FALSE(std::filesystem::exists(c));
}
