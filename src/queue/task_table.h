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
//
// Growing moves the entries a few at a time instead of all at once: rehashing means
// reading every task (one cache miss each), about 3 s at 9M tasks, during which the event
// loop would answer nothing. While a move is under way the previous array stays beside
// the new one; a slot moved out of it keeps a marker, so its probe chains stay whole, and
// each insert, erase or lookup moves the next kMoveSlots slots (lookups too: a store of
// tokens that are only refreshed from then on inserts nothing, and would keep both arrays
// for good). New entries only go into the new array, so a key is in exactly one of the two.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>
#include <utility>

#include "common/huge_pages.h"
#include "queue/task.h"

namespace dueq::queue::detail {

// An array of zeroed slots. A large one is mapped from the kernel in huge pages before
// anything touches it: zeroing it first (as std::vector does) would fault it in as small
// pages, and on a table of 100 MiB every random lookup would then miss the TLB.
class SlotArray {
  public:
    SlotArray() = default;
    explicit SlotArray(std::size_t n);
    ~SlotArray() { release(); }
    SlotArray(SlotArray&& o) noexcept { *this = std::move(o); }
    SlotArray& operator=(SlotArray&& o) noexcept;
    SlotArray(const SlotArray&) = delete;
    SlotArray& operator=(const SlotArray&) = delete;

    std::uint64_t& operator[](std::size_t i) { return slots_[i]; }
    const std::uint64_t& operator[](std::size_t i) const { return slots_[i]; }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

  private:
    void release();
    std::uint64_t* slots_ = nullptr;
    std::size_t size_ = 0;
    std::size_t mapped_bytes_ = 0;  // 0: from calloc
};

using ::dueq::advise_huge;
using ::dueq::HugePageAllocator;

class TaskTable {
  public:
    TaskTable();

    Task* find(std::uint16_t queue_id, std::string_view key) const;
    // Starts loading the slot where find(queue_id, key) will look first: a bulk load that
    // asks a few keys ahead finds each slot in cache instead of waiting on memory.
    // Returns the key's hash, for prefetch_task.
    std::uint64_t prefetch(std::uint16_t queue_id, std::string_view key) const {
        const std::uint64_t h = hash(queue_id, key);
        __builtin_prefetch(&slots_[home_of(h, slots_.size())]);
        return h;
    }
    // The next step, once that slot is in cache: starts loading the task its entry points
    // at when the entry's hash bits match (most often the task find() will return).
    void prefetch_task(std::uint64_t h) const {
        const std::uint64_t v = slots_[home_of(h, slots_.size())];
        if (v != 0 && v != kMoved && (v & ~kPointerBits) == h << kTagShift)
            __builtin_prefetch(task_of(v));
    }
    // The step after that, once the task is in cache: starts loading its parent and
    // children in its tree, which taking it out of the tree (a put, an ack) reads and
    // rewrites.
    void prefetch_links(std::uint64_t h) const {
        const std::uint64_t v = slots_[home_of(h, slots_.size())];
        if (v == 0 || v == kMoved || (v & ~kPointerBits) != h << kTagShift) return;
        const Task* t = task_of(v);
        for (std::uint32_t ref : {t->parent_color >> 1, t->left, t->right})
            if (ref != 0) __builtin_prefetch(TaskRegion::at(t, ref));
    }
    // `t` must not be present yet (by its queue id and key).
    void insert(Task* t);
    // Replaces the entry that points at `old_task` by `new_task` (same queue id and key).
    void replace(const Task* old_task, Task* new_task);
    void erase(const Task* t);

    // Makes room for `n` tasks without growing (a restart knows about how many it loads).
    void reserve(std::size_t n);
    std::size_t size() const { return size_; }
    std::size_t capacity() const { return slots_.size(); }
    std::size_t memory_bytes() const {
        return (slots_.size() + moving_.size()) * sizeof(std::uint64_t);
    }
    // Whether a growth is still moving entries (tests use it to reach that state).
    bool growing() const { return !moving_.empty(); }

    // Slots of the previous array moved per operation while growing. The array grows by
    // 1.5x at 7/8 full, so the move ends after 1/16 of its slots' worth of inserts at most,
    // long before the new array (1.5x larger) is 7/8 full in turn.
    static constexpr std::size_t kMoveSlots = 16;

  private:
    static constexpr int kTagShift = 48;
    static constexpr std::uint64_t kPointerBits = (std::uint64_t(1) << kTagShift) - 1;
    // A slot of the previous array whose entry has moved (or was erased while growing).
    static constexpr std::uint64_t kMoved = 1;
    static std::uint64_t hash(std::uint16_t queue_id, std::string_view key);
    static std::size_t home_of(std::uint64_t h, std::size_t slots);
    static std::uint64_t slot_value(const Task* t, std::uint64_t h) {
        return reinterpret_cast<std::uintptr_t>(t) | (h << kTagShift);
    }
    static Task* task_of(std::uint64_t v) { return reinterpret_cast<Task*>(v & kPointerBits); }
    static Task* find_in(const SlotArray& slots, std::uint16_t queue_id, std::string_view key,
                         std::uint64_t h);
    // Where `t`'s entry is: in slots_, or (when it returns slots_.size()) in moving_ at
    // *in_moving.
    std::size_t find_slot(const Task* t, std::size_t* in_moving) const;
    void place(std::uint64_t v, std::uint64_t h) const;  // into slots_' first free slot from home
    void grow(std::size_t slots);
    // Const because lookups move entries too: where an entry sits is not part of what the
    // table holds.
    void move_some(std::size_t n) const;
    void finish_move() { move_some(moving_.size()); }
    static std::size_t next(std::size_t i, std::size_t slots) { return i + 1 == slots ? 0 : i + 1; }

    mutable SlotArray slots_;        // 0 = empty; else slot_value(task, hash)
    mutable SlotArray moving_;       // while growing: the previous array, else empty
    mutable std::size_t moved_ = 0;  // slots of moving_ before this one have moved
    std::size_t size_ = 0;
};

}  // namespace dueq::queue::detail
