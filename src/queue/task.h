// The in-memory record of one task, and the per-queue trees that order tasks.
//
// Internal to src/queue. A task is one heap block: this fixed header followed by the key
// bytes and then the payload bytes, so a store of ten million tasks costs ten million
// allocations and no per-task std::string. A task sits in exactly one tree of its queue
// at a time (which one is its `state`), so one tree hook serves all of them; `aux` is the
// one time that only some states need (not_before, lease_until or done_until).
//
// What a taken task also needs (lease id, owner, release_on_disconnect) lives outside
// the record, in the store's lease table: few tasks are taken at any moment, and keeping
// those 17 bytes out of every record is what keeps the header at 64 bytes.
#pragma once

#include <boost/intrusive/set.hpp>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "queue/command.h"
#include "queue/task_arena.h"

namespace dueq::queue::detail {

// The store's view of status: `delayed` is a ready task held back by a release delay.
enum class State : std::uint8_t { ready = 0, taken = 1, buried = 2, done = 3, delayed = 4 };

inline Status status_of(State s) {
    return s == State::delayed ? Status::ready : static_cast<Status>(s);
}

// Hard ceilings of the record layout; StoreLimits may only be lower.
inline constexpr std::size_t kMaxKeyBytes = 0xFFFF;
inline constexpr std::size_t kMaxPayloadBytes = (std::size_t{1} << 27) - 1;
inline constexpr std::uint32_t kMaxAttemptsCount = (1u << 24) - 1;  // attempts saturate here
inline constexpr std::uint64_t kMaxVersion = (std::uint64_t{1} << 40) - 1;
inline constexpr std::size_t kMaxQueues = 0xFFFF;

using TreeHook =
    boost::intrusive::set_base_hook<boost::intrusive::optimize_size<true>,
                                    boost::intrusive::link_mode<boost::intrusive::normal_link>>;

struct Task : TreeHook {
    Millis time = 0;  // due time / deadline
    Millis aux = 0;   // delayed: not_before; taken: lease_until; done: done_until
    std::uint64_t hlc = 0;
    std::uint64_t version : 40;
    std::uint64_t attempts : 24;
    std::uint32_t payload_len : 27;
    std::uint32_t state_bits : 3;
    std::uint32_t dirty : 1;  // listed in the store's change list, not yet drained
    std::uint32_t spare : 1;
    std::uint16_t queue_id = 0;
    std::uint16_t key_len = 0;

    Task() : version(0), attempts(0), payload_len(0), state_bits(0), dirty(0), spare(0) {}

    State state() const { return static_cast<State>(state_bits); }
    void set_state(State s) { state_bits = static_cast<std::uint32_t>(s); }

    char* tail() { return reinterpret_cast<char*>(this + 1); }
    const char* tail() const { return reinterpret_cast<const char*>(this + 1); }
    std::string_view key() const { return {tail(), key_len}; }
    std::string_view payload() const { return {tail() + key_len, payload_len}; }

    std::size_t alloc_size() const { return sizeof(Task) + key_len + payload_len; }

    // A new record with the given key and payload; every other field zero.
    static Task* create(TaskArena& arena, std::uint16_t queue_id, std::string_view key,
                        std::string_view payload);
    static void destroy(TaskArena& arena, Task* t);
};

static_assert(sizeof(Task) == 64, "the task header is meant to stay at 64 bytes");

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
// Heterogeneous probes by time alone (lower_bound/upper_bound on a Millis).
struct TimeProbe {
    bool operator()(const Task& a, Millis m) const { return a.time < m; }
    bool operator()(Millis m, const Task& a) const { return m < a.time; }
};
struct AuxProbe {
    bool operator()(const Task& a, Millis m) const { return a.aux < m; }
    bool operator()(Millis m, const Task& a) const { return m < a.aux; }
};

using TimeTree = boost::intrusive::set<Task, boost::intrusive::compare<ByTime>,
                                       boost::intrusive::constant_time_size<true>>;
using AuxTree = boost::intrusive::set<Task, boost::intrusive::compare<ByAux>,
                                      boost::intrusive::constant_time_size<true>>;

}  // namespace dueq::queue::detail
