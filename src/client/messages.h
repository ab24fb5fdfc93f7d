// Typed requests and responses, one pair per op of docs/protocol.md.
//
// Conventions: `queue` defaults to "default"; a std::optional field that is empty is
// not sent, so the server applies its default. Keys are raw bytes. A payload is one
// already-encoded msgpack value (see client/payload.h to build one from JSON); an empty
// payload string is sent as msgpack nil. Times are ms since the Unix epoch, durations ms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/status.h"
#include "wire/protocol.h"

namespace dueq::client {

inline constexpr const char* kDefaultQueue = wire::kDefaultQueue.data();

struct PingRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::ping);
};
using PingResponse = Empty;

struct HelloRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::hello);
    std::optional<uint64_t> session;  // resume this session (within session_grace_ms)
    std::optional<std::string> token;
};
struct HelloResponse {
    uint64_t session = 0;
    std::string node_id;
    std::string leader;  // "host:port", empty when the node knows no leader
    int64_t protocol = 0;
    std::string mode;  // wire::kNodeModes, or "proxy"
    std::string version;  // the server's build: "0.1.0 (git revision)"
};

struct QueueSettings {
    int64_t lead_ms = 0;
    int64_t ttr_ms = 0;
    int64_t max_attempts = 0;
    int64_t retention_ms = 0;
    double late_share = 0;
    bool autonomous = false;  // served by a node cut off from the majority (docs/autonomy.md)
};

struct DeclareRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::declare);
    std::string queue = kDefaultQueue;
    std::optional<int64_t> lead_ms;
    std::optional<int64_t> ttr_ms;
    std::optional<int64_t> max_attempts;
    std::optional<int64_t> retention_ms;
    std::optional<double> late_share;
    std::optional<bool> autonomous;
};
struct DeclareResponse {
    QueueSettings settings;
};

enum class PutMode { upsert, insert, update };
std::string_view put_mode_name(PutMode mode);

struct PutRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::put);
    std::string queue = kDefaultQueue;
    std::string key;
    std::string payload;
    std::optional<int64_t> time;  // server default: now
    std::optional<PutMode> mode;  // server default: upsert
};
struct PutResponse {
    uint64_t version = 0;
};

struct GetRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::get);
    std::string queue = kDefaultQueue;
    std::string key;
    std::optional<std::string> consistency;  // "local" (server default) or "leader"
};
struct TaskInfo {
    std::string key;
    std::string payload;
    std::string status;  // ready | taken | buried | done
    int64_t time = 0;
    uint64_t attempts = 0;
    uint64_t version = 0;
    std::optional<int64_t> lease_until;  // only while taken
};
struct GetResponse {
    TaskInfo task;
};

struct DeleteRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::del);
    std::string queue = kDefaultQueue;
    std::string key;
};
using DeleteResponse = Empty;

struct TakeRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::take);
    std::string queue = kDefaultQueue;
    std::optional<uint32_t> count;       // server default 1, at most [limits] max_take_count
    std::optional<int64_t> timeout_ms;   // server default 0: answer at once
    std::optional<int64_t> ttr_ms;       // server default: the queue's ttr_ms
    std::optional<bool> release_on_disconnect;  // server default true
};
struct Task {
    std::string key;
    std::string payload;
    int64_t time = 0;
    uint64_t lease = 0;
    int64_t lease_until = 0;
    uint64_t attempts = 0;
};
struct TakeResponse {
    std::vector<Task> tasks;  // empty when nothing came due within timeout_ms
};

struct TouchRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::touch);
    std::string queue = kDefaultQueue;
    std::string key;
    uint64_t lease = 0;
    std::optional<int64_t> ttr_ms;
};
struct TouchResponse {
    int64_t lease_until = 0;
};

struct AckRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::ack);
    std::string queue = kDefaultQueue;
    std::string key;
    uint64_t lease = 0;
    std::optional<std::string> payload;  // new payload; absent keeps the old one
    std::optional<int64_t> time;         // ready again at this time; absent: done
};
struct AckResponse {
    uint64_t version = 0;
};

struct ReleaseRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::release);
    std::string queue = kDefaultQueue;
    std::string key;
    uint64_t lease = 0;
    std::optional<int64_t> delay_ms;
};
using ReleaseResponse = Empty;

struct BuryRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::bury);
    std::string queue = kDefaultQueue;
    std::string key;
    uint64_t lease = 0;
};
using BuryResponse = Empty;

struct KickRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::kick);
    std::string queue = kDefaultQueue;
    uint64_t count = 1;
    std::optional<std::string> key;  // present: kick this buried task (count unused)
};
struct KickResponse {
    uint64_t kicked = 0;
};

