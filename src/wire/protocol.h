// The client protocol of docs/protocol.md in one place: its ops, the name of every field
// a request or an answer carries, the words some fields take, and the table of request
// fields (type and bounds) that the node's decoder checks against. The node, the C++
// client, dueq-proxy and the tools spell a field or an op only through this header;
// tests/wire/round_trip_test.cpp sends every op through both halves. Header-only, so the
// client library needs nothing of the server's.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "wire/limits.h"

namespace dueq::wire {

inline constexpr std::uint32_t kProtocolVersion = 1;
// The queue of a request that names none.
inline constexpr std::string_view kDefaultQueue = "default";

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
    status,
    shards,
    members,
    member_add,
    member_promote,
    member_remove,
    list,
    backup,
    move,
    move_cancel,
    move_step,
};

struct OpInfo {
    Op op;
    std::string_view name;
    bool writes;          // goes through the log (a command), else the node answers itself
    bool safe_to_resend;  // a client may resend it after a broken connection by itself
    bool names_task;      // carries (queue, key): what a sharded deployment routes by
    bool needs_lease;     // acts on a taken task
};

// clang-format off
inline constexpr std::array<OpInfo, 24> kOps{{
    //  op           name       writes resend task   lease
    {Op::ping,    "ping",    false, true,  false, false},
    {Op::hello,   "hello",   false, true,  false, false},
    // A declare writes, but the same settings declared twice leave the same state.
    {Op::declare, "declare", true,  true,  false, false},
    {Op::put,     "put",     true,  false, true,  false},
    {Op::get,     "get",     false, true,  true,  false},
    {Op::del,     "delete",  true,  false, true,  false},
    {Op::take,    "take",    true,  false, false, false},
    {Op::touch,   "touch",   true,  false, true,  true},
    {Op::ack,     "ack",     true,  false, true,  true},
    {Op::release, "release", true,  false, true,  true},
    {Op::bury,    "bury",    true,  false, true,  true},
    {Op::kick,    "kick",    true,  false, false, false},
    {Op::stats,   "stats",   false, true,  false, false},
    {Op::status,  "status",  false, true,  false, false},
    {Op::shards,  "shards",  false, true,  false, false},
    // Membership (docs/operations.md): a change goes through the log, but as a
    // configuration entry the node proposes itself, not as a command.
    {Op::members,        "members",        false, true,  false, false},
    {Op::member_add,     "member_add",     false, false, false, false},
    {Op::member_promote, "member_promote", false, false, false, false},
    {Op::member_remove,  "member_remove",  false, false, false, false},
    {Op::list,           "list",           false, true,  false, false},
    // A stream of chunks in order: a resent request would skip one.
    {Op::backup,         "backup",         false, false, false, false},
    // Bucket moves (docs/sharding.md): the operator's start and cancel, to the source
    // shard's leader, and one step of a move from the source's leader to the destination's.
    // Each goes through the log as a command the node makes; a step is safe to resend (its
    // generation and number make a repeat change nothing) but only the node resends it.
    {Op::move,           "move",           false, false, false, false},
    {Op::move_cancel,    "move_cancel",    false, false, false, false},
    {Op::move_step,      "move_step",      false, false, false, false},
}};
// clang-format on

constexpr const OpInfo& op_info(Op op) {
    return kOps[static_cast<std::size_t>(op)];
}
constexpr std::string_view op_name(Op op) {
    return op_info(op).name;
}
constexpr std::optional<Op> op_from_name(std::string_view name) {
    for (const auto& o : kOps)
        if (o.name == name) return o.op;
    return std::nullopt;
}
constexpr bool kOpsInEnumOrder = [] {
    for (std::size_t i = 0; i < kOps.size(); ++i)
        if (static_cast<std::size_t>(kOps[i].op) != i) return false;
    return true;
}();
static_assert(kOpsInEnumOrder, "kOps is indexed by Op");

