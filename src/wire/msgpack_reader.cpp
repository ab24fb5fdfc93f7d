#include "wire/msgpack_reader.h"

#include <cstring>

namespace dueq::wire {
namespace {

std::uint64_t be(const unsigned char* p, int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i)
        v = (v << 8) | p[i];
    return v;
}

// What a header says: its type, how many bytes the header takes, and either the
// number of raw bytes that follow (str/bin/ext/scalars) or the number of child values
// (arrays; maps count keys and values both).
struct Header {
    MsgType type = MsgType::nil;
    std::size_t header_len = 0;
    std::uint64_t raw_len = 0;
    std::uint64_t children = 0;
};

// Returns false if the header itself is cut short or uses the never-used byte 0xc1.
bool read_header(std::string_view b, Header& h) {
    if (b.empty()) return false;
    const auto* p = reinterpret_cast<const unsigned char*>(b.data());
    const unsigned c = p[0];
    auto need = [&](std::size_t n) { return b.size() >= n; };
    auto sized = [&](MsgType t, int len_bytes, std::uint64_t extra = 0) {
        if (!need(1 + len_bytes)) return false;
        h.type = t;
        h.header_len = 1 + len_bytes + extra;
        h.raw_len = be(p + 1, len_bytes);
        return extra == 0 || need(h.header_len);
    };
    if (c <= 0x7f) return h = {MsgType::uint, 1, 0, 0}, true;
    if (c >= 0xe0) return h = {MsgType::sint, 1, 0, 0}, true;
    if ((c & 0xf0) == 0x80) return h = {MsgType::map, 1, 0, 2ull * (c & 0x0f)}, true;
    if ((c & 0xf0) == 0x90) return h = {MsgType::array, 1, 0, c & 0x0fu}, true;
    if ((c & 0xe0) == 0xa0) return h = {MsgType::str, 1, c & 0x1fu, 0}, true;
    // One line per header byte reads as the format's own table.
    // clang-format off
    switch (c) {
        case 0xc0: return h = {MsgType::nil, 1, 0, 0}, true;
        case 0xc2:
        case 0xc3: return h = {MsgType::boolean, 1, 0, 0}, true;
        case 0xc4: return sized(MsgType::bin, 1);
        case 0xc5: return sized(MsgType::bin, 2);
        case 0xc6: return sized(MsgType::bin, 4);
        case 0xc7: return sized(MsgType::ext, 1, 1);
        case 0xc8: return sized(MsgType::ext, 2, 1);
        case 0xc9: return sized(MsgType::ext, 4, 1);
        case 0xca: return h = {MsgType::float32, 1, 4, 0}, true;
        case 0xcb: return h = {MsgType::float64, 1, 8, 0}, true;
        case 0xcc: return h = {MsgType::uint, 1, 1, 0}, true;
        case 0xcd: return h = {MsgType::uint, 1, 2, 0}, true;
        case 0xce: return h = {MsgType::uint, 1, 4, 0}, true;
        case 0xcf: return h = {MsgType::uint, 1, 8, 0}, true;
        case 0xd0: return h = {MsgType::sint, 1, 1, 0}, true;
        case 0xd1: return h = {MsgType::sint, 1, 2, 0}, true;
        case 0xd2: return h = {MsgType::sint, 1, 4, 0}, true;
        case 0xd3: return h = {MsgType::sint, 1, 8, 0}, true;
        case 0xd4: return h = {MsgType::ext, 2, 1, 0}, true;
        case 0xd5: return h = {MsgType::ext, 2, 2, 0}, true;
        case 0xd6: return h = {MsgType::ext, 2, 4, 0}, true;
        case 0xd7: return h = {MsgType::ext, 2, 8, 0}, true;
        case 0xd8: return h = {MsgType::ext, 2, 16, 0}, true;
        case 0xd9: return sized(MsgType::str, 1);
        case 0xda: return sized(MsgType::str, 2);
        case 0xdb: return sized(MsgType::str, 4);
        case 0xdc:
        case 0xdd: {
            const int n = c == 0xdc ? 2 : 4;
            if (!need(1 + n)) return false;
            h = {MsgType::array, std::size_t(1 + n), 0, be(p + 1, n)};
            return true;
        }
        case 0xde:
        case 0xdf: {
            const int n = c == 0xde ? 2 : 4;
            if (!need(1 + n)) return false;
            h = {MsgType::map, std::size_t(1 + n), 0, 2 * be(p + 1, n)};
            return true;
        }
        default: return false;  // 0xc1
    }
    // clang-format on
}

// Returns the size of the value at the start of `b`, or 0 if it is malformed. Each
// child takes at least one byte, so a count larger than the bytes left is refused
// before anything is walked.
std::size_t walk(std::string_view b, int depth_left, std::string& error) {
    Header h;
    if (!read_header(b, h)) {
        error = b.empty() ? "truncated value" : "malformed or truncated header";
        return 0;
    }
    const std::size_t after_header = b.size() - std::min(b.size(), h.header_len);
    if (h.header_len > b.size() || h.raw_len > after_header) {
        error = "declared length exceeds the frame";
        return 0;
    }
    if (h.type != MsgType::array && h.type != MsgType::map) return h.header_len + h.raw_len;
    if (h.children > after_header) {
        error = "declared element count exceeds the frame";
        return 0;
    }
    if (depth_left <= 0 && h.children > 0) {
        error = "nesting too deep";
        return 0;
    }
    std::size_t pos = h.header_len;
    for (std::uint64_t i = 0; i < h.children; ++i) {
        const std::size_t n = walk(b.substr(pos), depth_left - 1, error);
        if (n == 0) return 0;
        pos += n;
    }
    return pos;
}

}  // namespace

