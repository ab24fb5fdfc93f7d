#include "queue/task_arena.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
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
    for (std::size_t i = 0; i < slabs_.size(); ++i) {
        DUEQ_UNPOISON(slabs_[i], slab_size(i));
        std::free(slabs_[i]);
    }
}

void TaskArena::new_slab() {
    const std::size_t bytes = slab_size(slabs_.size());
    const bool huge = bytes == kHugeSlabBytes;  // aligned to a huge page, so it can be one
    bump_ = static_cast<char*>(std::aligned_alloc(huge ? kHugeSlabBytes : 64, bytes));
    if (bump_ == nullptr) throw std::bad_alloc();
    // Only advice: without huge pages (or with them off) the slab works the same.
    if (huge) ::madvise(bump_, bytes, MADV_HUGEPAGE);
    bump_end_ = bump_ + bytes;
    slab_bytes_ += bytes;
    slabs_.push_back(bump_);
    DUEQ_POISON(bump_, bytes);
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
