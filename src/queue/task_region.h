// A reserved range of address space for the task records and tree headers of one store.
// Internal to src/queue.
//
// The trees that order tasks link them by 32-bit references instead of 64-bit pointers:
// 12 bytes of links per task instead of 24, which at ten million tasks is 120 MB. A
// reference is a node's offset, in 8-byte units, from the start of the kMaxBytes-aligned
// block of address space it lies in, so everything a tree links must live in one region:
// the store's arena takes its slabs here, and each of its trees its header. 0 is no node.
// The parent link keeps the tree's color in its lowest bit, so references have 31 bits
// and a region is at most 16 GiB of records.
//
// Each region lies inside one such block (it is reserved aligned to its own size, a power
// of two that divides kMaxBytes), so a node's block start is its address with the low
// bits cleared: the trees turn a reference back into a pointer from the address of the
// node that holds it, with no base to load and nothing shared between stores.
//
// The range is reserved when the first slab or node is asked for (PROT_NONE: it costs no
// memory), made writable a slab at a time, and unmapped when the region is destroyed. A
// slab given back is emptied (its pages return to the kernel) and kept for the next ask.
// Not thread-safe: one store's owner uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dueq::queue::detail {

class TaskRegion {
  public:
    static constexpr std::size_t kMaxBytes = std::size_t{16} << 30;

    TaskRegion() = default;
    ~TaskRegion();
    TaskRegion(const TaskRegion&) = delete;
    TaskRegion& operator=(const TaskRegion&) = delete;

    // The reference of `p`, a node in some region (or nullptr: 0).
    static std::uint32_t ref_of(const void* p) {
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        return static_cast<std::uint32_t>((a & (kMaxBytes - 1)) >> 3);
    }
    // The node `ref` names in the region of `near` (any node of that region), or nullptr.
    static void* at(const void* near, std::uint32_t ref) {
        if (ref == 0) return nullptr;
        const auto block = reinterpret_cast<std::uintptr_t>(near) & ~(kMaxBytes - 1);
        return reinterpret_cast<void*>(block + (std::uintptr_t{ref} << 3));
    }

    // A slab of `bytes` (a power of two up to 2 MiB), aligned to its size. Throws
    // std::bad_alloc when the region is full.
    char* take_slab(std::size_t bytes);
    // Its pages go back to the kernel; the slab's addresses to the next take_slab.
    void give_slab(char* slab, std::size_t bytes);

    // A 16-byte block for a tree's header node.
    void* take_node();
    void give_node(void* node);

    // Bytes handed out as slabs and not given back (tests and accounting).
    std::size_t slab_bytes_in_use() const { return in_use_; }
    // The reserved size: kMaxBytes, or less where the system would not reserve that much
    // (0 until the first slab or node).
    std::size_t reserved_bytes() const { return reserved_; }
    // Whether `p` lies in the reserved range (tests).
    bool holds(const void* p) const {
        const char* c = static_cast<const char*>(p);
        return start_ != nullptr && c >= start_ && c < start_ + reserved_;
    }

  private:
    static constexpr std::size_t kLogSizes = 22;  // slabs of 2^0 .. 2^21 bytes
    void reserve();
    char* start_ = nullptr;  // of the reserved range
    std::size_t reserved_ = 0;
    char* bump_ = nullptr;  // next never-used byte
    std::size_t in_use_ = 0;
    std::vector<char*> free_slabs_[kLogSizes];
    void* free_nodes_ = nullptr;  // a list through each block's first word
};

}  // namespace dueq::queue::detail
