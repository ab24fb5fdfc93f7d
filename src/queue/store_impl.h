// The inside of Store: queues, their trees, the lookup table, leases and the event
// calendar. Internal to src/queue. StoreState's members are in store_state.cpp (queues,
// tasks, tombstones, time) and store_records.cpp (tasks as records: loading, the change
// drains, the fork's journal); the commands are in store_commands.cpp, the encodings in
// task_codec.cpp, a restart's bulk load in store_loader.cpp; Store itself is in store.cpp
// and store_query.cpp (reads).
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "queue/store.h"
#include "queue/task.h"
#include "queue/task_table.h"

namespace dueq::queue::detail {

// Times and durations the store accepts in commands. Bounding them keeps every sum of a
// time and a duration, and every hlc (time << 16), inside int64.
inline constexpr Millis kMaxTime = (Millis{1} << 46) - 1;      // ~ year 4200
inline constexpr Millis kMaxDuration = (Millis{1} << 40) - 1;  // ~ 34 years
inline constexpr std::int64_t kShareScale = 1'000'000;         // late_share in ppm
// A log time comes from the leader's clock. Clamped, any time the store derives from it
// fits the task record's 48-bit fields (task.h).
inline Millis clamp_log_time(Millis t) {
    return std::clamp(t, -kMaxTime, kMaxTime);
}
inline constexpr Millis kNoEvent = std::numeric_limits<Millis>::max();

inline Millis sat_add(Millis a, Millis b) {
    Millis r;
    if (__builtin_add_overflow(a, b, &r)) {
        return b > 0 ? std::numeric_limits<Millis>::max() : std::numeric_limits<Millis>::min();
    }
    return r;
}

// What a Declare set explicitly; unset fields follow the declared defaults.
struct DeclaredSettings {
    std::optional<Millis> lead_ms, ttr_ms, retention_ms;
    std::optional<std::uint32_t> max_attempts;
    std::optional<double> late_share;
    std::optional<bool> autonomous;
    bool operator==(const DeclaredSettings&) const = default;
};

struct Queue {
    explicit Queue(TaskRegion& region)
        : ready(region), delayed(region), buried(region), taken(region), done(region) {}

    std::string name;
    std::uint16_t id = 0;
    DeclaredSettings declared;
    QueueSettings settings;     // effective: declared over declared defaults over built-in
    std::int64_t late_ppm = 0;  // settings.late_share in parts per million
    // Take-order credit for late tasks, in ppm (see pick_for_take). Persisted in meta.
    std::int64_t late_credit = 0;

    TimeTree ready;   // due order: (time, key)
    AuxTree delayed;  // (not_before, key)
    TimeTree buried;  // kick order: (time, key)
    AuxTree taken;    // (lease_until, key)
    AuxTree done;     // (done_until, key)

    Millis calendar_at = kNoEvent;  // this queue's entry in Impl::calendar
    QueueCounters counters;
};

struct LeaseRec {
    LeaseId lease = 0;
    SessionId owner = 0;
    bool release_on_disconnect = false;
};

// Index of the leases a session holds with release_on_disconnect, in lease order.
struct SessionLease {
    SessionId session;
    LeaseId lease;
    Task* task;
    bool operator<(const SessionLease& o) const {
        return session != o.session ? session < o.session : lease < o.lease;
    }
};

// A deleted key, remembered for its queue's retention_ms (as a done task is) so that a
// merge of an older write from a cut-off node does not bring it back (docs/autonomy.md).
struct Tombstone {
    std::uint64_t hlc = 0;  // of the deletion
    Millis until = 0;
};

// What a fork (Store::fork) keeps to undo itself: the state before the fork of every task
// it touched, and the store-wide values it may move.
struct ForkJournal {
    struct Before {
        std::optional<std::string> task;  // encoded; nullopt: there was no such task
        std::uint64_t hlc = 0;            // the task's hlc then (0: none)
    };
    std::map<std::pair<std::uint16_t, std::string>, Before> before;
    // Deletions in the fork: the hlc the deletion is merged at.
    std::map<std::pair<std::uint16_t, std::string>, std::uint64_t> deleted_at;
    Millis now = 0;
    LeaseId next_lease = 0;
    std::vector<std::int64_t> late_credit;  // by queue id
};

struct StoreState;

// A restart's load (Store::Loader): tasks installed meanwhile wait here and are linked
// into their trees at the end, sorted, each at the end of its tree, instead of one search
// from the root per task (store_loader.cpp).
//
// Each waiting task has its sort item, made when it is installed (its record is in cache
// then; a pass over ten million records afterwards costs about 0.7 s). Sorted by (queue,
// tree, the tree's time), then by load order: a load reads each queue's tasks in key
// order, so ties on time stay in key order, the trees' own tie-break. An item names its
// task by its place in `tasks_`, which keeps it at 16 bytes, and std::sort needs no second
// buffer as std::stable_sort would.
class BulkLinks {
  public:
    explicit BulkLinks(std::size_t tasks);
    bool empty() const { return tasks_.empty(); }
    void add(StoreState& s, Task* t);
    // Links every waiting task into its tree and updates the calendar.
    void link_all(StoreState& s);

