#include "client/forward.h"

#include <algorithm>

#include "wire/msgpack_reader.h"
#include "wire/protocol.h"

namespace dueq::client {

namespace {

void put_be(std::string& out, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i)
        out.push_back(char(v >> (8 * i)));
}

void put_map_header(std::string& out, std::uint32_t n) {
    if (n < 16) return out.push_back(char(0x80 | n));
    if (n <= 0xffff) return out.push_back(char(0xde)), put_be(out, n, 2);
    out.push_back(char(0xdf)), put_be(out, n, 4);
}

void put_str(std::string& out, std::string_view s) {
    // Field names are short: fixstr or str8.
    if (s.size() < 32) {
        out.push_back(char(0xa0 | s.size()));
    } else {
        out.push_back(char(0xd9));
        out.push_back(char(s.size()));
    }
    out.append(s);
}

void put_uint(std::string& out, std::uint64_t v) {
    if (v < 128) return out.push_back(char(v));
    if (v <= 0xff) return out.push_back(char(0xcc)), put_be(out, v, 1);
    if (v <= 0xffff) return out.push_back(char(0xcd)), put_be(out, v, 2);
    if (v <= 0xffffffff) return out.push_back(char(0xce)), put_be(out, v, 4);
    out.push_back(char(0xcf)), put_be(out, v, 8);
}

}  // namespace

Result<std::string> frame_with_id(std::string_view map_body, std::uint64_t id,
                                  const std::vector<std::pair<std::string, bool>>& extra_bools,
                                  BodyCheck check) {
    std::string why;
    if (check == BodyCheck::validate && !wire::validate(map_body, 64, why))
        return Error(Code::bad_request, "cannot forward a malformed frame: " + why);
    if (map_body.empty()) return Error(Code::bad_request, "cannot forward an empty frame");
    const wire::MsgValue map = wire::read_value(map_body);
    if (map.type != wire::MsgType::map)
        return Error(Code::bad_request, "cannot forward a frame that is not a msgpack map");
    auto rewritten = [&](const wire::MsgValue& key) {
        const auto k = key.as_str();
        if (!k) return false;
        if (*k == wire::field::id) return true;
        return std::any_of(extra_bools.begin(), extra_bools.end(),
                           [&](const auto& e) { return *k == e.first; });
    };
    std::uint32_t kept = 0;
    wire::MapReader count(map);
    while (auto e = count.next())
        if (!rewritten(e->first)) ++kept;
    std::string frame;
    frame.reserve(4 + map_body.size() + 16 + 16 * extra_bools.size());
    frame.assign(4, '\0');
    put_map_header(frame, kept + 1 + std::uint32_t(extra_bools.size()));
    put_str(frame, wire::field::id);
    put_uint(frame, id);
    wire::MapReader copy(map);
    while (auto e = copy.next()) {
        if (rewritten(e->first)) continue;
        // A key and its value lie next to each other: one append for both.
        const char* begin = e->first.encoded.data();
        const char* end = e->second.encoded.data() + e->second.encoded.size();
        frame.append(begin, std::size_t(end - begin));
    }
    for (const auto& [name, value] : extra_bools) {
        put_str(frame, name);
        frame.push_back(value ? char(0xc3) : char(0xc2));
    }
    const auto n = std::uint32_t(frame.size() - 4);
    frame[0] = char(n >> 24), frame[1] = char(n >> 16), frame[2] = char(n >> 8), frame[3] = char(n);
    return frame;
}

}  // namespace dueq::client
