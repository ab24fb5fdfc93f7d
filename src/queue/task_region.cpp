#include "queue/task_region.h"

#include "queue/task_arena.h"  // DUEQ_ASAN

#include <sys/mman.h>

#include <mutex>
#include <new>
#include <vector>

#if DUEQ_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace dueq::queue::detail::region {
namespace {

constexpr std::size_t kAlign = std::size_t{2} << 20;
constexpr std::size_t kNodeBytes = 16;
constexpr std::size_t kNodeSlabBytes = 64 * 1024;
constexpr std::size_t kLogSizes = 22;  // slabs of 2^0 .. 2^21 bytes

struct State {
    std::mutex mu;
    char* bump = nullptr;  // next never-used byte
    char* end = nullptr;
    std::size_t reserved = 0;
    std::size_t in_use = 0;
    std::vector<char*> free_slabs[kLogSizes];
    void* free_nodes = nullptr;  // a list through each block's first word
};

State& state() {
    // Never destroyed: a store that outlives static destruction still gives back to it.
    static State* s = new State;
    return *s;
}

std::size_t log2_of(std::size_t bytes) {
    std::size_t l = 0;
    while ((std::size_t{1} << l) < bytes)
        ++l;
    return l;
}

// Called with the lock held.
void reserve(State& s) {
    if (base != nullptr) return;
    // A system that will not reserve 16 GiB of address space (a ulimit -v) gets less.
    for (std::size_t want = kMaxBytes; want >= (std::size_t{64} << 20); want /= 2) {
        void* p = ::mmap(nullptr, want + kAlign, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) continue;
        auto* raw = static_cast<char*>(p);
        char* aligned = reinterpret_cast<char*>(
            (reinterpret_cast<std::uintptr_t>(raw) + kAlign - 1) & ~(kAlign - 1));
        s.reserved = want;
        // The first aligned block is never handed out, so no record sits at reference 0.
        s.bump = aligned + kAlign;
        s.end = aligned + want;
        base = aligned;
#if DUEQ_ASAN
        // Records may hold the only pointer to a heap block (a large record's tail).
        __lsan_register_root_region(aligned, want);
#endif
        return;
    }
    throw std::bad_alloc();
}

char* take_locked(State& s, std::size_t bytes) {
    reserve(s);
    const std::size_t l = log2_of(bytes);
    if (l >= kLogSizes || (std::size_t{1} << l) != bytes) throw std::bad_alloc();
    auto& list = s.free_slabs[l];
    if (!list.empty()) {
        char* slab = list.back();
        list.pop_back();
        s.in_use += bytes;
        return slab;
    }
    char* slab = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(s.bump) + bytes - 1) &
                                         ~(bytes - 1));
    if (slab > s.end || static_cast<std::size_t>(s.end - slab) < bytes) throw std::bad_alloc();
    if (::mprotect(slab, bytes, PROT_READ | PROT_WRITE) != 0) throw std::bad_alloc();
    s.bump = slab + bytes;
    s.in_use += bytes;
    return slab;
}

}  // namespace

char* take_slab(std::size_t bytes) {
    State& s = state();
    std::lock_guard lock(s.mu);
    return take_locked(s, bytes);
}

void give_slab(char* slab, std::size_t bytes) {
    if (slab == nullptr) return;
    // Emptied outside the lock: a 2 MiB slab's pages take a while to unmap.
    ::madvise(slab, bytes, MADV_DONTNEED);
    State& s = state();
    std::lock_guard lock(s.mu);
    s.free_slabs[log2_of(bytes)].push_back(slab);
    s.in_use -= bytes;
}

void* take_node() {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (s.free_nodes == nullptr) {
        // Node slabs are kept for the process's life: a few kilobytes per thousand trees.
        char* slab = take_locked(s, kNodeSlabBytes);
        for (std::size_t off = kNodeSlabBytes; off >= kNodeBytes; off -= kNodeBytes) {
            void* node = slab + off - kNodeBytes;
            *static_cast<void**>(node) = s.free_nodes;
            s.free_nodes = node;
        }
    }
    void* node = s.free_nodes;
    s.free_nodes = *static_cast<void**>(node);
    return node;
}

void give_node(void* node) {
    if (node == nullptr) return;
    State& s = state();
    std::lock_guard lock(s.mu);
    *static_cast<void**>(node) = s.free_nodes;
    s.free_nodes = node;
}

std::size_t slab_bytes_in_use() {
    State& s = state();
    std::lock_guard lock(s.mu);
    return s.in_use;
}

std::size_t reserved_bytes() {
    State& s = state();
    std::lock_guard lock(s.mu);
    reserve(s);
    return s.reserved;
}

}  // namespace dueq::queue::detail::region
