// Memory advised as transparent huge pages: for big arrays that are filled once, where
// every fresh 4 KiB page would otherwise fault on its first write.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace dueq {

// Only advice: without huge pages the memory works the same.
inline void advise_huge(void* p, std::size_t bytes) {
    ::madvise(p, bytes, MADV_HUGEPAGE);
}

// An allocator that, from kFromBytes on (default 4 MiB), asks for memory aligned to and
// advised as huge pages, so that filling 200 MB takes a hundred page faults instead of
// fifty thousand. Smaller arrays come from the usual heap.
template <class T, std::size_t kFromBytes = (std::size_t{4} << 20)>
struct HugePageAllocator {
    using value_type = T;
    static constexpr std::size_t kHuge = std::size_t{2} << 20;
    template <class U>
    struct rebind {
        using other = HugePageAllocator<U, kFromBytes>;
    };
    HugePageAllocator() = default;
    template <class U>
    HugePageAllocator(const HugePageAllocator<U, kFromBytes>&) {}
    static bool huge(std::size_t n) { return n * sizeof(T) >= kFromBytes; }
    T* allocate(std::size_t n) {
        if (!huge(n)) return std::allocator<T>{}.allocate(n);
        const std::size_t bytes = (n * sizeof(T) + kHuge - 1) & ~(kHuge - 1);
        void* p = std::aligned_alloc(kHuge, bytes);
        if (p == nullptr) throw std::bad_alloc();
        advise_huge(p, bytes);
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) {
        if (huge(n))
            std::free(p);
        else
            std::allocator<T>{}.deallocate(p, n);
    }
    template <class U>
    bool operator==(const HugePageAllocator<U, kFromBytes>&) const {
        return true;
    }
};

}  // namespace dueq
