#include "storage/backup_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "storage/crc32c.h"
#include "storage/pairs.h"

namespace dueq::storage {

namespace {

void put_be(std::string& out, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i)
        out.push_back(char(v >> (8 * i)));
}

std::uint64_t get_be(std::string_view& in, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
        v = (v << 8) | static_cast<unsigned char>(in[std::size_t(i)]);
    in.remove_prefix(std::size_t(bytes));
    return v;
}

std::string encode_header(const BackupHeader& h) {
    std::string out;
    put_be(out, h.index, 8);
    put_be(out, h.term, 8);
    put_be(out, std::uint64_t(h.time), 8);
    put_be(out, std::uint64_t(h.created_ms), 8);
    for (const std::string* s : {&h.cluster, &h.node, &h.version}) {
        const std::size_t n = std::min<std::size_t>(s->size(), 0xFFFF);
        put_be(out, n, 2);
        out.append(*s, 0, n);
    }
    return out;
}

std::optional<BackupHeader> decode_header(std::string_view in) {
    BackupHeader h;
    if (in.size() < 32) return std::nullopt;
    h.index = get_be(in, 8);
    h.term = get_be(in, 8);
    h.time = std::int64_t(get_be(in, 8));
    h.created_ms = std::int64_t(get_be(in, 8));
    for (std::string* s : {&h.cluster, &h.node, &h.version}) {
        if (in.size() < 2) return std::nullopt;
        const std::size_t n = get_be(in, 2);
        if (in.size() < n) return std::nullopt;
        s->assign(in.substr(0, n));
        in.remove_prefix(n);
    }
    if (!in.empty()) return std::nullopt;
    return h;
}

std::string errno_text() {
    return std::strerror(errno);
}

}  // namespace

// ---- writing

BackupFileWriter::~BackupFileWriter() {
    if (file_) abandon();
}

bool BackupFileWriter::write(std::string_view bytes) {
    if (!file_) return false;
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
        error_ = "writing " + partial_ + ": " + errno_text();
        return false;
    }
    crc_ = crc32c_extend(crc_, bytes.data(), bytes.size());
    bytes_written_ += bytes.size();
    return true;
}

bool BackupFileWriter::open(const std::string& path, const BackupHeader& header) {
    path_ = path;
    partial_ = path + ".partial";
    file_ = std::fopen(partial_.c_str(), "wb");
    if (!file_) {
        error_ = "cannot create " + partial_ + ": " + errno_text();
        return false;
    }
    const std::string body = encode_header(header);
    std::string out(kBackupMagic);
    put_be(out, body.size(), 4);
    out += body;
    put_be(out, crc32c(body.data(), body.size()), 4);
    return write(out);
}

bool BackupFileWriter::chunk(std::string_view data) {
    if (data.empty() || data.size() > kMaxBackupChunkBytes) {
        error_ = "a chunk of " + std::to_string(data.size()) + " bytes cannot be written";
        return false;
    }
    if (chunks_ > 0) {
        std::uint64_t n = 0;
        if (!for_each_pair(data, [&](std::string_view, std::string_view) { ++n; })) {
            error_ = "chunk " + std::to_string(chunks_) + " holds malformed records";
            return false;
        }
        tasks_ += n;
    }
    std::string frame;
    put_be(frame, data.size(), 4);
    if (!write(frame) || !write(data)) return false;
    frame.clear();
    put_be(frame, crc32c(data.data(), data.size()), 4);
    ++chunks_;
    data_bytes_ += data.size();
    return write(frame);
}

bool BackupFileWriter::finish() {
    if (chunks_ == 0) {
        error_ = "no store-wide record was written";
        return false;
    }
    std::string end;
    put_be(end, 0, 4);
    put_be(end, tasks_, 8);
    put_be(end, data_bytes_, 8);
    if (!write(end)) return false;
    std::string crc;
    put_be(crc, crc_, 4);
    if (!write(crc)) return false;
    if (std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0) {
        error_ = "syncing " + partial_ + ": " + errno_text();
        return false;
    }
    std::fclose(file_);
    file_ = nullptr;
    std::error_code ec;
    std::filesystem::rename(partial_, path_, ec);
    if (ec) {
        error_ = "renaming " + partial_ + " to " + path_ + ": " + ec.message();
        return false;
    }
    return true;
}

void BackupFileWriter::abandon() {
    if (file_) std::fclose(file_);
    file_ = nullptr;
    if (!partial_.empty()) std::remove(partial_.c_str());
}

// ---- reading

BackupFileReader::~BackupFileReader() {
    if (file_) std::fclose(file_);
}

bool BackupFileReader::fail(std::string why) {
    error_ = path_ + ": " + std::move(why);
    return false;
}

bool BackupFileReader::read(std::size_t n, std::string& out) {
    out.resize(n);
    if (n > 0 && std::fread(out.data(), 1, n, file_) != n)
        return fail(std::ferror(file_) ? "read error: " + errno_text()
                                       : "ends early: the file is truncated");
    crc_ = crc32c_extend(crc_, out.data(), n);
    read_ += n;
    return true;
}

bool BackupFileReader::open(const std::string& path) {
    path_ = path;
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) return fail("cannot open: " + errno_text());
    std::error_code ec;
    file_bytes_ = std::filesystem::file_size(path, ec);
    std::string magic, len, body, crc;
    if (!read(kBackupMagic.size(), magic)) return false;
    if (magic != kBackupMagic) return fail("not a dueq backup (no DUEQBKP1 at its start)");
    if (!read(4, len)) return false;
    std::string_view l(len);
    const std::size_t n = get_be(l, 4);
    if (n > 4 * 0x10000 + 64) return fail("its header is malformed");
    if (!read(n, body) || !read(4, crc)) return false;
    std::string_view c(crc);
    if (get_be(c, 4) != crc32c(body.data(), body.size()))
        return fail("its header is damaged (checksum mismatch)");
    auto h = decode_header(body);
    if (!h) return fail("its header is malformed");
    header_ = std::move(*h);
    return true;
}

bool BackupFileReader::next(std::string& out) {
    if (done_ || !file_) return false;
    std::string len, crc;
    if (!read(4, len)) return false;
    std::string_view l(len);
    const std::uint64_t n = get_be(l, 4);
    if (n == 0) {
        std::string end, whole;
        if (!read(16, end)) return false;
        const std::uint32_t expect = crc_;
        if (!read(4, whole)) return false;
        std::string_view e(end), w(whole);
        tasks_ = get_be(e, 8);
        if (get_be(e, 8) != data_bytes_) return fail("its end record does not match its chunks");
        if (get_be(w, 4) != expect) return fail("damaged (the whole-file checksum does not match)");
        if (std::fgetc(file_) != EOF) return fail("has bytes after its end record");
        done_ = true;
        return false;
    }
    if (n > kMaxBackupChunkBytes) return fail("a chunk's length is malformed");
    if (!read(std::size_t(n), out) || !read(4, crc)) return false;
    std::string_view c(crc);
    if (get_be(c, 4) != crc32c(out.data(), out.size()))
        return fail("a chunk at byte " + std::to_string(read_ - n - 8) +
                    " is damaged (checksum mismatch)");
    data_bytes_ += n;
    return true;
}

}  // namespace dueq::storage
