#include "client/msgpack_check.h"

#include <cstdint>

namespace dueq::client {
namespace {

class Checker {
public:
    Checker(std::string_view bytes, const MsgpackLimits& limits)
        : p_(reinterpret_cast<const uint8_t*>(bytes.data())), n_(bytes.size()), limits_(limits) {}

    std::size_t pos() const { return pos_; }

    // Returns an empty string on success, else what went wrong.
    const char* value(std::size_t depth) {
        if (depth > limits_.max_depth) return "nesting too deep";
        if (pos_ >= n_) return "truncated value";
        const uint8_t b = p_[pos_++];
        if (b <= 0x7f || b >= 0xe0) return nullptr;  // fixint
        if (b >= 0x80 && b <= 0x8f) return entries(b & 0x0f, 2, depth);
        if (b >= 0x90 && b <= 0x9f) return entries(b & 0x0f, 1, depth);
        if (b >= 0xa0 && b <= 0xbf) return skip(b & 0x1f);
        switch (b) {
            case 0xc0: case 0xc2: case 0xc3: return nullptr;
            case 0xc1: return "reserved byte 0xc1";
            case 0xc4: case 0xd9: return sized_blob(1, 0);
            case 0xc5: case 0xda: return sized_blob(2, 0);
            case 0xc6: case 0xdb: return sized_blob(4, 0);
            case 0xc7: return sized_blob(1, 1);
            case 0xc8: return sized_blob(2, 1);
            case 0xc9: return sized_blob(4, 1);
            case 0xca: return skip(4);
            case 0xcb: return skip(8);
            case 0xcc: case 0xd0: return skip(1);
            case 0xcd: case 0xd1: return skip(2);
            case 0xce: case 0xd2: return skip(4);
            case 0xcf: case 0xd3: return skip(8);
            case 0xd4: return skip(2);
            case 0xd5: return skip(3);
            case 0xd6: return skip(5);
            case 0xd7: return skip(9);
            case 0xd8: return skip(17);
            case 0xdc: return counted(2, 1, depth);
            case 0xdd: return counted(4, 1, depth);
            case 0xde: return counted(2, 2, depth);
            case 0xdf: return counted(4, 2, depth);
        }
        return "unknown type byte";  // unreachable: every byte value is covered above
    }

private:
    bool read_be(std::size_t width, uint64_t* out) {
        if (n_ - pos_ < width) return false;
        uint64_t v = 0;
        for (std::size_t i = 0; i < width; ++i) v = (v << 8) | p_[pos_ + i];
        pos_ += width;
        *out = v;
        return true;
    }
    const char* skip(uint64_t len) {
        if (n_ - pos_ < len) return "length exceeds the bytes that follow";
        pos_ += static_cast<std::size_t>(len);
        return nullptr;
    }
    // str/bin/ext: a big-endian length, an optional ext type byte, then the data.
    const char* sized_blob(std::size_t width, std::size_t type_bytes) {
        uint64_t len = 0;
        if (!read_be(width, &len)) return "truncated length";
        return skip(len + type_bytes);
    }
    const char* counted(std::size_t width, uint64_t per_entry, std::size_t depth) {
        uint64_t count = 0;
        if (!read_be(width, &count)) return "truncated length";
        return entries(count, per_entry, depth);
    }
    // Every element takes at least one byte, so a count larger than what is left is a lie.
    const char* entries(uint64_t count, uint64_t per_entry, std::size_t depth) {
        if (count > (n_ - pos_) / per_entry) return "count exceeds the bytes that follow";
        for (uint64_t i = 0; i < count * per_entry; ++i) {
            if (const char* err = value(depth + 1)) return err;
        }
        return nullptr;
    }

    const uint8_t* p_;
    std::size_t n_;
    std::size_t pos_ = 0;
    const MsgpackLimits& limits_;
};

}  // namespace

Status check_msgpack_value(std::string_view bytes, const MsgpackLimits& limits,
                           std::size_t* consumed) {
    Checker checker(bytes, limits);
    if (const char* err = checker.value(0)) {
        return Error(Code::bad_request, std::string("malformed msgpack: ") + err);
    }
    *consumed = checker.pos();
    return ok_status();
}

Status check_single_msgpack_value(std::string_view bytes, const MsgpackLimits& limits) {
    std::size_t consumed = 0;
    Status st = check_msgpack_value(bytes, limits, &consumed);
    if (!st.ok()) return st;
    if (consumed != bytes.size()) {
        return Error(Code::bad_request, "malformed msgpack: trailing bytes after the value");
    }
    return st;
}

}  // namespace dueq::client