bool validate(std::string_view bytes, int max_depth, std::string& error) {
    const std::size_t n = walk(bytes, max_depth, error);
    if (n == 0) return false;
    if (n != bytes.size()) {
        error = "trailing bytes after the value";
        return false;
    }
    return true;
}

std::size_t value_size(std::string_view bytes) {
    std::string ignored;
    return walk(bytes, 1 << 20, ignored);
}

MsgValue read_value(std::string_view bytes) {
    Header h;
    read_header(bytes, h);
    return MsgValue{h.type, bytes.substr(0, value_size(bytes))};
}

std::optional<std::uint64_t> MsgValue::as_uint() const {
    const auto* p = reinterpret_cast<const unsigned char*>(encoded.data());
    if (type == MsgType::uint) return p[0] <= 0x7f ? p[0] : be(p + 1, int(encoded.size() - 1));
    if (type == MsgType::sint) {
        auto v = as_int();
        if (v && *v >= 0) return std::uint64_t(*v);
    }
    return std::nullopt;
}

std::optional<std::int64_t> MsgValue::as_int() const {
    const auto* p = reinterpret_cast<const unsigned char*>(encoded.data());
    if (type == MsgType::uint) {
        auto v = p[0] <= 0x7f ? p[0] : be(p + 1, int(encoded.size() - 1));
        if (v > std::uint64_t(INT64_MAX)) return std::nullopt;
        return std::int64_t(v);
    }
    if (type != MsgType::sint) return std::nullopt;
    if (p[0] >= 0xe0) return std::int64_t(std::int8_t(p[0]));
    const int n = int(encoded.size() - 1);
    const std::uint64_t raw = be(p + 1, n);
    switch (n) {
        case 1:
            return std::int8_t(raw);
        case 2:
            return std::int16_t(raw);
        case 4:
            return std::int32_t(raw);
        default:
            return std::int64_t(raw);
    }
}

std::optional<double> MsgValue::as_number() const {
    const auto* p = reinterpret_cast<const unsigned char*>(encoded.data());
    if (type == MsgType::float32) {
        auto bits = std::uint32_t(be(p + 1, 4));
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }
    if (type == MsgType::float64) {
        auto bits = be(p + 1, 8);
        double d;
        std::memcpy(&d, &bits, 8);
        return d;
    }
    if (auto i = as_int()) return double(*i);
    if (auto u = as_uint()) return double(*u);
    return std::nullopt;
}

std::optional<bool> MsgValue::as_bool() const {
    if (type != MsgType::boolean) return std::nullopt;
    return encoded[0] == char(0xc3);
}

std::optional<std::string_view> MsgValue::as_str() const {
    if (type != MsgType::str) return std::nullopt;
    Header h;
    read_header(encoded, h);
    return encoded.substr(h.header_len);
}

std::optional<std::string_view> MsgValue::as_str_or_bin() const {
    if (type != MsgType::str && type != MsgType::bin) return std::nullopt;
    Header h;
    read_header(encoded, h);
    return encoded.substr(h.header_len);
}

MapReader::MapReader(const MsgValue& map) {
    Header h;
    if (map.type != MsgType::map || !read_header(map.encoded, h)) return;
    rest_ = map.encoded.substr(h.header_len);
    left_ = std::uint32_t(h.children / 2);
}

std::optional<std::pair<MsgValue, MsgValue>> MapReader::next() {
    if (left_ == 0) return std::nullopt;
    --left_;
    MsgValue k = read_value(rest_);
    rest_ = rest_.substr(k.encoded.size());
    MsgValue v = read_value(rest_);
    rest_ = rest_.substr(v.encoded.size());
    return std::make_pair(k, v);
}

}  // namespace dueq::wire
