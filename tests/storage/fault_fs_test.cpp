// The power-cut harness (fault_fs.h) against storage::Database: log writes, hard states
// and installs made with sync survive a crash that drops every unsynced byte; what was
// written without sync does not, which shows the harness really drops data.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "testing/fault-fs/fault_fs.h"
#include "storage/storage_support.h"

using namespace dueq;
using namespace dueq::test;

namespace {

struct AfterBoot {
    storage::Loaded loaded;
    std::size_t tasks = 0;
    raft::Index last_index() const { return loaded.base.index + loaded.entries.size(); }
};

AfterBoot reopen_and_load(const std::string& path) {
    AfterBoot out;
    queue::Store store;
    out.loaded = load_ok(path, store);  // the default environment: a fresh boot
    out.tasks = store.task_count();
    return out;
}

raft::HardState hard_state_at(std::uint64_t i) {
    return raft::HardState{term_of(i), 1 + i % 3, i == 0 ? 0 : i - 1};
}

// Writes log 1..n one synced write at a time (as a busy node would), each with a hard
// state, with an applied state that asks to trim the log after every tenth entry, then
// crashes and writes more. The applied state is flushed to files once, after entry
// `flushed_at`; only trims up to it are done.
void write_then_crash(const std::string& path, FaultEnv& env, bool sync, std::uint64_t n,
                      std::uint64_t flushed_at) {
    auto db = open_db(path, sync, env.get());
    queue::Store store;
    std::uint64_t applied = 0;
    for (std::uint64_t i = 1; i <= n; ++i) {
        storage::LogWrite w = log_write(i, i);
        w.hard_state = hard_state_at(i);
        REQUIRE(db->write({w}, {}).ok);
        if (i % 10 == 5) {
            storage::AppliedState a = apply_records(store, applied + 1, i);
            a.trim = meta_of(i - 3);
            REQUIRE(db->write({}, {a}).ok);
            applied = i;
        }
        if (i == flushed_at) REQUIRE(db->flush().ok);
    }
    // Applied states are not in the WAL and commit moves are never synced on their own:
    // these are lost.
    REQUIRE(db->write({}, {apply_records(store, applied + 1, n)}).ok);
    storage::LogWrite commit;
    commit.hard_state = raft::HardState{term_of(n), 1, n};
    commit.sync = false;
    REQUIRE(db->write({commit}, {}).ok);
    env.fs->crash();
    // After the cut nothing reaches the disk, but nothing fails either.
    for (std::uint64_t i = n + 1; i <= n + 20; ++i) REQUIRE(db->write({log_write(i, i)}, {}).ok);
    REQUIRE(db->install(storage::SnapshotInstall{meta_of(n + 20), {}, {}, ""}).ok);
    db.reset();  // closes the DB: no effect on disk
}

}  // namespace

TEST_CASE("power cut with sync: every log write and hard state whose write returned is there") {
    TempDir dir("fault-sync");
    auto env = make_fault_env();
    constexpr std::uint64_t n = 200;
    constexpr std::uint64_t flushed_at = 105;  // an applied state was written at 105
    write_then_crash(dir.str(), env, true, n, flushed_at);
    auto dropped = env.fs->drop_unsynced();
    INFO("dropped " << dropped.bytes_dropped << " bytes in " << dropped.files_truncated
                    << " files, deleted " << dropped.files_deleted << " files");
    CHECK(dropped.bytes_dropped > 0);

    const auto got = reopen_and_load(dir.str());
    CHECK(got.last_index() == n);  // all synced entries, none written after the cut
    CHECK(got.loaded.hard_state == hard_state_at(n));  // the unsynced commit move is lost
    // The applied state after the flush was lost ...
    CHECK(got.loaded.applied_index == flushed_at);
    CHECK(got.tasks == flushed_at);
    // ... and the log was trimmed only up to the flushed one (the trim asked for with it),
    CHECK(got.loaded.base == meta_of(flushed_at - 3));
    // so that it still has everything after, exactly: a restart replays it.
    CHECK(got.loaded.entries == entries(flushed_at - 2, n));
}

TEST_CASE("power cut without sync: unsynced log writes are lost (the harness drops data)") {
    TempDir dir("fault-nosync");
    auto env = make_fault_env();
    constexpr std::uint64_t n = 200;
    {
        auto db = open_db(dir.str(), false, env.get());
        CHECK_FALSE(db->syncs());
        for (std::uint64_t i = 1; i <= n; ++i) REQUIRE(db->write({log_write(i, i)}, {}).ok);
        CHECK(env.fs->unsynced_bytes() > 0);
        env.fs->crash();
    }
    auto dropped = env.fs->drop_unsynced();
    CHECK(dropped.bytes_dropped + dropped.files_deleted > 0);

    const auto got = reopen_and_load(dir.str());
    INFO(got.last_index() << " of " << n << " entries survived");
    CHECK(got.last_index() < n);
    CHECK(got.loaded.entries == entries(1, got.last_index()));  // a prefix, never a gap
}

TEST_CASE("power cut after a reopen that moved the log into table files") {
    // The reopen replays RocksDB's WAL into an SST, writes a new MANIFEST and WAL and
    // syncs directories, all through the fault file system: none of that may be lost.
    TempDir dir("fault-reopen");
    auto env = make_fault_env();
    {
        auto db = open_db(dir.str(), true, env.get());
        REQUIRE(db->write({log_write(1, 50)}, {}).ok);
    }
    {
        auto db = open_db(dir.str(), true, env.get());
        // The reopened database still knows its log's end: this replaces 41..50.
        REQUIRE(db->write({log_write(41, 45, 30)}, {}).ok);
        for (std::uint64_t i = 46; i <= 100; ++i) REQUIRE(db->write({log_write(i, i)}, {}).ok);
        env.fs->crash();
    }
    env.fs->drop_unsynced();
    const auto got = reopen_and_load(dir.str());
    std::vector<raft::Entry> want = entries(1, 40);
    for (const auto& e : entries(41, 45, 30)) want.push_back(e);
    for (const auto& e : entries(46, 100)) want.push_back(e);
    CHECK(got.loaded.entries == want);
}

TEST_CASE("power cut after an install: the snapshot is there, nothing of the old state") {
    TempDir dir("fault-install");
    auto env = make_fault_env();
    queue::Store source;
    apply_records(source, 1, 30);
    storage::SnapshotInstall snap;
    snap.meta = meta_of(30);
    snap.hard_state = {term_of(30), 2, 30};
    for (const auto& [qk, encoded] : contents(source).tasks) {
        const std::string key = storage::task_key(qk.first, qk.second);
        snap.tasks.emplace_back(key, storage::seal(encoded, key));
    }
    snap.store_meta_sealed = storage::seal_store_meta(source.encode_meta());
    {
        auto db = open_db(dir.str(), true, env.get());
        queue::Store old;
        REQUIRE(db->write({log_write(1, 40, 1)}, {apply_records(old, 1, 35)}).ok);
        REQUIRE(db->install(snap).ok);
        env.fs->crash();
    }
    env.fs->drop_unsynced();
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.base == meta_of(30));
    CHECK(got.entries.empty());
    CHECK(got.applied_index == 30);
    CHECK(got.hard_state == snap.hard_state);
    CHECK(contents(store) == contents(source));
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
