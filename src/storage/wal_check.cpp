#include "storage/wal_check.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "storage/crc32c.h"
#include "storage/prezeroed_wal.h"

namespace dueq::storage {

namespace {

// RocksDB's log format (db/log_format.h): 32 KiB blocks; each record is a header
// (masked CRC-32C, 2-byte length, type) then its payload, and never crosses a block. A
// block's last few bytes, too short for a header, are zeros.
constexpr std::size_t kBlock = 32768;
constexpr std::size_t kHeader = 7;
constexpr std::size_t kRecyclableHeader = 11;  // + the log number
constexpr std::size_t kSector = 512;

bool recyclable(std::uint8_t type) {
    return (type >= 5 && type <= 8) || type == 11 || type == 34;
}

std::uint32_t unmask(std::uint32_t masked) {
    const std::uint32_t rot = masked - 0xa282ead8u;
    return (rot >> 17) | (rot << 15);
}

std::uint32_t get_le32(const unsigned char* p) {
    return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
           std::uint32_t(p[3]) << 24;
}

bool all_zero(const unsigned char* p, std::size_t n) {
    return std::all_of(p, p + n, [](unsigned char c) { return c == 0; });
}

// The CRC covers the type, the log number of a recyclable record, and the payload.
bool whole(const unsigned char* rec, std::size_t header, std::size_t length) {
    std::uint32_t crc = crc32c(rec + 6, 1);
    if (header == kRecyclableHeader) crc = crc32c_extend(crc, rec + 7, 4);
    crc = crc32c_extend(crc, rec + header, length);
    return crc == unmask(get_le32(rec));
}

std::vector<std::pair<std::uint64_t, std::filesystem::path>> wal_files(const std::string& dir) {
    std::vector<std::pair<std::uint64_t, std::filesystem::path>> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        if (!is_wal_file_name(e.path().string())) continue;
        const std::string name = e.path().filename().string();
        const std::string digits = name.substr(0, name.size() - 4);
        files.emplace_back(std::stoull(digits), e.path());
    }
    std::sort(files.begin(), files.end());
    return files;
}

// A stretch that began with a record whose checksum failed, until the next whole record.
struct BadStretch {
    std::string file;
    std::uint64_t offset = 0;
    bool lost_write = false;  // zeros or a file end seen in it: a torn or unsynced write
};

class Scanner {
  public:
    // Returns the damaged stretch if `block` (at `base` in `file`) ends one with a whole
    // record.
    std::optional<BadStretch> scan(const std::string& file, std::uint64_t base,
                                   const unsigned char* block, std::size_t n) {
        std::size_t pos = 0;
        while (pos < n) {
            if (n - pos < kHeader) {
                skipped(block, pos, n);
                return std::nullopt;
            }
            const unsigned char* rec = block + pos;
            if (all_zero(rec, kHeader)) {
                // Preallocated space: nothing was written past here in this block.
                if (bad_) bad_->lost_write = true;
                return std::nullopt;
            }
            const std::size_t header = recyclable(rec[6]) ? kRecyclableHeader : kHeader;
            const std::size_t length = std::size_t(rec[4]) | std::size_t(rec[5]) << 8;
            if (pos + header > n || pos + header + length > n || !whole(rec, header, length)) {
                // Its length cannot be trusted: the next record to read starts a block.
                if (!bad_) bad_ = BadStretch{file, base + pos, false};
                skipped(block, pos, n);
                return std::nullopt;
            }
            if (bad_ && !bad_->lost_write) return std::exchange(bad_, std::nullopt);
            bad_.reset();
            pos += header + length;
        }
        return std::nullopt;
    }

    // The file ended: whatever was bad at its end was cut short, not flipped.
    void file_ended() {
        if (bad_) bad_->lost_write = true;
    }

  private:
    // Looks for a whole zero sector in what the scan skipped, [from, to) of the block.
    void skipped(const unsigned char* block, std::size_t from, std::size_t to) {
        if (!bad_) return;
        for (std::size_t s = (from + kSector - 1) / kSector * kSector; s + kSector <= to;
             s += kSector)
            if (all_zero(block + s, kSector)) {
                bad_->lost_write = true;
                return;
            }
    }

    std::optional<BadStretch> bad_;
};

}  // namespace

Status check_wal(const std::string& dir) {
    Scanner scanner;
    std::vector<unsigned char> block(kBlock);
    for (const auto& [number, path] : wal_files(dir)) {
        std::ifstream in(path, std::ios::binary);
        if (!in) return Status::error("cannot read WAL file " + path.string());
        for (std::uint64_t base = 0;; base += kBlock) {
            in.read(reinterpret_cast<char*>(block.data()), std::streamsize(kBlock));
            const auto got = std::size_t(in.gcount());
            if (got == 0) break;
            if (auto bad = scanner.scan(path.string(), base, block.data(), got))
                return Status::error("Corruption: WAL file " + bad->file + " is damaged at byte " +
                                     std::to_string(bad->offset) +
                                     ": a record there fails its checksum and whole records "
                                     "follow it, so acknowledged writes would be dropped");
            if (got < kBlock) break;
        }
        if (in.bad()) return Status::error("cannot read WAL file " + path.string());
        scanner.file_ended();
    }
    return Status{};
}

}  // namespace dueq::storage
