#include "queue/task_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "common/huge_pages.h"

#if DUEQ_ASAN
#include <sanitizer/asan_interface.h>
#define DUEQ_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define DUEQ_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define DUEQ_POISON(p, n) ((void)(p), (void)(n))
#define DUEQ_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace dueq::queue::detail {

std::size_t TaskArena::slab_size(std::size_t i) {
    return i < kSmallSlabs ? kSlabBytes : kHugeSlabBytes;
}

TaskArena::~TaskArena() {
    drop_spares();
    for (std::size_t i = 0; i < slabs_.size(); ++i) {
        DUEQ_UNPOISON(slabs_[i], slab_size(i));
        region_.give_slab(slabs_[i], slab_size(i));
    }
}

char* TaskArena::huge_slab() {
    // Aligned to a huge page, so it can be one.
    char* slab = region_.take_slab(kHugeSlabBytes);
    advise_huge(slab, kHugeSlabBytes);
    return slab;
}

void TaskArena::new_slab() {
    const std::size_t bytes = slab_size(slabs_.size());
    const std::size_t spare = spares_used_.load(std::memory_order_relaxed);
    if (bytes != kHugeSlabBytes) {
        bump_ = region_.take_slab(bytes);
    } else if (spare < spares_.size()) {
        bump_ = spares_[spare];
        spares_used_.store(spare + 1, std::memory_order_release);
    } else {
        bump_ = huge_slab();
    }
    bump_end_ = bump_ + bytes;
    slab_bytes_ += bytes;
    slabs_.push_back(bump_);
    DUEQ_POISON(bump_, bytes);
}

void TaskArena::reserve_spares(std::size_t bytes) {
    drop_spares();
    const std::size_t n = bytes / kHugeSlabBytes + 1;
    spares_.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        spares_.push_back(huge_slab());
}

void TaskArena::drop_spares() {
    for (std::size_t i = spares_used_.load(); i < spares_.size(); ++i)
        region_.give_slab(spares_[i], kHugeSlabBytes);
    spares_.clear();
    spares_.shrink_to_fit();
    spares_used_ = 0;
    prefaulted_ = 0;
}

void TaskArena::prefault_spares(std::size_t ahead) {
#ifndef MADV_POPULATE_WRITE
    constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older kernels refuse it
#endif
    const std::size_t used = spares_used_.load(std::memory_order_acquire);
    // Never the slab in use or one before it: those are the loading thread's.
    std::size_t i = std::max(prefaulted_, used);
    // A few slabs per call: the caller has other work, and comes back.
    const std::size_t until = std::min({spares_.size(), used + ahead, i + 2});
    for (; prefault_works_ && i < until; ++i)
        prefault_works_ = ::madvise(spares_[i], kHugeSlabBytes, MADV_POPULATE_WRITE) == 0;
    prefaulted_ = i;
}

void* TaskArena::allocate(std::size_t bytes) {
    const std::size_t size = rounded(bytes);
    if (size > kMaxSmall) {
        large_bytes_ += size;
        used_bytes_ += size;
        return ::operator new(size);
    }
    used_bytes_ += size;
    FreeBlock*& head = free_[size / 8];
    if (head != nullptr) {
        FreeBlock* b = head;
        DUEQ_UNPOISON(b, size);
        head = b->next;
        return b;
    }
    if (static_cast<std::size_t>(bump_end_ - bump_) < size) {
        // The tail of the old slab is left unused: at most kMaxSmall of kSlabBytes.
        new_slab();
    }
    void* p = bump_;
    bump_ += size;
    DUEQ_UNPOISON(p, size);
    return p;
}

void TaskArena::deallocate(void* p, std::size_t bytes) {
    const std::size_t size = rounded(bytes);
    used_bytes_ -= size;
    if (size > kMaxSmall) {
        large_bytes_ -= size;
        ::operator delete(p);
        return;
    }
    auto* b = static_cast<FreeBlock*>(p);
    b->next = free_[size / 8];
    free_[size / 8] = b;
    DUEQ_POISON(b, size);
}

}  // namespace dueq::queue::detail
