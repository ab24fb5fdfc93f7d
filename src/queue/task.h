// The in-memory record of one task, and the per-queue trees that order tasks.
//
// Internal to src/queue. A task is one block of its store's arena: this fixed header
// followed by the key bytes and then the payload bytes, so a store of ten million tasks
// costs ten million allocations and no per-task std::string. A task sits in exactly one
// tree of its queue at a time (which one is its `state`), so one set of tree links serves
// all of them; `aux` is the one time that only some states need (not_before, lease_until
// or done_until).
//
// What a taken task also needs (lease id, owner, release_on_disconnect) lives outside
// the record, in the store's lease table: few tasks are taken at any moment, and keeping
// those 17 bytes out of every record is what keeps the header at 48 bytes.
//
// Times are 48-bit fields. Every time the store keeps is a command's time (at most
// kMaxTime), a log time clamped to +-kMaxTime, or one of those plus a duration of at most
// kMaxDuration (store_impl.h): well inside +-2^47. Records read back are refused outside
// kMaxStoredTime.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "queue/command.h"
#include "queue/task_arena.h"
#include "queue/task_tree.h"
#include "wire/limits.h"

namespace dueq::queue::detail {

// The store's view of status: `delayed` is a ready task held back by a release delay.
enum class State : std::uint8_t { ready = 0, taken = 1, buried = 2, done = 3, delayed = 4 };

inline Status status_of(State s) {
    return s == State::delayed ? Status::ready : static_cast<Status>(s);
}

// Hard ceilings of the record layout (a log record's, wire/limits.h); StoreLimits may
// only be lower.
inline constexpr std::size_t kMaxKeyBytes = limits::kRecordKeyBytes;
inline constexpr std::size_t kMaxPayloadBytes = limits::kRecordPayloadBytes;
inline constexpr std::uint32_t kMaxAttemptsCount = (1u << 24) - 1;  // attempts saturate here
inline constexpr std::uint64_t kMaxVersion = (std::uint64_t{1} << 40) - 1;
inline constexpr std::size_t kMaxQueues = 0xFFFF;

inline constexpr Millis kMaxStoredTime = (Millis{1} << 47) - 1;

struct Task : TreeLinks {
    std::uint32_t payload_len : 27;
    std::uint32_t state_bits : 3;
    std::uint32_t dirty : 1;     // listed in the store's change list, not yet drained
    std::uint32_t indirect : 1;  // key and payload are in a block of their own (tail_block)
    std::uint64_t hlc = 0;
    std::int64_t time : 48;  // due time / deadline
    std::uint64_t queue_id : 16;
    std::int64_t aux : 48;  // delayed: not_before; taken: lease_until; done: done_until
    std::uint64_t key_len : 16;
    std::uint64_t version : 40;
    std::uint64_t attempts : 24;

    Task()
        : payload_len(0),
          state_bits(0),
          dirty(0),
          indirect(0),
          time(0),
          queue_id(0),
          aux(0),
          key_len(0),
          version(0),
          attempts(0) {}
    // A record is its block: a copy would be outside the region and without its bytes.
    Task(const Task&) = delete;
    Task& operator=(const Task&) = delete;

    State state() const { return static_cast<State>(state_bits); }
    void set_state(State s) { state_bits = static_cast<std::uint32_t>(s); }

    char* tail() { return indirect ? tail_block() : reinterpret_cast<char*>(this + 1); }
    const char* tail() const { return const_cast<Task*>(this)->tail(); }
    std::string_view key() const { return {tail(), key_len}; }
    std::string_view payload() const { return {tail() + key_len, payload_len}; }

    // A new record with the given key and payload; every other field zero.
    static Task* create(TaskArena& arena, std::uint16_t queue_id, std::string_view key,
                        std::string_view payload);
    static void destroy(TaskArena& arena, Task* t);

  private:
    // A record that would not fit the arena's small blocks keeps only its header and a
    // pointer in the region (the trees link it there), and its key and payload elsewhere.
    char*& tail_block() { return *reinterpret_cast<char**>(this + 1); }
    static std::size_t header_block_size(std::size_t content) {
        const std::size_t inline_size = sizeof(Task) + content;
        return inline_size <= TaskArena::kMaxSmall ? inline_size : sizeof(Task) + sizeof(char*);
    }
};

static_assert(sizeof(Task) == 48, "the task header is meant to stay at 48 bytes");

inline int compare_keys(const Task& a, const Task& b) {
    std::string_view ka = a.key(), kb = b.key();
    return ka.compare(kb);
}

// Trees ordered by (time, key): ready and buried. Ties on time are broken by key bytes,
// which every replica agrees on and which needs no extra field per task.
struct ByTime {
    bool operator()(const Task& a, const Task& b) const {
        if (a.time != b.time) return a.time < b.time;
        return compare_keys(a, b) < 0;
    }
};
// Trees ordered by (aux, key): delayed, taken, done.
struct ByAux {
    bool operator()(const Task& a, const Task& b) const {
        if (a.aux != b.aux) return a.aux < b.aux;
        return compare_keys(a, b) < 0;
    }
};
// A position in a tree's order: (time or aux, key), where a listing left off.
struct OrderKey {
    Millis at;
    std::string_view key;
};
// Heterogeneous probes by time alone (lower_bound/upper_bound on a Millis), or by a
// position (OrderKey).
struct TimeProbe {
    bool operator()(const Task& a, Millis m) const { return a.time < m; }
    bool operator()(Millis m, const Task& a) const { return m < a.time; }
    bool operator()(const Task& a, const OrderKey& k) const {
        return a.time != k.at ? a.time < k.at : a.key() < k.key;
    }
    bool operator()(const OrderKey& k, const Task& a) const {
        return k.at != a.time ? k.at < a.time : k.key < a.key();
    }
};
struct AuxProbe {
    bool operator()(const Task& a, Millis m) const { return a.aux < m; }
    bool operator()(Millis m, const Task& a) const { return m < a.aux; }
    bool operator()(const Task& a, const OrderKey& k) const {
        return a.aux != k.at ? a.aux < k.at : a.key() < k.key;
    }
    bool operator()(const OrderKey& k, const Task& a) const {
        return k.at != a.aux ? k.at < a.aux : k.key < a.key();
    }
};

using TimeTree = RegionTree<Task, ByTime, TimeProbe>;
using AuxTree = RegionTree<Task, ByAux, AuxProbe>;

}  // namespace dueq::queue::detail
