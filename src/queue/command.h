// Commands that change the task store, and what applying one returns.
//
// A command is plain data. The node validates client input (types, limits) before it
// builds a command; the store validates what depends on state (lease ids, modes) when
// it applies one. Commands are appended to the write-ahead log (and, later, to the Raft
// log) in the encoding of command_codec.h, and applied in log order at the log time the
// leader stamped on them, so every replica ends in the same state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/millis.h"
#include "shard/bucket_moves.h"
#include "wire/error_code.h"

namespace dueq::queue {

using Millis = dueq::Millis;  // common/millis.h
using LeaseId = std::uint64_t;
using SessionId = std::uint64_t;

enum class Status : std::uint8_t { ready = 0, taken = 1, buried = 2, done = 3 };
const char* to_string(Status s);

enum class PutMode : std::uint8_t { upsert = 0, insert = 1, update = 2 };

// What `list` lists (docs/protocol.md): tasks of one status, each in its own order —
// ready and late by time (late: ready with time < now), buried by time, taken by
// lease_until, done by when retention removes them. A ready task held back by a release
// delay is not listed as ready. In the order of wire::kListStatuses.
enum class ListStatus : std::uint8_t { ready, late, taken, buried, done };

// The wire's error codes (docs/protocol.md): the store produces some, the node adds the
// transport ones (bad_request, not_leader, too_large, ...).
using Code = wire::Code;
const char* to_string(Code c);  // "ok", "bad_request", ... as on the wire

// Settings of one queue. Unset fields of a Declare keep their current value.
struct QueueSettings {
    Millis lead_ms = 0;      // a ready task is due when time - lead_ms <= now
    Millis ttr_ms = 60'000;  // default lease length of a take
    // 0 = unlimited. Else a task is handed out at most this many times between acks: when
    // the last allowed attempt fails (lease runs out, release, ReleaseSession) the task is
    // buried instead of going back to ready (docs/semantics.md).
    std::uint32_t max_attempts = 0;
    Millis retention_ms = 3'600'000;  // how long a done task is kept (refuses put mode=insert)
    double late_share = 0.0;          // 0..1: share of takes reserved for late tasks
    // A node cut off from the majority keeps serving this queue on its own, and merges
    // what it did when the partition heals (docs/autonomy.md). Tasks may then run once
    // on each side, so a queue opts in.
    bool autonomous = false;
    bool operator==(const QueueSettings&) const = default;
};

struct Declare {
    std::string queue;
    std::optional<Millis> lead_ms, ttr_ms, retention_ms;
    std::optional<std::uint32_t> max_attempts;
    std::optional<double> late_share;
    std::optional<bool> autonomous;
};
struct Put {
    std::string queue, key;
    std::string payload;         // one msgpack value, encoded; stored verbatim
    std::optional<Millis> time;  // absent: due now (the log time)
    PutMode mode = PutMode::upsert;
};
struct Delete {
    std::string queue, key;
};
struct Take {
    std::string queue;
    std::uint32_t count = 1;
    std::optional<Millis> ttr_ms;  // absent: the queue's ttr_ms
    SessionId session = 0;
    bool release_on_disconnect = true;
};
struct Touch {
    std::string queue, key;
    LeaseId lease = 0;
    std::optional<Millis> ttr_ms;  // absent: the queue's ttr_ms, counted from now
};
struct Ack {
    std::string queue, key;
    LeaseId lease = 0;
    std::optional<std::string> payload;  // absent: keep the payload
    std::optional<Millis> time;          // present: ready again at that time; absent: done
};
struct Release {
    std::string queue, key;
    LeaseId lease = 0;
    Millis delay_ms = 0;  // not handed out again before now + delay_ms; time is kept
};
struct Bury {
    std::string queue, key;
    LeaseId lease = 0;
};
struct Kick {
    std::string queue;
    std::uint32_t count = 1;
    // Present: kick this buried task only (count is not used); absent: the first `count`.
    std::optional<std::string> only_key;
};
// The session is gone for good (its grace period ran out): every task it holds with
// release_on_disconnect goes back to ready, as if its lease had run out.
struct ReleaseSession {
    SessionId session = 0;
};

// A write an autonomous node made while cut off (docs/autonomy.md), proposed when it
// follows a leader again: per key, the write with the larger hlc wins.
struct Merge {
    std::string queue, key;
    std::optional<std::string> task;  // the task as that node left it (encoded); nullopt: deleted
    std::uint64_t hlc = 0;            // of that write (a deletion's own stamp for nullopt)
    std::uint64_t base_hlc = 0;       // the key's hlc when that node was cut off (0: none)
    std::uint64_t origin = 0;         // raft id of the node that made it
};

// Nothing but time: the leader logs one when leases or delays have run out and no other
// command would carry the store's time past them (every replica then moves together).
struct Advance {};

// A record of a bucket's task as the source shard's store holds it (Store::bucket_records):
// a task, lease and all, or a deleted key's tombstone; encoded as in a snapshot.
struct MovedRecord {
    std::string queue, key, record;
    bool operator==(const MovedRecord&) const = default;
};

// One step of a bucket's move between shards (shard/bucket_moves.h, docs/sharding.md
// "Moving buckets"), in the log of the shard that takes it.
struct MoveBucket {
    shard::MoveCommand step;
    std::uint32_t bucket_count = 1;    // the deployment's: which keys are the bucket's
    std::vector<MovedRecord> records;  // a chunk's
    // A chunk: the source's next lease id. The destination's lease ids go on above it, so
    // that no id a key's leases had on the source is handed out again for it (a holder
    // whose lease ran out cannot ack a later lease of the same id).
    LeaseId lease_floor = 0;
    // A chunk: the source leader's clock when it sent the chunk (0: not stamped). The
    // destination applies the chunk at its own entry time `now`, and a lease carried in it
    // ends max(0, now - sent_at) later: no earlier in real time than on the source, however
    // far the destination's clock is ahead (the transit time is the price).
    Millis sent_at = 0;
};

using Command = std::variant<Declare, Put, Delete, Take, Touch, Ack, Release, Bury, Kick,
                             ReleaseSession, Advance, Merge, MoveBucket>;

// A task as handed to a client by take.
struct TakenTask {
    std::string key, payload;
    Millis time = 0;
    LeaseId lease = 0;
    Millis lease_until = 0;
    std::uint32_t attempts = 0;
};

// What applying a Merge did.
enum class MergeOutcome : std::uint8_t {
    none = 0,
    taken_over,  // the merged write was newer: it is the task now
    kept,        // the state here was as new or newer: the merged write was dropped
};

// What applying a command returned. Fields beyond code/message are filled by the
// commands that produce them (see store.h).
struct Result {
    Code code = Code::ok;
    std::string message;                      // empty when ok
    std::uint64_t version = 0;                // put, ack
    std::uint64_t hlc = 0;                    // put, ack, delete: the stamp merges order by
    Millis ack_margin = 0;                    // ack: the task's time minus the ack's (ms)
    Millis lease_until = 0;                   // touch
    std::uint32_t kicked = 0;                 // kick
    std::vector<TakenTask> tasks;             // take
    QueueSettings settings;                   // declare
    MergeOutcome merge = MergeOutcome::none;  // merge
    bool both_sides_wrote = false;            // merge: the key was written on both sides of the cut
    shard::MoveOutcome move = shard::MoveOutcome::applied;  // move_bucket (code ok unless refused)
    static Result error(Code c, std::string msg) {
        Result r;
        r.code = c;
        r.message = std::move(msg);
        return r;
    }
    bool ok() const { return code == Code::ok; }
};

}  // namespace dueq::queue
