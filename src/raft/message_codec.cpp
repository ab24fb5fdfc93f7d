#include "raft/message_codec.h"

#include <msgpack.hpp>

#include <algorithm>

#include "common/string_sink.h"

namespace dueq::raft {

namespace {
constexpr std::uint64_t kFormat = 1;
constexpr std::uint32_t kFields = 13;

using Packer = msgpack::packer<StringSink>;

void pack_bin(Packer& p, std::string_view data) {
    p.pack_bin(static_cast<std::uint32_t>(data.size()));
    p.pack_bin_body(data.data(), static_cast<std::uint32_t>(data.size()));
}

// Field readers: false when the object is not what the format says.
bool read_uint(const msgpack::object& o, std::uint64_t& out) {
    if (o.type != msgpack::type::POSITIVE_INTEGER) return false;
    out = o.via.u64;
    return true;
}

// Log times travel as unsigned integers; they are never negative.
bool read_time(const msgpack::object& o, Millis& out) {
    std::uint64_t u = 0;
    if (!read_uint(o, u) || u > std::uint64_t(INT64_MAX)) return false;
    out = Millis(u);
    return true;
}

bool read_bool(const msgpack::object& o, bool& out) {
    if (o.type != msgpack::type::BOOLEAN) return false;
    out = o.via.boolean;
    return true;
}

bool read_bin(const msgpack::object& o, std::string& out) {
    if (o.type != msgpack::type::BIN) return false;
    out.assign(o.via.bin.ptr, o.via.bin.size);
    return true;
}

const msgpack::object* array_of(const msgpack::object& o, std::uint32_t size) {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != size) return nullptr;
    return o.via.array.ptr;
}

bool read_entry(const msgpack::object& o, Entry& e) {
    const msgpack::object* f = array_of(o, 5);
    std::uint64_t type = 0;
    std::string data;
    if (!f || !read_uint(f[0], e.term) || !read_uint(f[1], e.index) || !read_time(f[2], e.time) ||
        !read_uint(f[3], type) || type > static_cast<std::uint64_t>(EntryType::config) ||
        !read_bin(f[4], data)) {
        return false;
    }
    e.type = static_cast<EntryType>(type);
    e.data = std::move(data);
    return true;
}

bool read_snapshot(const msgpack::object& o, std::optional<Snapshot>& out) {
    if (o.type == msgpack::type::NIL) return true;
    const msgpack::object* f = array_of(o, 4);
    Snapshot s;
    if (!f || !read_uint(f[0], s.meta.index) || !read_uint(f[1], s.meta.term) ||
        !read_time(f[2], s.meta.time) || !read_bin(f[3], s.data)) {
        return false;
    }
    out = std::move(s);
    return true;
}
}  // namespace

std::string encode_message(const Message& m) {
    std::size_t size = 64;
    for (const Entry& e : m.entries)
        size += 32 + e.data.size();
    if (m.snapshot) size += 32 + m.snapshot->data.size();
    std::string out;
    out.reserve(size);
    StringSink sink{out};
    Packer p(sink);
    p.pack_array(kFields);
    p.pack(kFormat);
    p.pack(static_cast<std::uint64_t>(m.type));
    p.pack(m.from);
    p.pack(m.to);
    p.pack(m.term);
    p.pack(m.index);
    p.pack(m.log_term);
    p.pack(m.commit);
    p.pack(m.reject);
    p.pack(m.hint_index);
    p.pack(m.context);
    p.pack_array(static_cast<std::uint32_t>(m.entries.size()));
    for (const Entry& e : m.entries) {
        p.pack_array(5);
        p.pack(e.term);
        p.pack(e.index);
        p.pack(e.time);
        p.pack(static_cast<std::uint64_t>(e.type));
        pack_bin(p, e.data);
    }
    if (m.snapshot) {
        p.pack_array(4);
        p.pack(m.snapshot->meta.index);
        p.pack(m.snapshot->meta.term);
        p.pack(m.snapshot->meta.time);
        pack_bin(p, m.snapshot->data);
    } else {
        p.pack_nil();
    }
    return out;
}

Result<Message> decode_message(std::string_view bytes, const DecodeLimits& limits) {
    // Every replica decodes every message. One zone per thread, cleared and reused (it
    // keeps its first chunk), and binaries read where they lie in `bytes`, to be copied
    // once, into the entries: a zone of its own per message was an 8 KiB malloc, which
    // makes glibc merge its freed small chunks first, on every message.
    thread_local msgpack::zone zone;
    zone.clear();
    msgpack::object root;
    try {
        // Caps checked by the parser before it allocates: arrays, maps, strings, bins,
        // ext, and nesting depth (3 is all the format needs).
        // Arrays no longer than the bytes could hold: msgpack-c allocates an array's
        // elements as soon as it reads its header.
        msgpack::unpack_limit limit(
            std::min(std::max<std::size_t>(limits.max_entries, kFields), bytes.size()), 0, 0,
            limits.max_bytes, 0, 4);
        std::size_t offset = 0;
        bool referenced = false;
        auto refer = [](msgpack::type::object_type, std::size_t, void*) { return true; };
        root = msgpack::unpack(zone, bytes.data(), bytes.size(), offset, referenced, refer, nullptr,
                               limit);
        if (offset != bytes.size()) return Error::invalid;  // trailing bytes
    } catch (const std::exception&) {
        return Error::invalid;  // malformed, truncated or over a limit
    }
    const msgpack::object* f = array_of(root, kFields);
    std::uint64_t format = 0, type = 0;
    if (!f || !read_uint(f[0], format) || format != kFormat || !read_uint(f[1], type) ||
        type > static_cast<std::uint64_t>(MessageType::timeout_now)) {
        return Error::invalid;
    }
    Message m;
    m.type = static_cast<MessageType>(type);
    if (!read_uint(f[2], m.from) || !read_uint(f[3], m.to) || !read_uint(f[4], m.term) ||
        !read_uint(f[5], m.index) || !read_uint(f[6], m.log_term) || !read_uint(f[7], m.commit) ||
        !read_bool(f[8], m.reject) || !read_uint(f[9], m.hint_index) ||
        !read_uint(f[10], m.context)) {
        return Error::invalid;
    }
    if (f[11].type != msgpack::type::ARRAY || f[11].via.array.size > limits.max_entries)
        return Error::invalid;
    m.entries.resize(f[11].via.array.size);
    for (std::uint32_t k = 0; k < f[11].via.array.size; ++k) {
        if (!read_entry(f[11].via.array.ptr[k], m.entries[k])) return Error::invalid;
    }
    if (!read_snapshot(f[12], m.snapshot)) return Error::invalid;
    if (m.type == MessageType::snapshot && !m.snapshot) return Error::invalid;
    return m;
}

}  // namespace dueq::raft
