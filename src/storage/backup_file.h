// The file `dueqctl backup` writes and `dueqd --restore` reads (docs/operations.md,
// "Backing up"). All integers are big-endian:
//
//   magic      "DUEQBKP1"
//   header     be32 n, n bytes, be32 CRC-32C of those n bytes; the n bytes are be64 index,
//              be64 term, be64 time (the applied entry's log time), be64 created (ms since
//              the epoch), then three strings as be16 length + bytes: the cluster id, the
//              node the backup was taken from, and that node's build.
//   chunks     be32 n (n > 0), n bytes, be32 CRC-32C of those n bytes. The first chunk is
//              the sealed store-wide record; the others hold (key, sealed task) pairs
//              (storage/pairs.h), as the node's checkpoint gave them.
//   end        be32 0, be64 tasks, be64 bytes of chunk data, be32 CRC-32C of every byte of
//              the file before this one.
//
// So a truncated, reordered or damaged file is refused before anything is restored from
// it, besides the CRC every sealed record carries.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace dueq::storage {

struct BackupHeader {
    std::uint64_t index = 0, term = 0;
    std::int64_t time = 0;        // log time of the entry at `index`
    std::int64_t created_ms = 0;  // when the backup was taken
    std::string cluster, node, version;
    bool operator==(const BackupHeader&) const = default;
};

inline constexpr std::string_view kBackupMagic = "DUEQBKP1";
// The largest chunk a reader accepts: a node sends about 1 MiB and at most one record
// beyond that, so this is room for the largest record with margin.
inline constexpr std::uint32_t kMaxBackupChunkBytes = std::uint32_t(1) << 30;

// Writes to `path` + ".partial", renamed to `path` (after an fsync) by finish(), so that
// `path` is never a partial backup. Every call returns false and sets error() on failure.
class BackupFileWriter {
  public:
    BackupFileWriter() = default;
    ~BackupFileWriter();
    BackupFileWriter(const BackupFileWriter&) = delete;
    BackupFileWriter& operator=(const BackupFileWriter&) = delete;

    bool open(const std::string& path, const BackupHeader& header);
    // Chunk 0 is the store-wide record; the others are counted as pairs (false if one is
    // malformed).
    bool chunk(std::string_view data);
    bool finish();
    // Removes the partial file (a backup that failed half way).
    void abandon();

    std::uint64_t tasks() const { return tasks_; }
    std::uint64_t bytes() const { return bytes_written_; }
    const std::string& error() const { return error_; }

  private:
    bool write(std::string_view bytes);
    std::FILE* file_ = nullptr;
    std::string path_, partial_, error_;
    std::uint32_t crc_ = 0;
    std::uint64_t chunks_ = 0, tasks_ = 0, data_bytes_ = 0, bytes_written_ = 0;
};

// Reads a backup file, checking every CRC as it goes; finish() checks the end record.
class BackupFileReader {
  public:
    BackupFileReader() = default;
    ~BackupFileReader();
    BackupFileReader(const BackupFileReader&) = delete;
    BackupFileReader& operator=(const BackupFileReader&) = delete;

    bool open(const std::string& path);
    const BackupHeader& header() const { return header_; }
    // The next chunk into `out`; false at the end record (then done() is true) or on an
    // error (error() says which).
    bool next(std::string& out);
    bool done() const { return done_; }
    // The end record's task count (after done()).
    std::uint64_t tasks() const { return tasks_; }
    std::uint64_t file_bytes() const { return file_bytes_; }
    std::uint64_t read_bytes() const { return read_; }
    const std::string& error() const { return error_; }

  private:
    bool read(std::size_t n, std::string& out);
    bool fail(std::string why);
    std::FILE* file_ = nullptr;
    std::string path_, error_;
    BackupHeader header_;
    std::uint32_t crc_ = 0;
    std::uint64_t data_bytes_ = 0, tasks_ = 0, file_bytes_ = 0, read_ = 0;
    bool done_ = false;
};

}  // namespace dueq::storage
