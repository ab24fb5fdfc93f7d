// One reserved range of address space for every task record and tree header of the
// process. Internal to src/queue.
//
// The trees that order tasks link them by 32-bit references instead of 64-bit pointers:
// 12 bytes of links per task instead of 24, which at ten million tasks is 120 MB. A
// reference is the distance from the region's base in 8-byte units, so everything a tree
// links must live in the region: the arenas take their slabs here, and each tree its
// header. 0 is no node. The parent link keeps the tree's color in its lowest bit, so
// references have 31 bits and the region is at most 16 GiB of records.
//
// The range is reserved once (PROT_NONE: it costs no memory) and made writable a slab at
// a time as arenas ask for slabs. A slab given back is emptied (its pages return to the
// kernel) and kept for the next arena that asks. Thread-safe: stores on several threads
// share the region.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dueq::queue::detail::region {

inline constexpr std::size_t kMaxBytes = std::size_t{16} << 30;

// The region's base: set before the first slab or node is handed out, then constant.
inline char* base = nullptr;

inline std::uint32_t ref_of(const void* p) {
    return p == nullptr ? 0
                        : static_cast<std::uint32_t>(
                              static_cast<std::size_t>(static_cast<const char*>(p) - base) >> 3);
}
inline void* at(std::uint32_t ref) {
    return ref == 0 ? nullptr : base + (static_cast<std::size_t>(ref) << 3);
}

// A slab of `bytes` (a power of two up to 2 MiB), aligned to its size. Throws
// std::bad_alloc when the region is full.
char* take_slab(std::size_t bytes);
// Its pages go back to the kernel; the slab's addresses to the next take_slab.
void give_slab(char* slab, std::size_t bytes);

// A 16-byte block for a tree's header node.
void* take_node();
void give_node(void* node);

// Bytes of the region handed out as slabs and not given back (tests and accounting).
std::size_t slab_bytes_in_use();
// The reserved size: kMaxBytes, or less where the system would not reserve that much.
std::size_t reserved_bytes();

}  // namespace dueq::queue::detail::region
