// Client requests as the node sees them: decoded from one frame, every field checked
// for type and size, into a typed request (a queue command for the log, or a read).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "net/limits.h"
#include "queue/command.h"
#include "wire/protocol.h"

namespace dueq::net {

using wire::Op;
const char* to_string(Op op);

// What a client asks, decoded once from its frame: something the node answers itself,
// or a command for the log. The reply's shape follows from the type (node/replies.h).
struct Ping {};
struct Hello {
    std::optional<std::string> token;
    std::optional<std::uint64_t> session;  // resume this session
};
struct GetTask {
    std::string queue, key;
    bool leader_only = false;  // consistency: "leader"
};
struct GetStats {
    std::optional<std::string> queue;  // absent: every queue
    bool leader_only = false;
};
// list: one page of a queue's tasks in one status (docs/protocol.md).
struct ListTasks {
    std::string queue;
    queue::ListStatus status = queue::ListStatus::ready;
    std::uint32_t count = limits::kDefaultListCount;
    std::optional<std::string> after;        // the key the previous page ended at
    std::optional<std::int64_t> after_time;  // and its order time (else looked up)
    bool leader_only = false;
};
struct GetStatus {};
// backup: the first chunk of a new backup (no `backup` id), or chunk `seq` of one
// (docs/operations.md, "Backing up").
struct BackupChunk {
    std::uint64_t backup = 0;  // 0: start one
    std::uint32_t seq = 0;
};
struct GetShards {};
struct GetMembers {};
// member_add, member_promote or member_remove (`op` says which) of the member `name`.
struct ChangeMember {
    wire::Op op = wire::Op::member_add;
    std::string name, peer, client, admin;
};
// move (start moving buckets [first, first + count) to shard `to`) or move_cancel (stop
// moving them): to the source shard's leader (docs/sharding.md, "Moving buckets").
struct StartMove {
    std::uint32_t first = 0, count = 1;
    bool cancel = false;
    std::string to;
};
// move_step: one step of a move, from the source shard's leader (node/move_steps.h).
struct MoveStepRequest {
    std::string step, mac;  // the encoded MoveBucket command, and its HMAC
};
// A command for the log. A take's session is the connection's, filled in by the node.
struct Write {
    queue::Command command;
    std::int64_t wait_ms = 0;  // take: wait this long for a task to come due (0: answer now)
};
using Body = std::variant<Ping, Hello, GetTask, GetStats, ListTasks, GetStatus, GetShards,
                          GetMembers, ChangeMember, BackupChunk, StartMove, MoveStepRequest, Write>;

struct Request {
    std::uint64_t id = 0;
    Op op = Op::ping;
    Body body;
    // Sharding (docs/sharding.md): `redirect` asks a node that does not serve the key to
    // answer wrong_shard instead of forwarding it; `forwarded` marks a request a node or
    // proxy relayed, which is never relayed again.
    bool redirect = false;
    bool forwarded = false;
};

// Why a frame was refused. `id` is the request's id when it could be read (else 0),
// so the client can match the error to its request.
struct RequestError {
    queue::Code code = queue::Code::bad_request;
    std::string message;
    std::uint64_t id = 0;
};

// The (queue, key) a request is about, for the ops that name one task (put, get, delete,
// touch, ack, release, bury): what a sharded deployment routes by. nullopt for the others.
std::optional<std::pair<std::string_view, std::string_view>> request_key(const Request& req);

// Decodes one frame body (the bytes after the length prefix). Unknown fields are
// ignored; a known field of the wrong type, a missing required field, or a value over a
// limit is refused with a message naming the field.
std::variant<Request, RequestError> decode_request(std::string_view frame, const Limits& limits);

}  // namespace dueq::net