struct StatsRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::stats);
    std::optional<std::string> queue;  // absent: every known queue
    std::optional<std::string> consistency;  // "local" (server default) or "leader"
};
struct QueueStats {
    std::string queue;
    uint64_t ready = 0;
    uint64_t taken = 0;
    uint64_t buried = 0;
    uint64_t done = 0;
    uint64_t due_now = 0;
    std::optional<int64_t> next_due;
    std::optional<int64_t> oldest_late;
};
struct StatsResponse {
    std::vector<QueueStats> queues;  // one entry when a queue was named
    std::string raw;                 // the whole result map as msgpack, for tools
};

// One page of a queue's tasks in one status (docs/protocol.md, list).
struct ListRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::list);
    std::string queue = kDefaultQueue;
    std::string status;                 // wire::kListStatuses: ready | late | taken | buried | done
    std::optional<uint64_t> count;      // 1..1000; absent: the server's 100
    std::optional<std::string> after;   // the previous page's after
    std::optional<int64_t> after_time;  // and after_time
    std::optional<std::string> consistency;
};
struct ListedTask {
    std::string key;
    std::string status;
    int64_t time = 0;
    uint64_t attempts = 0;
    int64_t lease_until = 0;  // taken only
};
struct ListResponse {
    std::vector<ListedTask> tasks;
    // Where the next page starts; absent on the last page.
    std::optional<std::string> after;
    int64_t after_time = 0;
};

// One chunk of a backup (docs/operations.md, "Backing up"): without `backup`, the node
// starts one and answers its chunk 0; then chunk `seq` of it, on the same connection.
struct BackupRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::backup);
    uint64_t backup = 0;  // 0: start one
    uint32_t seq = 0;
};
struct BackupResponse {
    uint64_t backup = 0;
    uint32_t seq = 0;
    uint64_t index = 0, term = 0;  // the applied entry the backup is a view of
    int64_t time = 0;              // its log time
    std::string cluster, node_id, version;
    std::string data;  // chunk 0: the store-wide record; then (key, sealed task) pairs
    bool last = false;
};

struct StatusRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::status);
};
struct PeerInfo {
    std::string id, peer;  // member id and peer address
    bool connected = false;
    uint64_t match = 0, lag = 0;  // as the leader sees it; 0 on followers
};
struct AutonomyInfo {  // docs/autonomy.md
    uint64_t overlay = 0, served = 0;
    uint64_t merged = 0, taken_over = 0, kept = 0, both_sides = 0;  // the latest heal
};
struct StatusResponse {
    std::string node_id;
    std::string role;  // leader | follower | candidate | standalone (proxy: "proxy")
    uint64_t term = 0;
    std::string leader;     // its client address; empty when unknown (nil on the wire)
    std::string leader_id;  // its member id
    uint64_t commit_index = 0;
    uint64_t applied_index = 0;
    uint64_t last_index = 0;
    std::vector<PeerInfo> peers;
    std::string mode;  // wire::kNodeModes: normal | autonomous | merging
    int64_t mode_ms = 0;
    AutonomyInfo autonomy;
    uint64_t tasks = 0, pending = 0, peer_input_dropped = 0;
    std::string version;  // the node's build: "0.1.0 (git revision)"
    std::string raw;  // the whole result map as msgpack, for tools
};

// Membership (docs/operations.md).
struct MembersRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::members);
};
struct MemberInfo {
    std::string name;
    uint64_t raft_id = 0;
    std::string role;  // voter | learner
    std::string peer, client, admin;
    bool connected = false;
    uint64_t match = 0, lag = 0;  // as the leader sees it; 0 elsewhere
};
struct MembersResponse {
    std::vector<MemberInfo> members;
    std::string leader_id;
    uint64_t membership_index = 0;
    bool pending = false;  // the membership in force is not committed yet
};
struct MemberAddRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::member_add);
    std::string name, peer, client, admin;  // admin may be empty
};
struct MemberPromoteRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::member_promote);
    std::string name;
};
struct MemberRemoveRequest {
    static constexpr std::string_view op = wire::op_name(wire::Op::member_remove);
    std::string name;
};
struct MemberChangeResponse {
    std::string name;
    uint64_t raft_id = 0;
};

// Which requests the client may resend by itself after a broken connection, where it
// cannot know whether the server applied them. See Client in client/client.h.
constexpr bool always_safe_to_resend(std::string_view op) {
    const auto known = wire::op_from_name(op);
    return known && wire::op_info(*known).safe_to_resend;
}

}  // namespace dueq::client
