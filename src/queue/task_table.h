// (queue id, key) -> task lookup: an open-addressing table of task pointers.
//
// Internal to src/queue. One pointer per slot and no per-entry node keeps lookup at
// ~8/load bytes per task. Linear probing with backward-shift deletion, so there are no
// tombstones and the table never needs a cleanup pass. Nothing iterates this table in a
// way that reaches results: its layout may differ between replicas without harm.
//
// Each slot keeps 16 bits of its key's hash in the pointer's unused top bits (user-space
// pointers fit in 48 bits on x86-64 and AArch64), so a probe reads the task itself only
// when those bits match. A lookup of a missing key (every put of a new task, every task
// loaded at restart) walks its cluster in one or two cache lines instead of touching one
// task per slot.
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

    // Makes room for `n` tasks without growing (a restart knows about how many it loads).
    void reserve(std::size_t n);
    std::size_t size() const { return size_; }
    std::size_t capacity() const { return slots_.size(); }
    std::size_t memory_bytes() const { return slots_.size() * sizeof(Task*); }

  private:
    static constexpr int kTagShift = 48;
    static constexpr std::uint64_t kPointerBits = (std::uint64_t(1) << kTagShift) - 1;
    static std::uint64_t hash(std::uint16_t queue_id, std::string_view key);
    std::size_t home_of(std::uint64_t h) const;
    static std::uint64_t slot_value(const Task* t, std::uint64_t h) {
        return reinterpret_cast<std::uintptr_t>(t) | (h << kTagShift);
    }
    static Task* task_of(std::uint64_t v) { return reinterpret_cast<Task*>(v & kPointerBits); }
    std::size_t find_slot(const Task* t) const;
    void place(std::uint64_t v, std::uint64_t h);  // into the first free slot from home
    void resize(std::size_t slots);
    void advise_huge_pages();
    std::size_t next(std::size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }

    std::vector<std::uint64_t> slots_;  // 0 = empty; else slot_value(task, hash)
    std::size_t size_ = 0;
};

}  // namespace dueq::queue::detail
