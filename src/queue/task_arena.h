// Memory for task records. Internal to src/queue.
//
// Slabs come from the store's task region (task_region.h), where the trees can link
// records by 32-bit references. Blocks above kMaxSmall are on the heap, outside it: a record that
// large keeps its header in a small block and its key and payload in the large one.
//
// Ten million small records through malloc cost each an 8-byte chunk header and up to
// 15 bytes of rounding to 16. The arena instead carves records of up to kMaxSmall bytes
// out of slabs, rounded to 8 bytes, with one free list per size: about 12 bytes per task
// less at typical sizes. Freed records are reused by records of the same rounded size;
// slabs go back only when the arena dies. Larger records use the heap.
//
// The first slabs are 256 KiB (small stores stay small); after kSmallSlabs of them they
// are 2 MiB, aligned and advised as transparent huge pages: a store of millions of
// tasks then takes one page fault per 2 MiB instead of per 4 KiB as it fills (a restart
// fills it at once), and its random index walks miss the TLB less.
#pragma once

// gcc says __SANITIZE_ADDRESS__, clang __has_feature(address_sanitizer).
#if defined(__SANITIZE_ADDRESS__)
#define DUEQ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DUEQ_ASAN 1
#endif
#endif
#ifndef DUEQ_ASAN
#define DUEQ_ASAN 0
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "queue/task_region.h"

namespace dueq::queue::detail {

class TaskArena {
  public:
    static constexpr std::size_t kMaxSmall = 1024;
    static constexpr std::size_t kSlabBytes = 256 * 1024;
    static constexpr std::size_t kHugeSlabBytes = 2 * 1024 * 1024;
    static constexpr std::size_t kSmallSlabs = 8;

    explicit TaskArena(TaskRegion& region) : region_(region) {}
    ~TaskArena();
    TaskArena(const TaskArena&) = delete;
    TaskArena& operator=(const TaskArena&) = delete;

    void* allocate(std::size_t bytes);
    // `bytes` must be what was passed to allocate().
    void deallocate(void* p, std::size_t bytes);

    // Bytes obtained from the system (slabs plus large records), free lists included.
    std::size_t reserved_bytes() const { return slab_bytes_ + large_bytes_; }
    // Bytes in records handed out, with their rounding.
    std::size_t used_bytes() const { return used_bytes_; }

    // A restart's load: sets aside (without touching) slabs for about `bytes` of records,
    // so that prefault_spares() can fault them in on another thread while this one fills
    // the slabs before them. drop_spares() frees those the load did not use.
    void reserve_spares(std::size_t bytes);
    void drop_spares();
    // Faults in the spare slabs up to `ahead` slabs past the one in use. The one method
    // that may run on another thread, and only between reserve_spares and drop_spares;
    // it only asks the kernel for pages (MADV_POPULATE_WRITE) and never writes a byte.
    void prefault_spares(std::size_t ahead);

    // Key and payload bytes of the live records, kept by Task::create/destroy so the
    // store can tell its overhead without walking ten million records.
    std::size_t content_bytes = 0;

  private:
    struct FreeBlock {
        FreeBlock* next;
    };
    static std::size_t rounded(std::size_t bytes) { return (bytes + 7) & ~std::size_t{7}; }

    static std::size_t slab_size(std::size_t i);  // of the i-th slab
    void new_slab();
    char* huge_slab();

    TaskRegion& region_;
    std::vector<char*> spares_;                // huge slabs set aside for a load
    std::atomic<std::size_t> spares_used_{0};  // taken by new_slab, in order
    std::size_t prefaulted_ = 0;               // of spares_, by prefault_spares
    bool prefault_works_ = true;
    std::vector<char*> slabs_;  // the first kSmallSlabs of kSlabBytes, then kHugeSlabBytes
    std::size_t slab_bytes_ = 0;
    char* bump_ = nullptr;  // next unused byte of the newest slab
    char* bump_end_ = nullptr;
    FreeBlock* free_[kMaxSmall / 8 + 1] = {};
    std::size_t large_bytes_ = 0;
    std::size_t used_bytes_ = 0;
};

}  // namespace dueq::queue::detail