// Every field name of the protocol. Several answers reuse a name (`tasks` is a take's
// array and a count in status); docs/protocol.md gives each answer's fields.
namespace field {
// The envelope.
inline constexpr std::string_view id = "id", op = "op", ok = "ok", error = "error";
inline constexpr std::string_view code = "code", message = "message", leader = "leader";
// Requests.
inline constexpr std::string_view queue = "queue", key = "key", payload = "payload";
inline constexpr std::string_view time = "time", ttr_ms = "ttr_ms", timeout_ms = "timeout_ms";
inline constexpr std::string_view delay_ms = "delay_ms", lead_ms = "lead_ms";
inline constexpr std::string_view retention_ms = "retention_ms", lease = "lease";
inline constexpr std::string_view session = "session", count = "count";
inline constexpr std::string_view max_attempts = "max_attempts", late_share = "late_share";
inline constexpr std::string_view autonomous = "autonomous";
inline constexpr std::string_view release_on_disconnect = "release_on_disconnect";
inline constexpr std::string_view mode = "mode", consistency = "consistency";
inline constexpr std::string_view token = "token", redirect = "redirect";
inline constexpr std::string_view forwarded = "forwarded";
inline constexpr std::string_view after = "after", after_time = "after_time";  // list
inline constexpr std::string_view backup = "backup", seq = "seq";  // backup (answers too)
// Answers: hello, declare, put/ack, touch, kick, get, take.
inline constexpr std::string_view node_id = "node_id", protocol = "protocol";
inline constexpr std::string_view settings = "settings", version = "version";
inline constexpr std::string_view lease_until = "lease_until", kicked = "kicked";
inline constexpr std::string_view task = "task", tasks = "tasks", status = "status";
inline constexpr std::string_view attempts = "attempts";
// stats.
inline constexpr std::string_view queues = "queues", ready = "ready", taken = "taken";
inline constexpr std::string_view buried = "buried", done = "done", due_now = "due_now";
inline constexpr std::string_view next_due = "next_due", oldest_late = "oldest_late";
// status.
inline constexpr std::string_view role = "role", term = "term", leader_id = "leader_id";
inline constexpr std::string_view commit_index = "commit_index";
inline constexpr std::string_view applied_index = "applied_index";
inline constexpr std::string_view last_index = "last_index", peers = "peers", peer = "peer";
inline constexpr std::string_view connected = "connected", match = "match", lag = "lag";
inline constexpr std::string_view mode_ms = "mode_ms", autonomy = "autonomy";
inline constexpr std::string_view overlay = "overlay", served = "served", merged = "merged";
inline constexpr std::string_view taken_over = "taken_over", kept = "kept";
inline constexpr std::string_view both_sides = "both_sides", pending = "pending";
inline constexpr std::string_view peer_input_dropped = "peer_input_dropped";
// shards, and status from dueq-proxy.
inline constexpr std::string_view buckets = "buckets", hash = "hash", shard = "shard";
inline constexpr std::string_view shards = "shards", name = "name", members = "members";
inline constexpr std::string_view client = "client", map_version = "map_version";
inline constexpr std::string_view moved = "moved", moves = "moves", phase = "phase";
inline constexpr std::string_view gen = "gen", bucket = "bucket";
// move_step (the answer: outcome, phase, gen); move and move_cancel answer count.
inline constexpr std::string_view step = "step", mac = "mac", outcome = "outcome";
// members and member_*: also name, peer, client, role, match, lag, connected, pending.
inline constexpr std::string_view raft_id = "raft_id", admin = "admin";
inline constexpr std::string_view membership_index = "membership_index";
// backup (besides backup, seq, term, time, node_id and version).
inline constexpr std::string_view index = "index", cluster_id = "cluster_id";
inline constexpr std::string_view records = "records", last = "last";
}  // namespace field

// The words some fields take.
namespace word {
inline constexpr std::string_view upsert = "upsert", insert = "insert", update = "update";
inline constexpr std::string_view local = "local", leader = "leader";            // consistency
inline constexpr std::string_view normal = "normal", autonomous = "autonomous";  // mode
inline constexpr std::string_view merging = "merging";
inline constexpr std::string_view proxy = "proxy";      // role and mode of dueq-proxy
inline constexpr std::string_view fnv1a64 = "fnv1a64";  // shards: hash
inline constexpr std::string_view voter = "voter", learner = "learner";  // members: role
// list: status
inline constexpr std::string_view ready = "ready", late = "late", taken = "taken";
inline constexpr std::string_view buried = "buried", done = "done";
}  // namespace word

