// Why: net::decode_request is the first code that reads a client's bytes. Anyone who can
// reach the client port can send any frame body (the listener only cuts the 4-byte
// length off), before authenticating. It must refuse bad frames, never crash, leak or
// read outside the frame, and what it accepts must respect the Limits it was given (the
// defaults: dueqd without a [limits] section) and carry a payload that is exactly one
// msgpack value, since replies copy it verbatim.
#include <cmath>
#include <string>
#include <type_traits>
#include <variant>

#include "fuzz/fuzz_support.h"
#include "net/request.h"
#include "wire/msgpack_reader.h"

namespace {
using namespace dueq;

void check_key(std::string_view queue, std::string_view key, const net::Limits& limits) {
    FUZZ_CHECK(!queue.empty() && queue.size() <= limits.max_queue_name_bytes);
    FUZZ_CHECK(!key.empty() && key.size() <= limits.max_key_bytes);
}

void check_payload(const std::string& payload, const net::Limits& limits) {
    FUZZ_CHECK(payload.size() <= limits.max_payload_bytes);
    std::string why;
    FUZZ_CHECK(wire::validate(payload, limits.max_depth, why));
}

void check_write(const net::Write& w, const net::Limits& limits) {
    FUZZ_CHECK(w.wait_ms >= 0 && w.wait_ms <= 86'400'000);
    std::visit(
        [&](const auto& c) {
            using C = std::decay_t<decltype(c)>;
            if constexpr (std::is_same_v<C, queue::Put>) {
                check_key(c.queue, c.key, limits);
                check_payload(c.payload, limits);
            } else if constexpr (std::is_same_v<C, queue::Ack>) {
                check_key(c.queue, c.key, limits);
                if (c.payload) check_payload(*c.payload, limits);
            } else if constexpr (std::is_same_v<C, queue::Take>) {
                FUZZ_CHECK(c.count >= 1 && c.count <= limits.max_take_count);
                FUZZ_CHECK(!c.queue.empty() && c.queue.size() <= limits.max_queue_name_bytes);
            } else if constexpr (std::is_same_v<C, queue::Declare>) {
                FUZZ_CHECK(!c.late_share || (std::isfinite(*c.late_share) && *c.late_share >= 0 &&
                                             *c.late_share <= 1));
            } else if constexpr (std::is_same_v<C, queue::Delete> ||
                                 std::is_same_v<C, queue::Touch> ||
                                 std::is_same_v<C, queue::Release> ||
                                 std::is_same_v<C, queue::Bury>) {
                check_key(c.queue, c.key, limits);
            }
        },
        w.command);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const net::Limits limits;
    auto decoded = net::decode_request(fuzz::as_view(data, size), limits);
    const auto* r = std::get_if<net::Request>(&decoded);
    if (!r) return 0;
    if (const auto* w = std::get_if<net::Write>(&r->body)) check_write(*w, limits);
    if (const auto* g = std::get_if<net::GetTask>(&r->body)) check_key(g->queue, g->key, limits);
    return 0;
}
