// Why: net::decode_request is the first code that reads a client's bytes. Anyone who can
// reach the client port can send any frame body (the listener only cuts the 4-byte
// length off), before authenticating. It must refuse bad frames, never crash, leak or
// read outside the frame, and what it accepts must respect the Limits it was given (the
// defaults: dueqd without a [limits] section) and carry a payload that is exactly one
// msgpack value, since replies copy it verbatim.
#include <cmath>
#include <string>

#include "fuzz/fuzz_support.h"
#include "net/msgpack_reader.h"
#include "net/request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace dueq;
    static const net::Limits limits;
    auto decoded = net::decode_request(fuzz::as_view(data, size), limits);
    const auto* r = std::get_if<net::Request>(&decoded);
    if (!r) return 0;
    FUZZ_CHECK(!r->queue.empty() && r->queue.size() <= limits.max_queue_name_bytes);
    FUZZ_CHECK(!r->key || (!r->key->empty() && r->key->size() <= limits.max_key_bytes));
    if (r->payload) {
        FUZZ_CHECK(r->payload->size() <= limits.max_payload_bytes);
        std::string why;
        FUZZ_CHECK(net::validate(*r->payload, limits.max_depth, why));
    }
    FUZZ_CHECK(!r->late_share ||
               (std::isfinite(*r->late_share) && *r->late_share >= 0 && *r->late_share <= 1));
    if (r->op == net::Op::take && r->count)
        FUZZ_CHECK(*r->count >= 1 && *r->count <= limits.max_take_count);
    FUZZ_CHECK(!r->timeout_ms || (*r->timeout_ms >= 0 && *r->timeout_ms <= 86'400'000));
    return 0;
}