// The words of `mode` in a put and of `consistency` in a get or stats, in order.
inline constexpr std::array<std::string_view, 3> kPutModes{word::upsert, word::insert,
                                                           word::update};
inline constexpr std::array<std::string_view, 2> kConsistencies{word::local, word::leader};
// The words of `status` in a list, in order (queue::ListStatus).
inline constexpr std::array<std::string_view, 5> kListStatuses{word::ready, word::late, word::taken,
                                                               word::buried, word::done};
// What `mode` in hello and status may be.
inline constexpr std::array<std::string_view, 3> kNodeModes{word::normal, word::autonomous,
                                                            word::merging};

// What a request field holds, as the node's decoder checks it.
enum class FieldType : std::uint8_t {
    name,      // a non-empty str or bin, at most max_queue_name_bytes
    task_key,  // a non-empty str or bin, at most [limits] max_key_bytes
    payload,   // any one msgpack value, at most [limits] max_payload_bytes encoded
    time,      // an integer, ms since the Unix epoch
    duration,  // a non-negative integer (ms), at most `max`
    count,     // a non-negative integer, at most `max`
    boolean,
    share,  // a number in 0..1
    word,   // one of `words`
    text,   // a str
    blob,   // a bin or str, at most `max` bytes
};

struct RequestField {
    std::string_view name;
    FieldType type;
    std::uint64_t max = UINT64_MAX;             // duration and count
    std::span<const std::string_view> words{};  // word
};

// Every field a request may carry besides `id` and `op` (unknown fields are ignored).
// Which op reads which, and which it requires: docs/protocol.md.
// clang-format off
inline constexpr std::array<RequestField, 34> kRequestFields{{
    {field::queue,                 FieldType::name},
    {field::key,                   FieldType::task_key},
    {field::payload,               FieldType::payload},
    {field::time,                  FieldType::time},
    {field::ttr_ms,                FieldType::duration},
    {field::timeout_ms,            FieldType::duration, limits::kMaxTakeTimeoutMs},
    {field::delay_ms,              FieldType::duration},
    {field::lead_ms,               FieldType::duration},
    {field::retention_ms,          FieldType::duration},
    {field::lease,                 FieldType::count},
    {field::session,               FieldType::count},
    {field::count,                 FieldType::count, UINT32_MAX},  // take: also max_take_count
    {field::max_attempts,          FieldType::count, UINT32_MAX},
    {field::late_share,            FieldType::share},
    {field::autonomous,            FieldType::boolean},
    {field::release_on_disconnect, FieldType::boolean},
    {field::redirect,              FieldType::boolean},
    {field::forwarded,             FieldType::boolean},
    {field::mode,                  FieldType::word, 0, kPutModes},
    {field::consistency,           FieldType::word, 0, kConsistencies},
    {field::token,                 FieldType::text},
    {field::name,                  FieldType::name},  // member_*: the member's [node] id
    {field::peer,                  FieldType::text},
    {field::client,                FieldType::text},
    {field::admin,                 FieldType::text},
    {field::status,                FieldType::word, 0, kListStatuses},  // list
    {field::after,                 FieldType::task_key},
    {field::after_time,            FieldType::time},
    {field::backup,                FieldType::count},  // backup
    {field::seq,                   FieldType::count, UINT32_MAX},
    {field::bucket,                FieldType::count, limits::kMaxBuckets - 1},  // move*
    {field::shard,                 FieldType::name},                            // move
    {field::step,                  FieldType::blob, limits::kMaxFrameBytes.max},  // move_step
    {field::mac,                   FieldType::blob, 64},
}};
// clang-format on

// The position of `name` in kRequestFields, or kRequestFields.size() (an unknown field).
constexpr std::size_t request_field_index(std::string_view name) {
    for (std::size_t i = 0; i < kRequestFields.size(); ++i)
        if (kRequestFields[i].name == name) return i;
    return kRequestFields.size();
}

}  // namespace dueq::wire
