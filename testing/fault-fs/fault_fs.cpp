#include "testing/fault-fs/fault_fs.h"
#include "storage/prezeroed_wal.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <thread>

namespace dueq::test {

namespace fs = std::filesystem;
using rocksdb::FileOptions;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

namespace {

std::string normalize(const std::string& name) {
    fs::path p = fs::path(name).lexically_normal();
    if (!p.has_filename() && p.has_parent_path()) p = p.parent_path();  // "a/b/" -> "a/b"
    return p.string();
}

std::string parent_of(const std::string& normalized) {
    return fs::path(normalized).parent_path().string();
}

// What a file opened after the crash writes to: nothing.
class DiscardFile : public FSWritableFile {
public:
    IOStatus Append(const Slice&, const IOOptions&, IODebugContext*) override {
        return IOStatus::OK();
    }
    IOStatus PositionedAppend(const Slice&, std::uint64_t, const IOOptions&,
                              IODebugContext*) override {
        return IOStatus::OK();
    }
    IOStatus Close(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
    IOStatus Flush(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
    IOStatus Sync(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
};

}  // namespace

// A writable file whose appends and syncs are accounted in the owning FaultFileSystem.
// Each mutation holds the file system's mutex while it runs, so it is either wholly
// before the crash (and tracked) or wholly after (and skipped).
class FaultWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
public:
    FaultWritableFile(FaultFileSystem& owner, std::string name,
                      std::unique_ptr<FSWritableFile> target)
        : FSWritableFileOwnerWrapper(std::move(target)), owner_(owner), name_(std::move(name)) {}

    IOStatus Append(const Slice& data, const IOOptions& o, IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        auto s = target()->Append(data, o, dbg);
        if (s.ok()) appended_locked(data.size());
        return s;
    }
    IOStatus Append(const Slice& data, const IOOptions& o,
                    const rocksdb::DataVerificationInfo& info, IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        auto s = target()->Append(data, o, info, dbg);
        if (s.ok()) appended_locked(data.size());
        return s;
    }
    IOStatus PositionedAppend(const Slice& data, std::uint64_t offset, const IOOptions& o,
                              IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        auto s = target()->PositionedAppend(data, offset, o, dbg);
        if (s.ok()) owner_.on_append_locked(name_, offset + data.size());
        return s;
    }
    IOStatus PositionedAppend(const Slice& data, std::uint64_t offset, const IOOptions& o,
                              const rocksdb::DataVerificationInfo& info,
                              IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        auto s = target()->PositionedAppend(data, offset, o, info, dbg);
        if (s.ok()) owner_.on_append_locked(name_, offset + data.size());
        return s;
    }
    IOStatus Truncate(std::uint64_t size, const IOOptions& o, IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        auto s = target()->Truncate(size, o, dbg);
        if (s.ok()) owner_.on_truncate_locked(name_, size);
        return s;
    }
    IOStatus Close(const IOOptions& o, IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        // After the crash the target is closed by its destructor, which only trims
        // preallocated space beyond what was written before the crash.
        if (owner_.crashed_) return IOStatus::OK();
        return target()->Close(o, dbg);
    }
    IOStatus Flush(const IOOptions& o, IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        return target()->Flush(o, dbg);
    }
    IOStatus Sync(const IOOptions& o, IODebugContext* dbg) override {
        slow_disk();
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        auto s = target()->Sync(o, dbg);
        if (s.ok()) owner_.on_sync_locked(name_);
        return s;
    }
    IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
        slow_disk();
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        auto s = target()->Fsync(o, dbg);
        if (s.ok()) owner_.on_sync_locked(name_);
        return s;
    }
    // sync_file_range: no durability promise, so it marks nothing.
    IOStatus RangeSync(std::uint64_t offset, std::uint64_t nbytes, const IOOptions& o,
                       IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        return target()->RangeSync(offset, nbytes, o, dbg);
    }
    IOStatus Allocate(std::uint64_t offset, std::uint64_t len, const IOOptions& o,
                      IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        return target()->Allocate(offset, len, o, dbg);
    }
    void PrepareWrite(size_t offset, size_t len, const IOOptions& o, IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return;
        target()->PrepareWrite(offset, len, o, dbg);
    }

private:
    void slow_disk() const {
        if (const auto us = owner_.sync_delay_us_.load(); us > 0)
            std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
    void appended_locked(std::size_t n) {
        auto it = owner_.files_.find(name_);
        if (it != owner_.files_.end()) it->second.appended += n;
    }

    FaultFileSystem& owner_;
    std::string name_;  // normalized
};

// A directory whose fsync makes the names of the files in it durable.
class FaultDirectory : public rocksdb::FSDirectoryWrapper {
public:
    FaultDirectory(FaultFileSystem& owner, std::string name,
                   std::unique_ptr<rocksdb::FSDirectory> target)
        : FSDirectoryWrapper(std::move(target)), owner_(owner), name_(std::move(name)) {}

    IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        auto s = FSDirectoryWrapper::Fsync(o, dbg);
        if (s.ok()) owner_.on_dir_sync_locked(name_);
        return s;
    }
    IOStatus FsyncWithDirOptions(const IOOptions& o, IODebugContext* dbg,
                                 const rocksdb::DirFsyncOptions& d) override {
        std::lock_guard lock(owner_.mu_);
        if (owner_.crashed_) return IOStatus::OK();
        auto s = FSDirectoryWrapper::FsyncWithDirOptions(o, dbg, d);
        if (s.ok()) owner_.on_dir_sync_locked(name_);
        return s;
    }

private:
    FaultFileSystem& owner_;
    std::string name_;  // normalized
};

// Under the fault layer, the WAL is written as dueqd writes it: pre-zeroed.
FaultFileSystem::FaultFileSystem()
    : FileSystemWrapper(storage::prezeroed_wal_fs(rocksdb::FileSystem::Default())) {}

void FaultFileSystem::crash() {
    std::lock_guard lock(mu_);
    crashed_ = true;
}

bool FaultFileSystem::crashed() const {
    std::lock_guard lock(mu_);
    return crashed_;
}

FaultFileSystem::DropStats FaultFileSystem::drop_unsynced() {
    std::lock_guard lock(mu_);
    DropStats stats;
    for (const auto& [name, st] : files_) {
        std::error_code ec;
        if (!st.name_synced) {
            if (fs::remove(name, ec)) ++stats.files_deleted;
            continue;
        }
        const auto size = fs::file_size(name, ec);
        if (ec || size <= st.synced) continue;
        fs::resize_file(name, st.synced, ec);
        if (!ec) {
            ++stats.files_truncated;
            stats.bytes_dropped += size - st.synced;
        }
    }
    files_.clear();
    return stats;
}

void FaultFileSystem::reset() {
    std::lock_guard lock(mu_);
    crashed_ = false;
    files_.clear();
}

std::uint64_t FaultFileSystem::unsynced_bytes() const {
    std::lock_guard lock(mu_);
    std::uint64_t n = 0;
    for (const auto& [name, st] : files_) n += st.appended - std::min(st.appended, st.synced);
    return n;
}

void FaultFileSystem::on_append_locked(const std::string& fname, std::uint64_t end) {
    auto it = files_.find(fname);
    if (it != files_.end()) it->second.appended = std::max(it->second.appended, end);
}

void FaultFileSystem::on_sync_locked(const std::string& fname) {
    auto it = files_.find(fname);
    if (it != files_.end()) it->second.synced = it->second.appended;
}

void FaultFileSystem::on_truncate_locked(const std::string& fname, std::uint64_t size) {
    auto it = files_.find(fname);
    if (it == files_.end()) return;
    it->second.appended = size;
    it->second.synced = std::min(it->second.synced, size);
}

void FaultFileSystem::on_dir_sync_locked(const std::string& dir) {
    for (auto& [name, st] : files_)
        if (parent_of(name) == dir) st.name_synced = true;
}

IOStatus FaultFileSystem::open_tracked(
    const std::string& fname, bool keep_contents, std::unique_ptr<FSWritableFile>* result,
    const std::function<IOStatus(std::unique_ptr<FSWritableFile>*)>& open) {
    const std::string name = normalize(fname);
    std::lock_guard lock(mu_);
    if (crashed_) {
        *result = std::make_unique<DiscardFile>();
        return IOStatus::OK();
    }
    std::unique_ptr<FSWritableFile> file;
    auto s = open(&file);
    if (!s.ok()) return s;
    if (keep_contents) {
        // Reopened for appending: what is there already counts as durable unless we
        // saw it being written.
        if (!files_.count(name)) {
            std::error_code ec;
            const auto size = fs::file_size(name, ec);
            files_[name] = FileState{ec ? 0 : size, ec ? 0 : size, true};
        }
    } else {
        files_[name] = FileState{};
    }
    *result = std::make_unique<FaultWritableFile>(*this, name, std::move(file));
    return IOStatus::OK();
}

IOStatus FaultFileSystem::NewWritableFile(const std::string& fname, const FileOptions& opts,
                                          std::unique_ptr<FSWritableFile>* result,
                                          IODebugContext* dbg) {
    return open_tracked(fname, false, result, [&](std::unique_ptr<FSWritableFile>* f) {
        return target()->NewWritableFile(fname, opts, f, dbg);
    });
}

IOStatus FaultFileSystem::ReopenWritableFile(const std::string& fname, const FileOptions& opts,
                                             std::unique_ptr<FSWritableFile>* result,
                                             IODebugContext* dbg) {
    return open_tracked(fname, true, result, [&](std::unique_ptr<FSWritableFile>* f) {
        return target()->ReopenWritableFile(fname, opts, f, dbg);
    });
}

IOStatus FaultFileSystem::ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                            const FileOptions& opts,
                                            std::unique_ptr<FSWritableFile>* result,
                                            IODebugContext* dbg) {
    // A recycled log: renamed from old_fname and rewritten from the start, so it is
    // tracked as a new file.
    return open_tracked(fname, false, result, [&](std::unique_ptr<FSWritableFile>* f) {
        auto s = target()->ReuseWritableFile(fname, old_fname, opts, f, dbg);
        if (s.ok()) files_.erase(normalize(old_fname));
        return s;
    });
}

IOStatus FaultFileSystem::NewRandomRWFile(const std::string&, const FileOptions&,
                                          std::unique_ptr<rocksdb::FSRandomRWFile>*,
                                          IODebugContext*) {
    return IOStatus::NotSupported("FaultFileSystem: random read-write files are not tracked");
}

IOStatus FaultFileSystem::NewDirectory(const std::string& name, const IOOptions& io_opts,
                                       std::unique_ptr<rocksdb::FSDirectory>* result,
                                       IODebugContext* dbg) {
    std::unique_ptr<rocksdb::FSDirectory> dir;
    auto s = target()->NewDirectory(name, io_opts, &dir, dbg);
    if (!s.ok()) return s;
    *result = std::make_unique<FaultDirectory>(*this, normalize(name), std::move(dir));
    return s;
}

IOStatus FaultFileSystem::DeleteFile(const std::string& fname, const IOOptions& options,
                                     IODebugContext* dbg) {
    std::lock_guard lock(mu_);
    if (crashed_) return IOStatus::OK();
    auto s = target()->DeleteFile(fname, options, dbg);
    if (s.ok()) files_.erase(normalize(fname));
    return s;
}

IOStatus FaultFileSystem::Truncate(const std::string& fname, size_t size, const IOOptions& options,
                                   IODebugContext* dbg) {
    std::lock_guard lock(mu_);
    if (crashed_) return IOStatus::OK();
    auto s = target()->Truncate(fname, size, options, dbg);
    if (s.ok()) on_truncate_locked(normalize(fname), size);
    return s;
}

IOStatus FaultFileSystem::RenameFile(const std::string& src, const std::string& dst,
                                     const IOOptions& options, IODebugContext* dbg) {
    std::lock_guard lock(mu_);
    if (crashed_) return IOStatus::OK();
    auto s = target()->RenameFile(src, dst, options, dbg);
    if (!s.ok()) return s;
    const std::string from = normalize(src), to = normalize(dst);
    auto it = files_.find(from);
    if (it == files_.end()) {
        files_.erase(to);  // an untracked file now holds that name
        return s;
    }
    FileState st = it->second;
    st.name_synced = false;  // the new name needs a directory fsync
    files_.erase(it);
    files_[to] = st;
    return s;
}

IOStatus FaultFileSystem::LinkFile(const std::string& src, const std::string& dst,
                                   const IOOptions& options, IODebugContext* dbg) {
    std::lock_guard lock(mu_);
    if (crashed_) return IOStatus::OK();
    auto s = target()->LinkFile(src, dst, options, dbg);
    if (!s.ok()) return s;
    auto it = files_.find(normalize(src));
    if (it != files_.end()) {
        FileState st = it->second;
        st.name_synced = false;
        files_[normalize(dst)] = st;
    }
    return s;
}

IOStatus FaultFileSystem::CreateDir(const std::string& dirname, const IOOptions& options,
                                    IODebugContext* dbg) {
    std::lock_guard lock(mu_);
    if (crashed_) return IOStatus::OK();
    return target()->CreateDir(dirname, options, dbg);
}

IOStatus FaultFileSystem::CreateDirIfMissing(const std::string& dirname, const IOOptions& options,
                                             IODebugContext* dbg) {
    std::lock_guard lock(mu_);
    if (crashed_) return IOStatus::OK();
    return target()->CreateDirIfMissing(dirname, options, dbg);
}

IOStatus FaultFileSystem::DeleteDir(const std::string& dirname, const IOOptions& options,
                                    IODebugContext* dbg) {
    std::lock_guard lock(mu_);
    if (crashed_) return IOStatus::OK();
    return target()->DeleteDir(dirname, options, dbg);
}

FaultEnv make_fault_env() {
    FaultEnv e;
    e.fs = std::make_shared<FaultFileSystem>();
    e.env = rocksdb::NewCompositeEnv(e.fs);
    return e;
}

}  // namespace dueq::test
