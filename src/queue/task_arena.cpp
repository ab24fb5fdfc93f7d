#include "queue/task_arena.h"

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

TaskArena::~TaskArena() {
    for (char* slab : slabs_) {
        DUEQ_UNPOISON(slab, kSlabBytes);
        ::operator delete(static_cast<void*>(slab));
    }
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
        bump_ = static_cast<char*>(::operator new(kSlabBytes));
        bump_end_ = bump_ + kSlabBytes;
        slabs_.push_back(bump_);
        DUEQ_POISON(bump_, kSlabBytes);
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
