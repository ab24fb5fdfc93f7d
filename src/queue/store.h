// The task store of one replica: every queue, task, index and lease.
//
// Its contract is commands in, state out: apply() and apply_batch() take commands at
// their log times (apply_batch as the log holds them), the reads and drain_changes() give the state
// back, and a restart puts what storage kept back with a Store::Loader (store_loader.h). How it
// lays out and loads its memory is its own: each store reserves its own range of address space for
// its task records (task_region.h), and given a batch it loads what the next commands will read
// while it applies the ones before.
//
// Pure and deterministic: no clock, no I/O, no threads. Time enters only as the log time
// of apply() and advance(); the same commands at the same times give the same state on
// every replica. Not thread-safe: one owner (the node's event-loop thread) calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "queue/command.h"
#include "queue/store_defect.h"
#include "wire/limits.h"

namespace dueq::queue {

// A read-only copy of one task, as get returns it.
struct TaskView {
    std::string queue, key, payload;
    Status status = Status::ready;
    Millis time = 0;
    std::uint32_t attempts = 0;
    std::uint64_t version = 0;
    // (log time << 16) | counter of the last write (put, ack, merge); per key it only grows.
    // What a merge orders by (docs/autonomy.md); takes and leases running out leave it.
    std::uint64_t hlc = 0;
    LeaseId lease = 0;       // 0 unless taken
    Millis lease_until = 0;  // 0 unless taken
    SessionId owner = 0;     // 0 unless taken
    bool release_on_disconnect = false;
    Millis not_before = 0;  // ready but held back (release with delay_ms) until this time
    Millis done_until = 0;  // done: removed at this time
};

struct QueueStats {
    std::uint64_t ready = 0, taken = 0, buried = 0, done = 0;
    std::uint64_t due_now = 0;          // ready and due at `now`, counted up to a cap
    bool due_now_capped = false;        // due_now stopped counting at the cap
    std::optional<Millis> next_due;     // smallest time - lead_ms among ready tasks
    std::optional<Millis> oldest_late;  // smallest time among ready tasks with time < now
    std::uint64_t late_now = 0;         // ready with time < now, counted up to the cap
    bool late_now_capped = false;
};

struct ListedTask {
    std::string key;
    Status status = Status::ready;
    Millis time = 0;
    std::uint32_t attempts = 0;
    Millis lease_until = 0;  // taken only
    Millis order = 0;        // the time the listing is ordered by
};
struct ListPage {
    std::vector<ListedTask> tasks;
    bool more = false;  // tasks after the last one: ask again from (order, key) of it
};

// What a queue has done since this replica's store was built (start, snapshot install);
// every replica counts the same applied commands, so any node shows the cluster's rates.
// Not persisted and not part of the replicated state.
struct QueueCounters {
    std::uint64_t puts = 0;
    std::uint64_t takes = 0;       // tasks handed out under a lease
    std::uint64_t late_takes = 0;  // of them, tasks already late when taken
    std::uint64_t acks = 0;
    std::uint64_t lease_expiries = 0;
    std::uint64_t buries = 0;  // by bury, or by running out of attempts
};

// A Declare of this queue sets the defaults of every queue (clients cannot name it: a
// queue name on the wire is never empty).
inline constexpr std::string_view kDefaultsQueue = "";

// Limits the store enforces on commands. A replicated store must use the same ones on
// every replica: the node checks its configured [limits] before proposing, and applies
// with kApplyLimits, the largest any config may set (what a log record holds).
struct StoreLimits {
    std::size_t max_key_bytes = limits::kMaxKeyBytes.dflt;
    std::size_t max_payload_bytes = limits::kMaxPayloadBytes.dflt;
    std::uint32_t max_take_count = limits::kMaxTakeCount.dflt;
    std::uint32_t max_kick_count = limits::kMaxKickCount;
    std::size_t max_queue_name_bytes = limits::kMaxQueueNameBytes;
};
inline constexpr StoreLimits kApplyLimits{limits::kMaxKeyBytes.max, limits::kMaxPayloadBytes.max,
                                          limits::kMaxTakeCount.max, limits::kMaxKickCount,
                                          limits::kMaxQueueNameBytes};

// Lease ids a node grants in autonomous mode have this bit set (the majority's counter
// never gets there), so a lease from one side of a partition never fences the other's.
inline constexpr LeaseId kAutonomousLeases = LeaseId{1} << 63;

// One key as an autonomous node left it (docs/autonomy.md): what it writes to its overlay
// and later proposes as a Merge.
struct OverlayRecord {
    std::optional<std::string> task;  // encoded; nullopt: deleted
    std::uint64_t hlc = 0;            // of the write (for a deletion, its own stamp)
    std::uint64_t base_hlc = 0;       // the key's hlc when the fork began (0: none)
    bool operator==(const OverlayRecord&) const = default;
};
std::string encode_overlay_record(const OverlayRecord& r);
std::optional<OverlayRecord> decode_overlay_record(std::string_view bytes);

// One command of a batch, encoded as the log holds it (command_codec.h), and the log time
// it is applied at.
struct LoggedCommand {
    std::string_view encoded;
    Millis now = 0;
};

class Store {
  public:
    class Loader;  // a restart's load: store_loader.h

