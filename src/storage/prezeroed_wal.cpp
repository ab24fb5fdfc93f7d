#include "storage/prezeroed_wal.h"

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

namespace dueq::storage {

using rocksdb::FileOptions;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

namespace {

IOStatus io_error(const std::string& what, const std::string& name, int err) {
    return IOStatus::IOError(what + " " + name, std::strerror(err));
}

// Writes all of [data, data + n) at `offset`.
IOStatus write_at(int fd, const char* data, std::uint64_t n, std::uint64_t offset,
                  const std::string& name) {
    while (n > 0) {
        const ssize_t w = ::pwrite(fd, data, n, off_t(offset));
        if (w < 0) {
            if (errno == EINTR) continue;
            return io_error("pwrite", name, errno);
        }
        data += w;
        n -= std::uint64_t(w);
        offset += std::uint64_t(w);
    }
    return IOStatus::OK();
}

class PrezeroedFile : public FSWritableFile {
  public:
    PrezeroedFile(std::string name, int fd, const FileOptions& opts)
        : FSWritableFile(opts), name_(std::move(name)), fd_(fd) {}
    // Without Close (a crash of the process that owns it, as far as the file goes): the
    // zero tail stays, as it would after SIGKILL.
    ~PrezeroedFile() override {
        if (fd_ >= 0) ::close(fd_);
    }

    using FSWritableFile::Append;
    IOStatus Append(const Slice& data, const IOOptions&, IODebugContext*) override {
        // One chunk ahead, so that the zeros are on disk before the log reaches them.
        if (size_ + data.size() + kZeroChunk > zeroed_) {
            if (auto s = zero_through(size_ + data.size() + kZeroChunk); !s.ok()) return s;
        }
        if (auto s = write_at(fd_, data.data(), data.size(), size_, name_); !s.ok()) return s;
        size_ += data.size();
        return IOStatus::OK();
    }

    IOStatus Truncate(std::uint64_t size, const IOOptions&, IODebugContext*) override {
        if (::ftruncate(fd_, off_t(size)) != 0) return io_error("ftruncate", name_, errno);
        size_ = size;
        zeroed_ = size;
        return IOStatus::OK();
    }

    IOStatus Close(const IOOptions&, IODebugContext*) override {
        if (fd_ < 0) return IOStatus::OK();
        // The tail is only dropped to leave the file as RocksDB wrote it; its
        // durability does not matter (a zero tail is read as the end of the log).
        IOStatus s;
        if (::ftruncate(fd_, off_t(size_)) != 0) s = io_error("ftruncate", name_, errno);
        if (::close(fd_) != 0 && s.ok()) s = io_error("close", name_, errno);
        fd_ = -1;
        return s;
    }

    // Appends go straight to the kernel: nothing is buffered here.
    IOStatus Flush(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }

    IOStatus Sync(const IOOptions&, IODebugContext*) override {
        if (::fdatasync(fd_) != 0) return io_error("fdatasync", name_, errno);
        return IOStatus::OK();
    }
    IOStatus Fsync(const IOOptions&, IODebugContext*) override {
        if (::fsync(fd_) != 0) return io_error("fsync", name_, errno);
        return IOStatus::OK();
    }
    bool IsSyncThreadSafe() const override { return true; }

    std::uint64_t GetFileSize(const IOOptions&, IODebugContext*) override { return size_; }

    // The zeroed chunks are this file's preallocation.
    IOStatus Allocate(std::uint64_t, std::uint64_t, const IOOptions&, IODebugContext*) override {
        return IOStatus::OK();
    }

  private:
    IOStatus zero_through(std::uint64_t end) {
        static const std::string zeros(kZeroChunk, '\0');
        while (zeroed_ < end) {
            if (auto s = write_at(fd_, zeros.data(), zeros.size(), zeroed_, name_); !s.ok())
                return s;
            // Start the write-back now, not in the next sync, whose caller waits for it.
            ::sync_file_range(fd_, off_t(zeroed_), off_t(zeros.size()), SYNC_FILE_RANGE_WRITE);
            zeroed_ += zeros.size();
        }
        return IOStatus::OK();
    }

    std::string name_;
    int fd_;
    std::uint64_t size_ = 0;    // appended
    std::uint64_t zeroed_ = 0;  // written with zeros (or data) up to here
};

class PrezeroedWalFileSystem : public rocksdb::FileSystemWrapper {
  public:
    explicit PrezeroedWalFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
        : FileSystemWrapper(std::move(base)) {}
    const char* Name() const override { return "DueqPrezeroedWalFileSystem"; }

    IOStatus NewWritableFile(const std::string& fname, const FileOptions& opts,
                             std::unique_ptr<FSWritableFile>* result,
                             IODebugContext* dbg) override {
        if (!is_wal_file_name(fname) || opts.use_direct_writes || opts.use_mmap_writes)
            return target()->NewWritableFile(fname, opts, result, dbg);
        int fd;
        do {
            fd = ::open(fname.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) return io_error("open", fname, errno);
        *result = std::make_unique<PrezeroedFile>(fname, fd, opts);
        return IOStatus::OK();
    }
};

}  // namespace

bool is_wal_file_name(const std::string& path) {
    const auto slash = path.find_last_of('/');
    const std::string_view base =
        std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1);
    if (base.size() <= 4 || base.substr(base.size() - 4) != ".log") return false;
    for (char c : base.substr(0, base.size() - 4))
        if (c < '0' || c > '9') return false;
    return true;
}

std::shared_ptr<rocksdb::FileSystem> prezeroed_wal_fs(std::shared_ptr<rocksdb::FileSystem> base) {
    return std::make_shared<PrezeroedWalFileSystem>(std::move(base));
}

}  // namespace dueq::storage