  private:
    struct Item {
        Millis at;
        std::uint32_t seq;
        std::uint16_t queue_id;
        std::uint8_t state;
    };
    static_assert(sizeof(Item) == 16);
    std::vector<Task*, HugePageAllocator<Task*>> tasks_;
    std::vector<Item, HugePageAllocator<Item>> items_;  // as tasks_
};

// Everything the store holds. Store::Impl is this under the name store.h declares; the
// state is a detail type of its own so helpers in .cpp files may name it.
struct StoreState {
    TaskRegion region;        // first member: outlives every task and tree
    TaskArena arena{region};  // outlives every task
    StoreLimits limits;
    StoreDefect planted = StoreDefect::none;  // set only in DUEQ_PLANTED_BUGS builds
    DeclaredSettings declared_defaults;  // Declare of kDefaultsQueue; persisted in meta
    // The group's membership as the last configuration entry applied left it (encoded by
    // the Raft layer; the store only keeps it): persisted in meta, so that it travels with
    // the applied state, in snapshots too.
    std::string membership;
    // The buckets this shard sends or receives (docs/sharding.md, "Moving buckets"), and the
    // deployment's bucket count they are of (0 until the first move step): persisted in
    // meta, so that they travel with the applied state, in snapshots too.
    shard::BucketMoves moves;
    std::uint32_t move_bucket_count = 0;
    // Whether t's bucket is moving or moved (its tasks are here but not this shard's to hand
    // out or change): takes and kicks pass over it.
    bool hidden_from_take(const Queue& q, const Task& t) const;

    std::map<std::string, std::unique_ptr<Queue>, std::less<>> queues_by_name;
    std::vector<Queue*> queues;  // by id; ids are local (not persisted)

    TaskTable table;
    std::unordered_map<const Task*, LeaseRec> leases;  // lookup only, never iterated
    std::set<SessionLease> session_leases;

    // (earliest lease_until / not_before / done_until of a queue, queue id): lets
    // advance() visit only the queues that have something to do.
    std::set<std::pair<Millis, std::uint16_t>> calendar;

    Millis now = std::numeric_limits<Millis>::min();  // greatest time seen by advance()
    LeaseId next_lease = 1;

    std::vector<std::pair<std::uint16_t, std::string>> changes;

    std::unique_ptr<ForkJournal> fork;  // set while forked (autonomous mode)

    // Deleted keys (never touched by a fork: it keeps its deletions in its journal).
    std::map<std::pair<std::uint16_t, std::string>, Tombstone> tombstones;
    std::set<std::tuple<Millis, std::uint16_t, std::string>> tombstone_expiry;

    explicit StoreState(StoreLimits l) : limits(l) {}
    ~StoreState();  // returns every task to the arena
    StoreState(const StoreState&) = delete;
    StoreState& operator=(const StoreState&) = delete;

    // ---- queues ----
    Queue* find_queue(std::string_view name) const;
    const Task* find_task(std::string_view queue, std::string_view key) const;
    Queue* get_or_create_queue(std::string_view name);  // nullptr if kMaxQueues reached
    QueueSettings base_settings() const;
    void recompute_settings(Queue& q);
    void update_calendar(Queue& q);