    explicit Store(StoreLimits limits = {});
    ~Store();
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    // Applies one command at log time `now` (ms, never less than the previous call's).
    // First runs advance(now), then the command. A refused command (lease mismatch,
    // exists, not_found, bad_request) changes no state.
    Result apply(const Command& cmd, Millis now);
    // Decodes and applies each command of `batch` in order, exactly as apply() would,
    // and calls `done(i, command, result)` right after batch[i]. Stops early when `done`
    // returns false, or before a command that does not decode; returns how many commands
    // it applied. `done` may read the store, drain its changes and roll a fork back, but
    // not apply. While it applies one command, the memory the next ones will read loads.
    std::size_t apply_batch(
        std::span<const LoggedCommand> batch,
        const std::function<bool(std::size_t i, Command& command, Result& result)>& done);

    // Expires leases with lease_until <= now (attempts >= max_attempts -> buried, else
    // ready), ends delays, and removes done tasks past retention. Idempotent, and it
    // commutes with apply: advance(t1) then apply(c, t2 >= t1) == apply(c, t2). So a node
    // may call it on a timer without logging anything.
    void advance(Millis now);

    // Queue settings that apply to `queue` (the defaults if it was never declared). Every
    // setting is replicated state: a Declare sets it, and a Declare of the queue named ""
    // (kDefaultsQueue) sets the defaults of every queue. Nothing comes from a node's config.
    QueueSettings settings(std::string_view queue) const;
    QueueSettings default_settings() const;

    std::optional<TaskView> get(std::string_view queue, std::string_view key) const;
    // The due and late counts walk the due order up to `count_cap` tasks (no order
    // statistics in the trees): a `stats` op counts up to kStatsCountCap, a metrics scrape
    // up to kMetricsCountCap.
    static constexpr std::uint64_t kStatsCountCap = 10'000;
    static constexpr std::uint64_t kMetricsCountCap = 100'000;
    QueueStats stats(std::string_view queue, Millis now,
                     std::uint64_t count_cap = kStatsCountCap) const;
    QueueCounters counters(std::string_view queue) const;  // zero for an unknown queue
    // At most `limit` tasks of `queue` in `status` after the position (order, key) `after`
    // (from the first without it). O(log n + limit), whatever the queue holds.
    ListPage list(std::string_view queue, ListStatus status,
                  const std::optional<std::pair<Millis, std::string>>& after, std::size_t limit,
                  Millis now) const;
    // Where `key` stands in the order of `status` (its order time), if it is in that status.
    std::optional<Millis> list_position(std::string_view queue, ListStatus status,
                                        std::string_view key, Millis now) const;
    std::vector<std::string> queue_names() const;
    std::size_t task_count() const;

    // Earliest time > now at which advance() or a take could change something in
    // `queue` (a task comes due, a lease or delay runs out), or nullopt if none. Used
    // to wake blocking takes without polling. O(log n). Exact once advance(now) ran;
    // before that, a task whose lease or delay ended at or before `now` is not seen.
    std::optional<Millis> next_event(std::string_view queue, Millis now) const;
    // The same over every queue (for the node's advance timer; includes retention).
    // O(queues * log n).
    std::optional<Millis> next_event_any(Millis now) const;
    // True if a take on `queue` at `now` would hand out at least one task, counting the
    // leases and delays that end by `now` even if advance(now) has not run (one step per
    // such pending transition; O(log n) once advanced). May say true for a task that the
    // take buries because max_attempts was lowered below its attempts.
    bool has_due(std::string_view queue, Millis now) const;
    // How many tasks a take at `now` could hand out (what has_due() looks at), counted up
    // to `limit`: the leader wakes that many blocking takes, not every one.
    std::uint64_t count_due(std::string_view queue, Millis now, std::uint64_t limit) const;
    // The sessions that hold a lease taken with release_on_disconnect, each once, in id
    // order: a new leader gives each a grace period to come back (docs/semantics.md).
    // O(sessions * log leases).
    std::vector<SessionId> lease_holders() const;
    // Whether `session` holds such a lease. O(log leases).
    bool holds_leases(SessionId session) const;

