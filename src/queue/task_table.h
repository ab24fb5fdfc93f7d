// (queue id, key) -> task lookup: an open-addressing table of task pointers.
//
// Internal to src/queue. One pointer per slot and no per-entry node keeps lookup at
// ~8/load bytes per task. Linear probing with backward-shift deletion, so there are no
// tombstones and the table never needs a cleanup pass. Nothing iterates this table in a
// way that reaches results: its layout may differ between replicas without harm.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "queue/task.h"

namespace dueq::queue::detail {

class TaskTable {
  public:
    TaskTable();

    Task* find(std::uint16_t queue_id, std::string_view key) const;
    // `t` must not be present yet (by its queue id and key).
    void insert(Task* t);
    // Replaces the entry that points at `old_task` by `new_task` (same queue id and key).
    void replace(const Task* old_task, Task* new_task);
    void erase(const Task* t);

    std::size_t size() const { return size_; }
    std::size_t capacity() const { return slots_.size(); }
    std::size_t memory_bytes() const { return slots_.size() * sizeof(Task*); }

  private:
    static std::uint64_t hash(std::uint16_t queue_id, std::string_view key);
    std::size_t slot_of(std::uint16_t queue_id, std::string_view key) const;
    std::size_t find_slot(const Task* t) const;
    void grow();
    std::size_t next(std::size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }

    std::vector<Task*> slots_;  // nullptr = empty
    std::size_t size_ = 0;
};

}  // namespace dueq::queue::detail
