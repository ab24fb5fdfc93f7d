// Requests built field by field, for Client::async_raw: what dueq-proxy sends to shards on
// its own account, and what tools send for ops the typed client API lacks (`shards`); and
// answers read field by field.
#pragma once

#include <msgpack.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string_view>

namespace dueq::shard {

using MsgHandle = std::shared_ptr<msgpack::object_handle>;
using Packer = msgpack::packer<msgpack::sbuffer>;

// {"op": op, ...} with `entries` more (name, value) pairs that `pack_entries` packs.
MsgHandle request_map(
    std::string_view op, std::uint32_t entries,
    const std::function<void(Packer&)>& pack_entries = [](Packer&) {});
void pack_str(Packer& pk, std::string_view s);

// move (`to`: the destination) or move_cancel (`to` empty) of buckets [first, first + count).
MsgHandle move_request(std::uint32_t first, std::uint32_t count, std::string_view to);
// move_step: an encoded MoveBucket command and its HMAC (node/move_steps.h).
MsgHandle move_step_request(std::string_view step, std::string_view mac);
// The `count` of a move or move_cancel answer (buckets started or cancelled).
std::optional<std::uint32_t> move_count(const msgpack::object& answer);

// The value of `name` in a msgpack map, or nullptr (absent, or not a map).
const msgpack::object* field(const msgpack::object& map, std::string_view name);
// A str or bin value's bytes; "" for anything else (or null).
std::string bytes_of(const msgpack::object* value);

}  // namespace dueq::shard
