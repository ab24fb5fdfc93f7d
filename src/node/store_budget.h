// Memory admission (docs/config.md, [limits] max_store_bytes): the node that accepts
// writes (the leader, or a node serving on its own in autonomous mode) refuses one that
// would take its store past the budget, before proposing it, with `store_full` (not
// applied). Every replica applies the same writes: without this they would all fill the
// task records' range at the same entry and stop together, and a restart would load the
// same tasks and stop again. Deletes, takes, releases, acks that do not grow a task,
// merges (writes already made elsewhere) and reads always pass.
//
// What is applied counts, and so does what was admitted and not answered yet, so a
// burst of pipelined puts cannot run past the budget before the first of them applies.
// Not thread-safe: the node's event loop owns it.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "queue/command.h"
#include "queue/store.h"

namespace dueq::node {

class StoreBudget {
  public:
    explicit StoreBudget(std::uint64_t limit_bytes) : limit_(limit_bytes) {}

    // What a new task costs beside its key and payload: its header, its slot in the key
    // table and rounding (queue/task.h, queue/task_table.h).
    static constexpr std::uint64_t kTaskOverheadBytes = 72;
    // The records' range is refused this close to its end, whatever the budget says (a
    // budget near its ceiling with free blocks of the wrong sizes could get there).
    static constexpr std::uint64_t kRegionMarginBytes = std::uint64_t{1} << 30;
    // /health warns from this share of the budget on.
    static constexpr double kWarnShare = 0.85;

    // The most `cmd` can add to a store (0: nothing, it always passes).
    static std::uint64_t growth_bound(const queue::Command& cmd);

    // The bytes admitted for `cmd` (0 when it cannot grow the store), counted in flight
    // until release(); or why it is refused.
    std::variant<std::uint64_t, std::string> admit(const queue::Store& store,
                                                   const queue::Command& cmd);
    void release(std::uint64_t bytes) { in_flight_ -= bytes <= in_flight_ ? bytes : in_flight_; }

    std::uint64_t limit() const { return limit_; }
    std::uint64_t in_flight() const { return in_flight_; }

  private:
    std::uint64_t limit_;
    std::uint64_t in_flight_ = 0;
};

// The budget a node uses: the configured one, or, when the config does not set it, the
// default or half of `ram_bytes` (the machine's memory), whichever is less.
std::uint64_t effective_store_budget(std::uint64_t configured, bool set, std::uint64_t ram_bytes);

// The machine's physical memory (0 if unknown).
std::uint64_t physical_memory_bytes();

}  // namespace dueq::node
