// A RocksDB file system for tests that can simulate a power cut: what was written but
// never synced is lost.
//
// FaultFileSystem wraps the pre-zeroed WAL layer (prezeroed_wal.h) over
// FileSystem::Default(), as dueqd writes its files. For every file it creates (or reopens
// for writing) it tracks, by name, how many bytes were appended and how many of them a
// completed Sync/Fsync made durable, and whether a directory fsync made the file's
// name durable. Two calls then play the power cut:
//
//   crash()         the instant of the cut. From then on every mutation (append, sync,
//                   truncate, close, new file, rename, link, delete, mkdir) is a no-op
//                   that reports success, so whatever the code under test does while it
//                   shuts down (closing the DB, flushing a queue) changes nothing on
//                   disk, and nothing it does is mistaken for a failure.
//   drop_unsynced() after the code under test has closed every file: truncates each
//                   tracked file to its last synced size, and deletes each tracked file
//                   whose name no directory fsync has covered since it was created or
//                   renamed. What is left is what the disk held at the cut.
//
// Model, chosen to be at least as harsh as a real disk:
// - Only Sync/Fsync make data durable. RangeSync (sync_file_range) starts write-back
//   but promises nothing, so it does not count.
// - A file's name is durable only once FSDirectory::Fsync (or FsyncWithDirOptions)
//   ran on its parent directory after the file was created or renamed into place.
// - Deletes and renames done before the cut take effect at once (as in leveldb's
//   fault test); a rename moves the tracked state to the new name and needs a fresh
//   directory fsync. Files that existed before this file system saw them are not
//   tracked and never touched.
// - NewRandomRWFile is refused (NotSupported): in-place writes cannot be undone by
//   truncation, and the options dueq opens RocksDB with never need such files.
//
// Thread-safety: every method may be called from any thread. One mutex covers the
// tracking state and each tracked mutation, so crash() falls cleanly between two
// operations: an operation that returned before crash() began is on disk (subject to
// the sync rules above), one that starts after is not.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

namespace dueq::test {

class FaultFileSystem : public rocksdb::FileSystemWrapper {
public:
    FaultFileSystem();
    const char* Name() const override { return "DueqFaultFileSystem"; }

    // The power cut; see above. Idempotent.
    void crash();
    bool crashed() const;

    struct DropStats {
        std::uint64_t files_truncated = 0;
        std::uint64_t bytes_dropped = 0;  // by truncation
        std::uint64_t files_deleted = 0;
    };
    // Call after crash() and after every file of the DB is closed (the DB object is
    // destroyed). Forgets all tracking; the file system may be crashed again only after
    // reset().
    DropStats drop_unsynced();
    // Back to normal operation with nothing tracked (e.g. to reuse the object).
    void reset();

    // Bytes appended but not yet synced, over all tracked files (for tests of the
    // harness itself).
    std::uint64_t unsynced_bytes() const;

    // A slow disk: every Sync/Fsync of a file waits this long before it starts (outside
    // the lock, so a crash() may land in the wait and the sync then does nothing). It
    // widens the window in which a component that answered before its fsync finished
    // would be caught with the answered data still unsynced. Zero by default.
    void set_sync_delay(std::chrono::microseconds delay) { sync_delay_us_ = delay.count(); }

    // ---- rocksdb::FileSystem overrides (the tracked mutations) ----
    rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& opts,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus ReopenWritableFile(const std::string& fname, const rocksdb::FileOptions& opts,
                                         std::unique_ptr<rocksdb::FSWritableFile>* result,
                                         rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                        const rocksdb::FileOptions& opts,
                                        std::unique_ptr<rocksdb::FSWritableFile>* result,
                                        rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus NewRandomRWFile(const std::string& fname, const rocksdb::FileOptions& opts,
                                      std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& io_opts,
                                   std::unique_ptr<rocksdb::FSDirectory>* result,
                                   rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& options,
                                 rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus Truncate(const std::string& fname, size_t size,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target,
                                 const rocksdb::IOOptions& options,
                                 rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus LinkFile(const std::string& src, const std::string& target,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus CreateDir(const std::string& dirname, const rocksdb::IOOptions& options,
                                rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus CreateDirIfMissing(const std::string& dirname,
                                         const rocksdb::IOOptions& options,
                                         rocksdb::IODebugContext* dbg) override;
    rocksdb::IOStatus DeleteDir(const std::string& dirname, const rocksdb::IOOptions& options,
                                rocksdb::IODebugContext* dbg) override;

private:
    friend class FaultWritableFile;
    friend class FaultDirectory;

    struct FileState {
        std::uint64_t appended = 0;  // the file's size as written so far
        std::uint64_t synced = 0;    // prefix made durable by a completed Sync/Fsync
        bool name_synced = false;    // a directory fsync covered its name
    };

    // Called by the wrappers with mu_ held.
    void on_append_locked(const std::string& fname, std::uint64_t end);
    void on_sync_locked(const std::string& fname);
    void on_truncate_locked(const std::string& fname, std::uint64_t size);
    void on_dir_sync_locked(const std::string& dir);

    rocksdb::IOStatus open_tracked(const std::string& fname, bool keep_contents,
                                   std::unique_ptr<rocksdb::FSWritableFile>* result,
                                   const std::function<rocksdb::IOStatus(
                                       std::unique_ptr<rocksdb::FSWritableFile>*)>& open);

    std::atomic<std::int64_t> sync_delay_us_{0};
    mutable std::mutex mu_;  // guards crashed_ and files_, and serializes tracked mutations
    bool crashed_ = false;
    std::map<std::string, FileState> files_;  // by normalized path
};

// A FaultFileSystem and the Env built on it (rocksdb::NewCompositeEnv), for
// Database::open(path, sync, status, env.get()). The env must outlive the DB.
struct FaultEnv {
    std::shared_ptr<FaultFileSystem> fs;
    std::unique_ptr<rocksdb::Env> env;
    rocksdb::Env* get() const { return env.get(); }
};
FaultEnv make_fault_env();

}  // namespace dueq::test
