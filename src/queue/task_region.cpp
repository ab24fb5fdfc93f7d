#include "queue/task_region.h"

#include "queue/task_arena.h"  // DUEQ_ASAN

#include <sys/mman.h>

#include <new>

#if DUEQ_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace dueq::queue::detail {
namespace {

constexpr std::size_t kAlign = std::size_t{2} << 20;
constexpr std::size_t kNodeBytes = 16;
constexpr std::size_t kNodeSlabBytes = 64 * 1024;
constexpr std::size_t kLeastBytes = std::size_t{64} << 20;

std::size_t log2_of(std::size_t bytes) {
    std::size_t l = 0;
    while ((std::size_t{1} << l) < bytes)
        ++l;
    return l;
}

// `want` bytes (a power of two dividing TaskRegion::kMaxBytes) of address space aligned to
// `want`, so that they lie in one kMaxBytes-aligned block; nullptr if the system refuses.
char* reserve_aligned(std::size_t want) {
    constexpr int kProt = PROT_NONE;
    constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    // Twice as much holds an aligned range of `want`; the rest is given back at once.
    void* p = ::mmap(nullptr, 2 * want, kProt, kFlags, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    const auto raw = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t aligned = (raw + want - 1) & ~(want - 1);
    if (aligned > raw) ::munmap(p, aligned - raw);
    if (const std::size_t tail = raw + 2 * want - (aligned + want))
        ::munmap(reinterpret_cast<void*>(aligned + want), tail);
    return reinterpret_cast<char*>(aligned);
}

}  // namespace

TaskRegion::~TaskRegion() {
    if (start_ == nullptr) return;
#if DUEQ_ASAN
    __lsan_unregister_root_region(start_, reserved_);
#endif
    ::munmap(start_, reserved_);
}

void TaskRegion::reserve() {
    if (start_ != nullptr) return;
    // A system that will not reserve 16 GiB of address space (a ulimit -v) gets less.
    for (std::size_t want = kMaxBytes; want >= kLeastBytes; want /= 2) {
        char* p = reserve_aligned(want);
        if (p == nullptr) continue;
        start_ = p;
        reserved_ = want;
        // The first aligned block is never handed out, so no record sits at reference 0.
        bump_ = p + kAlign;
#if DUEQ_ASAN
        // Records may hold the only pointer to a heap block (a large record's tail).
        __lsan_register_root_region(p, want);
#endif
        return;
    }
    throw std::bad_alloc();
}

char* TaskRegion::take_slab(std::size_t bytes) {
    reserve();
    const std::size_t l = log2_of(bytes);
    if (l >= kLogSizes || (std::size_t{1} << l) != bytes) throw std::bad_alloc();
    auto& list = free_slabs_[l];
    if (!list.empty()) {
        char* slab = list.back();
        list.pop_back();
        in_use_ += bytes;
        return slab;
    }
    char* end = start_ + reserved_;
    char* slab = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(bump_) + bytes - 1) &
                                         ~(bytes - 1));
    if (slab > end || static_cast<std::size_t>(end - slab) < bytes) throw std::bad_alloc();
    if (::mprotect(slab, bytes, PROT_READ | PROT_WRITE) != 0) throw std::bad_alloc();
    bump_ = slab + bytes;
    in_use_ += bytes;
    return slab;
}

void TaskRegion::give_slab(char* slab, std::size_t bytes) {
    if (slab == nullptr) return;
    ::madvise(slab, bytes, MADV_DONTNEED);
    free_slabs_[log2_of(bytes)].push_back(slab);
    in_use_ -= bytes;
}

void* TaskRegion::take_node() {
    if (free_nodes_ == nullptr) {
        // Node slabs are kept for the region's life: a few kilobytes per thousand trees.
        char* slab = take_slab(kNodeSlabBytes);
        for (std::size_t off = kNodeSlabBytes; off >= kNodeBytes; off -= kNodeBytes) {
            void* node = slab + off - kNodeBytes;
            *static_cast<void**>(node) = free_nodes_;
            free_nodes_ = node;
        }
    }
    void* node = free_nodes_;
    free_nodes_ = *static_cast<void**>(node);
    return node;
}

void TaskRegion::give_node(void* node) {
    if (node == nullptr) return;
    *static_cast<void**>(node) = free_nodes_;
    free_nodes_ = node;
}

}  // namespace dueq::queue::detail
