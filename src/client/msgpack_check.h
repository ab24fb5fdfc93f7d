// A bounds check over raw msgpack bytes that runs before msgpack::unpack allocates
// anything: every declared str/bin/ext length and array/map count must fit in the bytes
// that are actually left, and nesting is capped. This is what lets the decoder hand
// msgpack-c an input whose allocations are bounded by the input's own size.
#pragma once

#include <cstddef>
#include <string_view>

#include "client/status.h"
#include "wire/limits.h"

namespace dueq::client {

struct MsgpackLimits {
    std::size_t max_depth = limits::kMaxDepth;  // containers nested deeper are refused
};

// Checks that `bytes` begins with one well-formed msgpack value. On success stores its
// encoded size in *consumed (which may be less than bytes.size()). Errors: bad_request
// (truncated, reserved byte 0xc1, a length larger than what follows, too deep).
Status check_msgpack_value(std::string_view bytes, const MsgpackLimits& limits,
                           std::size_t* consumed);

// As above, but the value must fill `bytes` exactly (a frame body, a payload).
Status check_single_msgpack_value(std::string_view bytes, const MsgpackLimits& limits);

}  // namespace dueq::client
