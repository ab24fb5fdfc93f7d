// Request encoding and response decoding for the client protocol (docs/protocol.md).
// Pure functions: no I/O, no clock; used by Client and directly by the tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "client/messages.h"
#include "client/status.h"
#include "wire/limits.h"

namespace dueq::client {

inline constexpr std::size_t kFrameHeaderBytes = 4;
inline constexpr std::size_t kDefaultMaxFrameBytes = limits::kMaxFrameBytes.dflt;

struct DecodeLimits {
    std::size_t max_frame_bytes = kDefaultMaxFrameBytes;
    // The server caps payload nesting at 32; the response envelope adds a few levels.
    int max_depth = 40;
};

// Checks that `bytes` is exactly one well-formed msgpack value nested at most `max_depth`
// deep (wire/msgpack_reader.h), before msgpack-c allocates anything for it. Errors:
// bad_request, saying what is wrong.
Status check_msgpack_value(std::string_view bytes, int max_depth = limits::kMaxDepth);

// Each returns a whole frame (4-byte big-endian length + one msgpack map) carrying `id`.
// Errors: bad_request for an empty key or a payload that is not exactly one well-formed
// msgpack value; too_large for a frame over kDefaultMaxFrameBytes. Other limits (key
// length, take count, payload size) are the server's to enforce, since they are config.
Result<std::string> encode_request(const PingRequest& req, uint64_t id);
Result<std::string> encode_request(const HelloRequest& req, uint64_t id);
Result<std::string> encode_request(const DeclareRequest& req, uint64_t id);
Result<std::string> encode_request(const PutRequest& req, uint64_t id);
Result<std::string> encode_request(const GetRequest& req, uint64_t id);
Result<std::string> encode_request(const DeleteRequest& req, uint64_t id);
Result<std::string> encode_request(const TakeRequest& req, uint64_t id);
Result<std::string> encode_request(const TouchRequest& req, uint64_t id);
Result<std::string> encode_request(const AckRequest& req, uint64_t id);
Result<std::string> encode_request(const ReleaseRequest& req, uint64_t id);
Result<std::string> encode_request(const BuryRequest& req, uint64_t id);
Result<std::string> encode_request(const KickRequest& req, uint64_t id);
Result<std::string> encode_request(const StatsRequest& req, uint64_t id);
Result<std::string> encode_request(const ListRequest& req, uint64_t id);
Result<std::string> encode_request(const BackupRequest& req, uint64_t id);
Result<std::string> encode_request(const StatusRequest& req, uint64_t id);
Result<std::string> encode_request(const MembersRequest& req, uint64_t id);
Result<std::string> encode_request(const MemberAddRequest& req, uint64_t id);
Result<std::string> encode_request(const MemberPromoteRequest& req, uint64_t id);
Result<std::string> encode_request(const MemberRemoveRequest& req, uint64_t id);

// Reads the 4-byte big-endian length at the start of a frame.
uint32_t read_frame_length(const unsigned char header[kFrameHeaderBytes]);

// One decoded response frame. `map` points into the object owned by `handle`.
struct ResponseFrame {
    uint64_t id = 0;
    bool ok = false;
    Error error;  // meaningful when !ok
    std::shared_ptr<msgpack::object_handle> handle;
    const msgpack::object* map = nullptr;
    std::string body;  // the frame's bytes: filled for Client::async_forward only
};

// Decodes a frame body (the bytes after the length). The body is bounds-checked
// (check_msgpack_value) before msgpack-c sees it. Errors: too_large (body over
// max_frame_bytes), internal (not a msgpack map, no id, no ok, malformed error object).
Result<ResponseFrame> decode_response(std::string_view body, const DecodeLimits& limits = {});

// The id and ok of a response frame, read in place: a relay that passes an ok answer on as
// its bytes needs no more, and skips msgpack-c's unpack. The body is checked as
// decode_response checks it, with the same errors.
struct ResponseHead {
    uint64_t id = 0;
    bool ok = false;
};
Result<ResponseHead> peek_response(std::string_view body, const DecodeLimits& limits = {});
// decode_response of a body peek_response accepted as `head`: neither checked nor read again.
Result<ResponseFrame> decode_peeked_response(std::string_view body, const ResponseHead& head,
                                             const DecodeLimits& limits);

// Forwarding (dueq-proxy, a node relaying to another shard). `map` is a request or a
// response as a msgpack map; the result is a whole frame holding the same entries with
// "id" set to `id` (added if it was missing). Extra fields are put after the others, in
// place of any the map held under the same names.
std::string repack_with_id(const msgpack::object& map, uint64_t id,
                           const std::vector<std::pair<std::string, bool>>& extra_bools = {});
// The request body a client sent (already checked by the server), unpacked for
// repack_with_id. Errors: bad_request when it is not one msgpack map.
Result<std::shared_ptr<msgpack::object_handle>> unpack_request(std::string_view body);

// Extract the typed result of an ok:true response. Errors: internal, naming the field that
// is missing or has the wrong type. Unknown fields are ignored.
Status decode_result(const msgpack::object& map, Empty* out);
Status decode_result(const msgpack::object& map, HelloResponse* out);
Status decode_result(const msgpack::object& map, DeclareResponse* out);
Status decode_result(const msgpack::object& map, PutResponse* out);
Status decode_result(const msgpack::object& map, GetResponse* out);
Status decode_result(const msgpack::object& map, TakeResponse* out);
Status decode_result(const msgpack::object& map, TouchResponse* out);
Status decode_result(const msgpack::object& map, AckResponse* out);
Status decode_result(const msgpack::object& map, KickResponse* out);
Status decode_result(const msgpack::object& map, StatsResponse* out);
Status decode_result(const msgpack::object& map, ListResponse* out);
Status decode_result(const msgpack::object& map, BackupResponse* out);
Status decode_result(const msgpack::object& map, StatusResponse* out);
Status decode_result(const msgpack::object& map, MembersResponse* out);
Status decode_result(const msgpack::object& map, MemberChangeResponse* out);

}  // namespace dueq::client
