// What both round-trip tests share: a frame's fields, the same frame with one field
// renamed (the planted drift), and a case that runs both.
#pragma once

#include <catch2/catch.hpp>

#include <msgpack.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "wire/protocol.h"

namespace dueq::wire_test {

using Diffs = std::vector<std::string>;

// Collects the names of the fields whose decoded value differs from what was sent.
struct Compare {
    Diffs diffs;
    template <class A, class B>
    void operator()(std::string_view name, const A& got, const B& want) {
        if (!(got == want)) diffs.emplace_back(name);
    }
};

inline std::string body_of(const std::string& frame) {
    return frame.substr(4);
}

inline std::string framed(const msgpack::sbuffer& b) {
    const auto n = std::uint32_t(b.size());
    std::string out{char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
    return out + std::string(b.data(), b.size());
}

inline void pack_renamed(msgpack::packer<msgpack::sbuffer>& pk, const msgpack::object& o,
                         const std::string& from, const std::string& to) {
    if (o.type == msgpack::type::ARRAY) {
        pk.pack_array(o.via.array.size);
        for (std::uint32_t i = 0; i < o.via.array.size; ++i)
            pack_renamed(pk, o.via.array.ptr[i], from, to);
    } else if (o.type == msgpack::type::MAP) {
        pk.pack_map(o.via.map.size);
        for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
            const auto& kv = o.via.map.ptr[i];
            if (kv.key.type == msgpack::type::STR && kv.key.as<std::string>() == from)
                pk.pack(to);
            else
                pk.pack(kv.key);
            pack_renamed(pk, kv.val, from, to);
        }
    } else {
        pk.pack(o);
    }
}

// The frame with every map key `from` renamed `to`: the drift this test must catch.
inline std::string renamed(const std::string& frame, const std::string& from,
                           const std::string& to) {
    const std::string body = body_of(frame);
    auto handle = msgpack::unpack(body.data(), body.size());
    msgpack::sbuffer out;
    msgpack::packer<msgpack::sbuffer> pk(out);
    pack_renamed(pk, handle.get(), from, to);
    return framed(out);
}

inline void collect_keys(const msgpack::object& o, std::set<std::string>& keys) {
    if (o.type == msgpack::type::ARRAY) {
        for (std::uint32_t i = 0; i < o.via.array.size; ++i)
            collect_keys(o.via.array.ptr[i], keys);
    } else if (o.type == msgpack::type::MAP) {
        for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
            keys.insert(o.via.map.ptr[i].key.as<std::string>());
            collect_keys(o.via.map.ptr[i].val, keys);
        }
    }
}

inline std::set<std::string> keys_of(const std::string& frame) {
    const std::string body = body_of(frame);
    auto handle = msgpack::unpack(body.data(), body.size());
    std::set<std::string> keys;
    collect_keys(handle.get(), keys);
    return keys;
}

// A frame and how to judge what the other half made of it.
struct Case {
    wire::Op op;
    std::string frame;
    std::function<Diffs(const std::string& frame)> judge;
    std::set<std::string> not_read;  // fields the reading half ignores on purpose (why: below)
};

// Runs the case as sent, then with each of its fields renamed.
inline void check_case(const Case& c) {
    INFO("op " << wire::op_name(c.op));
    const Diffs clean = c.judge(c.frame);
    CHECK(clean.empty());
    for (const auto& d : clean)
        UNSCOPED_INFO("differs: " << d);
    for (const auto& key : keys_of(c.frame)) {
        if (c.not_read.count(key)) continue;
        INFO("field '" << key << "' renamed on one side");
        CHECK_FALSE(c.judge(renamed(c.frame, key, key + "_drift")).empty());
    }
}

}  // namespace dueq::wire_test