    // Bytes the store holds beyond keys and payloads (task records, index nodes,
    // hash buckets), by its own accounting.
    std::size_t overhead_bytes() const;
    // What the tasks take: live records with their keys and payloads, the key table, the
    // leases and the queues; free blocks not counted, so deleting tasks lowers it. What the
    // node's store budget ([limits] max_store_bytes) is measured in.
    std::size_t memory_bytes() const;
    // The task records' range of address space (task_region.h): bytes in use, and its size
    // (its end is a wall: a store that reaches it cannot add a record).
    std::size_t region_bytes() const;
    std::size_t region_limit_bytes() const;
    // Key and payload bytes of one task (the record's size, less a fixed header), if it
    // exists: what a put that replaces it frees.
    std::optional<std::size_t> content_bytes(std::string_view queue, std::string_view key) const;

    // Test builds only (see StoreDefect); a no-op in others.
    void plant(StoreDefect defect);

    // ---- autonomous mode (docs/autonomy.md) ----

    // Starts a fork: from now on the store is this node's own, cut-off view. Commands
    // apply as usual on queues with `autonomous` set and get no_quorum on the others;
    // Declare and Merge are refused; takes hand out leases from `lease_base` on (which
    // must have kAutonomousLeases set). What changes is reported by drain_fork, never by
    // drain_changes. False (and nothing done) if changes are still undrained or a fork is
    // on.
    bool fork(LeaseId lease_base);
    bool forked() const;
    // A deleted key is remembered (a tombstone) for its queue's retention_ms, so that a
    // merge of an older write does not bring it back: the deletion's hlc, if it is. While
    // forked, a deletion the fork made counts too.
    std::optional<std::uint64_t> tombstone_hlc(std::string_view queue, std::string_view key) const;
    // Calls `fn` once for every (queue, key) the fork changed since the last call.
    void drain_fork(const std::function<void(std::string_view queue, std::string_view key,
                                             const OverlayRecord&)>& fn);
    // Ends the fork: every task, lease and counter is as fork() found it.
    void rollback();
    // While forked: puts a record of an earlier fork back (a restart in autonomous mode).
    // False if it does not decode or no fork is on.
    bool load_overlay(std::string_view queue, std::string_view key, const OverlayRecord& r);

    // ---- persistence (storage writes the applied state; restart loads it) ----

    // Calls `fn` once for every (queue, key) changed since the last call, with the task
    // as it is now, or nullptr-equivalent (nullopt) if it is gone; then forgets them.
    // `fn` may keep the encoded task (move it). Reports nothing while forked.
    void drain_changes(
        const std::function<void(std::string_view queue, std::string_view key,
                                 std::optional<std::string>&& encoded_task)>& fn);
    // Store-wide state that is not a task (next lease id, declared queue settings,
    // late_share counters), encoded; written beside the tasks at each applied index.
    std::string encode_meta() const;
    // The Raft group's membership, as the last applied configuration entry holds it
    // (raft::encode_membership; empty: none applied). Kept with the store-wide state.
    const std::string& membership() const;
    void set_membership(std::string encoded);
    // The buckets this shard sends or receives (MoveBucket commands), and the deployment's
    // bucket count they are of (0 before the first move).
    const shard::BucketMoves& bucket_moves() const;
    std::uint32_t move_bucket_count() const;
    // Whether this shard may answer a read of (queue, key): not while its bucket is between
    // owners (docs/sharding.md, "Moving buckets").
    bool key_readable(std::string_view queue, std::string_view key) const;
    // The lease id the next take will hand out (a move's chunk carries it: MoveBucket).
    LeaseId next_lease_id() const;
    // Every task and tombstone of `bucket` (of `bucket_count`), encoded as a snapshot holds
    // them: what a move's chunks carry (MovedRecord).
    void bucket_records(std::uint32_t bucket, std::uint32_t bucket_count,
                        const std::function<void(std::string_view queue, std::string_view key,
                                                 std::string_view record)>& fn) const;
    // Every task, encoded (for a snapshot of the whole store).
    // A Loader (store_loader.h) rebuilds a store from encode_meta() and the encoded tasks
    // drain_changes() or for_each_task() produced.
    void for_each_task(const std::function<void(std::string_view queue, std::string_view key,
                                                std::string_view encoded_task)>& fn) const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dueq::queue
