// Forwarding a frame someone else encoded (dueq-proxy, a node relaying to another shard)
// without unpacking it: the map's entries are copied as they came, and only "id" (and the
// relay's own boolean fields) are written anew. msgpack-c never sees the bytes, so a relay
// allocates one string per hop instead of an object tree and a repacked copy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/status.h"

namespace dueq::client {

// Whether the bytes given to frame_with_id were already walked by wire::validate (a
// request net::decode_request took, an answer decode_response took): the walk is what a
// relay spends most of its time on, and once is enough.
enum class BodyCheck { validate, already_validated };

// A whole frame (4-byte length + map) holding the entries of `map_body`, a msgpack map,
// with "id" set to `id` and each of `extra_bools` set to its value (any entries of the
// same names dropped). Errors: bad_request when `map_body` is not a msgpack map, or with
// BodyCheck::validate, not exactly one well-formed msgpack value nested at most 64 deep.
Result<std::string> frame_with_id(std::string_view map_body, std::uint64_t id,
                                  const std::vector<std::pair<std::string, bool>>& extra_bools = {},
                                  BodyCheck check = BodyCheck::validate);

}  // namespace dueq::client
