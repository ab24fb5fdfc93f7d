// (queue id, key) -> task lookup: an open-addressing table of task references.
//
// Internal to src/queue. A slot is 5 bytes and there is no per-entry node, so lookup
// costs ~5/load bytes per task (the table stays 58-87% full: 5.7-8.6 bytes). A slot holds
// the task's 31-bit reference into its store's task region (task_region.h), the same
// kind of reference the trees link by, and 9 bits of the key's hash. Linear probing with
// backward-shift deletion, so there are no tombstones and the table never needs a cleanup
// pass. Nothing iterates this table in a way that reaches results: its layout may differ
// between replicas without harm.
//
// The hash bits let a probe read the task itself only when they match (1 in 512 of the
// other keys' slots), so a lookup of a missing key (every put of a new task, every task
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
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <utility>

#include "common/huge_pages.h"
#include "queue/task.h"

namespace dueq::queue::detail {

// An array of zeroed 5-byte slots, each read and written as the low 40 bits of an
// unaligned 8-byte word (the array has 3 bytes to spare at its end). A large one is mapped
// from the kernel in huge pages before anything touches it: zeroing it first (as
// std::vector does) would fault it in as small pages, and on a table of 100 MiB every
// random lookup would then miss the TLB.
class SlotArray {
  public:
    static constexpr std::size_t kSlotBytes = 5;
    static constexpr std::uint64_t kSlotMask = (std::uint64_t{1} << 40) - 1;

    SlotArray() = default;
    explicit SlotArray(std::size_t n);
    ~SlotArray() { release(); }
    SlotArray(SlotArray&& o) noexcept { *this = std::move(o); }
    SlotArray& operator=(SlotArray&& o) noexcept;
    SlotArray(const SlotArray&) = delete;
    SlotArray& operator=(const SlotArray&) = delete;

    std::uint64_t get(std::size_t i) const {
        std::uint64_t w;
        std::memcpy(&w, bytes_ + i * kSlotBytes, sizeof w);
        return w & kSlotMask;
    }
    void set(std::size_t i, std::uint64_t v) {
        unsigned char* at = bytes_ + i * kSlotBytes;
        std::uint64_t w;
        std::memcpy(&w, at, sizeof w);
        w = (w & ~kSlotMask) | v;
        std::memcpy(at, &w, sizeof w);
    }
    const void* address(std::size_t i) const { return bytes_ + i * kSlotBytes; }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    std::size_t memory_bytes() const { return size_ == 0 ? 0 : size_ * kSlotBytes + 8; }

  private:
    void release();
    unsigned char* bytes_ = nullptr;
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
        __builtin_prefetch(slots_.address(home_of(h, slots_.size())));
        return h;
    }
    // The next step, once that slot is in cache: starts loading the task its entry points
    // at when the entry's hash bits match (most often the task find() will return).
    void prefetch_task(std::uint64_t h) const {
        const std::uint64_t v = slots_.get(home_of(h, slots_.size()));
        if (v != 0 && v != kMoved && (v & kTagBits) == tag_of(h)) __builtin_prefetch(task_of(v));
    }
    // The step after that, once the task is in cache: starts loading its parent and
    // children in its tree, which taking it out of the tree (a put, an ack) reads and
    // rewrites.
    void prefetch_links(std::uint64_t h) const {
        const std::uint64_t v = slots_.get(home_of(h, slots_.size()));
        if (v == 0 || v == kMoved || (v & kTagBits) != tag_of(h)) return;
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
    std::size_t memory_bytes() const { return slots_.memory_bytes() + moving_.memory_bytes(); }
    // Whether a growth is still moving entries (tests use it to reach that state).
    bool growing() const { return !moving_.empty(); }

    // Slots of the previous array moved per operation while growing. The array grows by
    // 1.5x at 7/8 full, so the move ends after 1/16 of its slots' worth of inserts at most,
    // long before the new array (1.5x larger) is 7/8 full in turn.
    static constexpr std::size_t kMoveSlots = 16;

  private:
    static constexpr int kTagWidth = 9;
    static constexpr std::uint64_t kTagBits = (std::uint64_t{1} << kTagWidth) - 1;
    // A slot of the previous array whose entry has moved (or was erased while growing).
    // No task has reference 0 (task_region.h), so no entry has this value.
    static constexpr std::uint64_t kMoved = 1;
    static std::uint64_t hash(std::uint16_t queue_id, std::string_view key);
    static std::size_t home_of(std::uint64_t h, std::size_t slots);
    // The hash's low bits: a slot's home comes from its high bits (home_of), so keys that
    // share a cluster still differ here.
    static std::uint64_t tag_of(std::uint64_t h) { return h & kTagBits; }
    static std::uint64_t slot_value(const Task* t, std::uint64_t h) {
        return std::uint64_t{TaskRegion::ref_of(t)} << kTagWidth | tag_of(h);
    }
    // Every task of the table lies in one region: the one of the first task inserted.
    Task* task_of(std::uint64_t v) const {
        return static_cast<Task*>(
            TaskRegion::at(anchor_, static_cast<std::uint32_t>(v >> kTagWidth)));
    }
    Task* find_in(const SlotArray& slots, std::uint16_t queue_id, std::string_view key,
                  std::uint64_t h) const;
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

    const void* anchor_ = nullptr;   // a task of the region every task of the table is in
    mutable SlotArray slots_;        // 0 = empty; else slot_value(task, hash)
    mutable SlotArray moving_;       // while growing: the previous array, else empty
    mutable std::size_t moved_ = 0;  // slots of moving_ before this one have moved
    std::size_t size_ = 0;
};

}  // namespace dueq::queue::detail