    // ---- tasks ----
    // Calls fn with the tree of `state` in q (the trees are of two types).
    template <class Fn>
    static void with_tree(Queue& q, State state, Fn&& fn) {
        switch (state) {
            case State::ready:
                return fn(q.ready);
            case State::delayed:
                return fn(q.delayed);
            case State::taken:
                return fn(q.taken);
            case State::buried:
                return fn(q.buried);
            case State::done:
                return fn(q.done);
        }
    }
    // Puts t in the tree of its state; hint_last: it most likely goes last there.
    void link(Queue& q, Task* t, bool hint_last = false);
    void unlink(Queue& q, Task* t);
    void mark_changed(Task* t);
    // Called before a task changes or goes away; records its old state while forked.
    void before_change(const Task* t) {
        if (fork) journal(t->queue_id, t->key(), t);
    }
    void journal(std::uint16_t queue_id, std::string_view key, const Task* t);
    const Tombstone* tombstone_of(std::uint16_t queue_id, std::string_view key) const;
    // The stamp of the key's latest deletion that is still remembered: while forked, the
    // fork's own deletion (kept in its journal, not as a tombstone) comes first.
    std::optional<std::uint64_t> deletion_hlc(std::uint16_t queue_id, std::string_view key) const;
    // Records (or replaces) the tombstone of a key and lists the key as changed.
    void set_tombstone(std::uint16_t queue_id, std::string_view key, Tombstone t);
    void clear_tombstone(std::uint16_t queue_id, std::string_view key);
    void expire_tombstones(Millis to);
    // While forked, only queues with `autonomous` set may change.
    bool writable(const Queue& q) const { return !fork || q.settings.autonomous; }
    // Every change of a task: its version.
    void bump(Task* t);
    // A write (put, ack): its hlc, which merges order by. Takes, leases running out,
    // releases, buries and kicks are not writes: they never win a merge.
    void stamp_write(Task* t, Millis at);
    // The stamp of a write (or a deletion) at `at` of a key last stamped `prev`: per key,
    // hlc only grows.
    static std::uint64_t next_hlc(std::uint64_t prev, Millis at) {
        return std::max(prev + 1, static_cast<std::uint64_t>(std::max<Millis>(at, 0)) << 16);
    }
    void grant_lease(Task* t, LeaseRec rec);
    void drop_lease(Task* t);
    const LeaseRec* lease_of(const Task* t) const;
    void remove_task(Queue& q, Task* t, bool record_change);
    void destroy_unlinked(Task* t, bool record_change);  // t is in no tree and holds no lease
    // Gives an unlinked task a new payload; returns the (possibly moved) record.
    Task* set_payload(Task* t, std::string_view payload);
    // Where a task goes after a failed attempt (lease ran out, release, session gone).
    void after_failed_attempt(Queue& q, Task* t, Millis not_before);
    Task* pick_for_take(Queue& q, Millis now, bool* contested, bool* late) const;

    // ---- time ----
    void advance(Millis to);
    void expire(Queue& q, Millis to);

    // ---- tasks as records (store_records.cpp) ----
    std::string encode_task(const Task& t) const;
    // Decodes a task or tombstone record and puts it in place of whatever the key held,
    // with no change recorded; false (and nothing changed) if it does not decode.
    bool load_task(std::string_view queue, std::string_view key, std::string_view encoded);
    // Decodes and puts a task in place of any task with its key; nullptr (and nothing
    // changed) if it does not decode.
    Task* install_task(std::string_view queue, std::string_view key, std::string_view encoded,
                       bool record_change);
    Task* install_task(std::string_view queue, std::string_view key,
                       const msgpack::object& unpacked, bool record_change);
    bool load_meta(std::string_view encoded);
    void drain_changes(const std::function<void(std::string_view queue, std::string_view key,
                                                std::optional<std::string>&& encoded)>& fn);
    void for_each_task(const std::function<void(std::string_view queue, std::string_view key,
                                                std::string_view encoded_task)>& fn) const;
    // Calls fn(queue, task) for every task in every queue's trees, nothing encoded.
    template <class Fn>
    void visit_tasks(Fn&& fn) const {
        for (const auto& [name, q] : queues_by_name) {
            const Queue& queue = *q;
            auto each = [&](const auto& tree) {
                for (const Task& t : tree)
                    fn(queue, t);
            };
            each(queue.ready);
            each(queue.delayed);
            each(queue.taken);
            each(queue.buried);
            each(queue.done);
        }
    }

    // ---- the fork (autonomous mode; store_records.cpp) ----
    bool start_fork(LeaseId lease_base);
    void drain_fork(const std::function<void(std::string_view queue, std::string_view key,
                                             const OverlayRecord&)>& fn);
    void rollback();
    bool load_overlay(std::string_view queue, std::string_view key, const OverlayRecord& r);

    msgpack::zone load_zone;  // load_task's, reused from one record to the next
    // Set while a restart's load (Store::Loader) runs: tasks installed meanwhile wait
    // there and join their trees in bulk at its end.
    BulkLinks* bulk = nullptr;
};

// Runs one command at `now`, a time advance() has reached (store_commands.cpp).
Result apply_command(StoreState& s, const Command& cmd, Millis now);
// A step of a bucket's move (store_moves.cpp).
Result apply_move(StoreState& s, const MoveBucket& c, Millis now);
// Every task and tombstone of `bucket` (of `bucket_count`), as a snapshot holds them.
void for_each_bucket_record(const StoreState& s, std::uint32_t bucket, std::uint32_t bucket_count,
                            const std::function<void(std::string_view queue, std::string_view key,
                                                     std::string_view record)>& fn);

}  // namespace dueq::queue::detail

namespace dueq::queue {

struct Store::Impl : detail::StoreState {
    using StoreState::StoreState;
};

}  // namespace dueq::queue
