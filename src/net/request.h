// Client requests as the node sees them: decoded from one frame, every field checked
// for type and size. Nothing here knows about tasks; src/node turns a Request into a
// queue command.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "net/limits.h"
#include "queue/command.h"

namespace dueq::net {

enum class Op : std::uint8_t {
    ping,
    hello,
    declare,
    put,
    get,
    del,
    take,
    touch,
    ack,
    release,
    bury,
    kick,
    stats,
    status
};
const char* to_string(Op op);
bool is_mutating(Op op);  // becomes a log entry

struct Request {
    Op op = Op::ping;
    std::uint64_t id = 0;
    std::string queue = "default";
    bool queue_given = false;  // stats without a queue covers every queue
    std::optional<std::string> key;
    std::optional<std::string> payload;  // one msgpack value, encoded, verbatim
    std::optional<std::int64_t> time, ttr_ms, timeout_ms, delay_ms, lead_ms, retention_ms;
    std::optional<std::uint64_t> lease, session, count, max_attempts;
    std::optional<double> late_share;
    std::optional<bool> release_on_disconnect;
    std::optional<queue::PutMode> mode;
    bool consistency_leader = false;  // consistency: "leader"
    std::optional<std::string> token;
};

// Why a frame was refused. `id` is the request's id when it could be read (else 0),
// so the client can match the error to its request.
struct RequestError {
    queue::Code code = queue::Code::bad_request;
    std::string message;
    std::uint64_t id = 0;
};

// Decodes one frame body (the bytes after the length prefix). Unknown fields are
// ignored; a known field of the wrong type, a missing required field, or a value over a
// limit is refused with a message naming the field.
std::variant<Request, RequestError> decode_request(std::string_view frame, const Limits& limits);

}  // namespace dueq::net
