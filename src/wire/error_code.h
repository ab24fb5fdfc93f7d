// The error codes of the wire protocol (docs/protocol.md), one type for the node, the
// task store and the client library. Header-only, so that the client library needs
// nothing of the server's.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>

namespace dueq::wire {

enum class Code : std::uint8_t {
    ok = 0,
    bad_request,
    not_found,
    exists,
    lease_mismatch,
    not_leader,
    no_quorum,
    too_large,
    timeout,
    unavailable,
    unauthorized,
    internal,
    wrong_shard,  // the key belongs to another shard and the client asked for a redirect
    store_full,   // the write would take the store past its budget ([limits] max_store_bytes)
    moving,       // the key's bucket is moving between shards: not applied, retry shortly
    unknown,      // client side: a code this version does not know (never sent)
};

inline constexpr std::array<std::pair<Code, std::string_view>, 16> kCodeNames{{
    {Code::ok, "ok"},
    {Code::bad_request, "bad_request"},
    {Code::not_found, "not_found"},
    {Code::exists, "exists"},
    {Code::lease_mismatch, "lease_mismatch"},
    {Code::not_leader, "not_leader"},
    {Code::no_quorum, "no_quorum"},
    {Code::too_large, "too_large"},
    {Code::timeout, "timeout"},
    {Code::unavailable, "unavailable"},
    {Code::unauthorized, "unauthorized"},
    {Code::internal, "internal"},
    {Code::wrong_shard, "wrong_shard"},
    {Code::store_full, "store_full"},
    {Code::moving, "moving"},
    {Code::unknown, "unknown"},
}};

// The name as on the wire ("ok", "bad_request", ...).
constexpr std::string_view code_name(Code code) {
    for (const auto& [c, name] : kCodeNames)
        if (c == code) return name;
    return "unknown";
}

// Unknown names map to Code::unknown.
constexpr Code code_from_name(std::string_view name) {
    for (const auto& [c, n] : kCodeNames)
        if (n == name) return c;
    return Code::unknown;
}

}  // namespace dueq::wire
