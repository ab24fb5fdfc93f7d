// Reading fields out of a decoded msgpack object without exceptions, and packing helpers
// shared by the command and task encodings. Internal to src/queue.
#pragma once

#include <msgpack.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/string_sink.h"

namespace dueq::queue::detail {

using Packer = msgpack::packer<StringSink>;

inline void pack_bytes(Packer& p, std::string_view b) {
    p.pack_bin(static_cast<std::uint32_t>(b.size()));
    p.pack_bin_body(b.data(), static_cast<std::uint32_t>(b.size()));
}

inline void pack_text(Packer& p, std::string_view s) {
    p.pack_str(static_cast<std::uint32_t>(s.size()));
    p.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

template <class T>
void pack_optional(Packer& p, const std::optional<T>& v) {
    if (v) {
        p.pack(*v);
    } else {
        p.pack_nil();
    }
}

// Each read_* returns false when the object is not of the wanted type or range.
inline bool read_int(const msgpack::object& o, std::int64_t* out) {
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
        if (o.via.u64 > static_cast<std::uint64_t>(INT64_MAX)) return false;
        *out = static_cast<std::int64_t>(o.via.u64);
        return true;
    }
    if (o.type == msgpack::type::NEGATIVE_INTEGER) {
        *out = o.via.i64;
        return true;
    }
    return false;
}

inline bool read_uint(const msgpack::object& o, std::uint64_t max, std::uint64_t* out) {
    if (o.type != msgpack::type::POSITIVE_INTEGER || o.via.u64 > max) return false;
    *out = o.via.u64;
    return true;
}

template <class U>
bool read_uint_as(const msgpack::object& o, U* out) {
    std::uint64_t v = 0;
    if (!read_uint(o, static_cast<std::uint64_t>(static_cast<U>(-1)), &v)) return false;
    *out = static_cast<U>(v);
    return true;
}

inline bool read_bool(const msgpack::object& o, bool* out) {
    if (o.type != msgpack::type::BOOLEAN) return false;
    *out = o.via.boolean;
    return true;
}

// Any number: msgpack-c packs a double that holds an integer as an integer, up to 2^64.
inline bool read_double(const msgpack::object& o, double* out) {
    if (o.type == msgpack::type::FLOAT64 || o.type == msgpack::type::FLOAT32) {
        *out = o.via.f64;
        return true;
    }
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
        *out = static_cast<double>(o.via.u64);
        return true;
    }
    if (o.type == msgpack::type::NEGATIVE_INTEGER) {
        *out = static_cast<double>(o.via.i64);
        return true;
    }
    return false;
}

// str or bin: keys and payloads are bytes, but a hand-written log may use str.
inline bool read_bytes(const msgpack::object& o, std::string_view* out) {
    if (o.type == msgpack::type::STR) {
        *out = std::string_view(o.via.str.ptr, o.via.str.size);
        return true;
    }
    if (o.type == msgpack::type::BIN) {
        *out = std::string_view(o.via.bin.ptr, o.via.bin.size);
        return true;
    }
    return false;
}

inline bool read_string(const msgpack::object& o, std::string* out) {
    std::string_view v;
    if (!read_bytes(o, &v)) return false;
    out->assign(v);
    return true;
}

template <class T, class Reader>
bool read_optional(const msgpack::object& o, std::optional<T>* out, Reader read) {
    if (o.type == msgpack::type::NIL) {
        out->reset();
        return true;
    }
    T v{};
    if (!read(o, &v)) return false;
    *out = v;
    return true;
}

// `limit` with its array and map counts cut to what `bytes` can hold (one byte per
// element at least): msgpack-c allocates an array's elements when it reads the header,
// so a few bytes declaring a million elements must not cost megabytes.
inline msgpack::unpack_limit fitted(const msgpack::unpack_limit& limit, std::string_view bytes) {
    return msgpack::unpack_limit(std::min(limit.array(), bytes.size()),
                                 std::min(limit.map(), bytes.size() / 2), limit.str(), limit.bin(),
                                 limit.ext(), limit.depth());
}

// Unpacks exactly one object spanning all of `bytes`, under the given limits.
// nullopt if the bytes are malformed, truncated, trailed, or break a limit.
inline std::optional<msgpack::object_handle> unpack_whole(std::string_view bytes,
                                                          const msgpack::unpack_limit& limit) {
    try {
        std::size_t off = 0;
        msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size(), off, nullptr,
                                                    nullptr, fitted(limit, bytes));
        if (off != bytes.size()) return std::nullopt;
        return oh;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// unpack_whole for a hot loop: the object lives in `zone` (the caller clears it between
// calls, so its memory is reused) and its strings and binaries point into `bytes`
// instead of being copied, so it is only valid while both are.
inline std::optional<msgpack::object> unpack_whole_in(msgpack::zone& zone, std::string_view bytes,
                                                      const msgpack::unpack_limit& limit) {
    try {
        std::size_t off = 0;
        bool referenced = false;
        auto refer = [](msgpack::type::object_type, std::size_t, void*) { return true; };
        msgpack::object o = msgpack::unpack(zone, bytes.data(), bytes.size(), off, referenced,
                                            refer, nullptr, fitted(limit, bytes));
        if (off != bytes.size()) return std::nullopt;
        return o;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// The elements of an array object, or nullptr (and size 0) if it is not an array.
// Calls fn with each msgpack value of `bytes`, one after another (a list packed into one
// bin); false when one does not unpack within `limit`, or when fn returns false.
template <class Fn>
bool for_each_packed(std::string_view bytes, const msgpack::unpack_limit& limit, Fn fn) {
    std::size_t at = 0;
    while (at < bytes.size()) {
        msgpack::object_handle oh;
        try {
            msgpack::unpack(oh, bytes.data(), bytes.size(), at, nullptr, nullptr, limit);
        } catch (const std::exception&) {
            return false;
        }
        if (!fn(oh.get())) return false;
    }
    return true;
}

inline const msgpack::object* array_items(const msgpack::object& o, std::uint32_t* size) {
    if (o.type != msgpack::type::ARRAY) {
        *size = 0;
        return nullptr;
    }
    *size = o.via.array.size;
    return o.via.array.ptr;
}

}  // namespace dueq::queue::detail
