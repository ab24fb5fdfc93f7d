#include "queue/task_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>

namespace dueq::queue::detail {

namespace {
constexpr std::size_t kInitialSlots = 16;

std::uint64_t mix(std::uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}
}  // namespace

SlotArray::SlotArray(std::size_t n) : size_(n) {
    constexpr std::size_t kHuge = 2u << 20;
    const std::size_t bytes = n * kSlotBytes + 8;
    if (bytes < kHuge) {
        bytes_ = static_cast<unsigned char*>(std::calloc(bytes, 1));
        if (bytes_ == nullptr) throw std::bad_alloc();
        return;
    }
    // Map a huge page more than needed and keep the aligned part, so that every 2 MiB of
    // it can be a huge page.
    const std::size_t want = (bytes + kHuge - 1) & ~(kHuge - 1);
    void* p =
        ::mmap(nullptr, want + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const auto begin = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t aligned = (begin + kHuge - 1) & ~(kHuge - 1);
    if (aligned > begin) ::munmap(p, aligned - begin);
    if (const std::size_t tail = begin + want + kHuge - (aligned + want))
        ::munmap(reinterpret_cast<void*>(aligned + want), tail);
    // Only advice: without huge pages the table works the same, with more TLB misses.
    advise_huge(reinterpret_cast<void*>(aligned), want);
    bytes_ = reinterpret_cast<unsigned char*>(aligned);
    mapped_bytes_ = want;
}

SlotArray& SlotArray::operator=(SlotArray&& o) noexcept {
    if (this != &o) {
        release();
        bytes_ = std::exchange(o.bytes_, nullptr);
        size_ = std::exchange(o.size_, 0);
        mapped_bytes_ = std::exchange(o.mapped_bytes_, 0);
    }
    return *this;
}

void SlotArray::release() {
    if (mapped_bytes_ != 0)
        ::munmap(bytes_, mapped_bytes_);
    else
        std::free(bytes_);
    bytes_ = nullptr;
    size_ = mapped_bytes_ = 0;
}

TaskTable::TaskTable() : slots_(kInitialSlots) {}

std::uint64_t TaskTable::hash(std::uint16_t queue_id, std::string_view key) {
    // A fixed function (not std::hash) so the probe sequences, and thus the costs, are the
    // same on every build; 8 bytes at a time through a 64-bit finalizer.
    std::uint64_t h = mix(0x9e3779b97f4a7c15ULL ^ queue_id ^ (key.size() << 16));
    std::size_t i = 0;
    for (; i + 8 <= key.size(); i += 8) {
        std::uint64_t w;
        std::memcpy(&w, key.data() + i, 8);
        h = mix(h ^ w) + 0x632be59bd9b4e019ULL;
    }
    std::uint64_t w = 0;
    std::memcpy(&w, key.data() + i, key.size() - i);
    return mix(h ^ w ^ 0xa0761d6478bd642fULL);
}

std::size_t TaskTable::home_of(std::uint64_t h, std::size_t slots) {
    // Multiply-shift range reduction instead of a power-of-two mask, so the table can grow
    // by 1.5x and stay between 58% and 87% full (5.7-8.6 bytes per task).
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::size_t>((u128{h} * slots) >> 64);
}

Task* TaskTable::find_in(const SlotArray& slots, std::uint16_t queue_id, std::string_view key,
                         std::uint64_t h) const {
    const std::uint64_t tag = tag_of(h);
    const std::size_t n = slots.size();
    for (std::size_t i = home_of(h, n);; i = next(i, n)) {
        const std::uint64_t v = slots.get(i);
        if (v == 0) return nullptr;
        if ((v & kTagBits) != tag || v == kMoved) continue;
        Task* t = task_of(v);
        if (t->queue_id == queue_id && t->key() == key) return t;
    }
}

Task* TaskTable::find(std::uint16_t queue_id, std::string_view key) const {
    if (!moving_.empty()) move_some(kMoveSlots);
    const std::uint64_t h = hash(queue_id, key);
    Task* t = find_in(slots_, queue_id, key, h);
    if (t == nullptr && !moving_.empty()) t = find_in(moving_, queue_id, key, h);
    return t;
}

std::size_t TaskTable::find_slot(const Task* t, std::size_t* in_moving) const {
    const std::uint64_t h = hash(t->queue_id, t->key());
    const std::uint64_t want = slot_value(t, h);
    for (std::size_t i = home_of(h, slots_.size()); slots_.get(i) != 0; i = next(i, slots_.size()))
        if (slots_.get(i) == want) return i;
    assert(!moving_.empty());
    for (std::size_t i = home_of(h, moving_.size());; i = next(i, moving_.size())) {
        assert(moving_.get(i) != 0);
        if (moving_.get(i) == want) {
            *in_moving = i;
            return slots_.size();
        }
    }
}

void TaskTable::place(std::uint64_t v, std::uint64_t h) const {
    std::size_t i = home_of(h, slots_.size());
    while (slots_.get(i) != 0)
        i = next(i, slots_.size());
    slots_.set(i, v);
}

void TaskTable::insert(Task* t) {
    if (anchor_ == nullptr) anchor_ = t;
    assert(TaskRegion::at(anchor_, TaskRegion::ref_of(t)) == t);
    if (!moving_.empty()) move_some(kMoveSlots);
    // Grow at 7/8 full: linear probing stays short enough there for hits, and lookups of
    // missing keys (put of a new task) pay once per put, not per take.
    if ((size_ + 1) * 8 > slots_.size() * 7) grow(slots_.size() + slots_.size() / 2);
    const std::uint64_t h = hash(t->queue_id, t->key());
    place(slot_value(t, h), h);
    ++size_;
}

void TaskTable::reserve(std::size_t n) {
    // Room for n at 3/4 full, so that growing right after is not due either.
    const std::size_t want = n + n / 3 + 1;
    if (want <= slots_.size()) return;
    grow(want);
    finish_move();  // a restart reserves before it loads: the table is empty or small
}

void TaskTable::replace(const Task* old_task, Task* new_task) {
    assert(TaskRegion::at(anchor_, TaskRegion::ref_of(new_task)) == new_task);
    std::size_t in_moving = 0;
    const std::size_t i = find_slot(old_task, &in_moving);
    const std::uint64_t h = hash(new_task->queue_id, new_task->key());
    if (i < slots_.size())
        slots_.set(i, slot_value(new_task, h));
    else
        moving_.set(in_moving, slot_value(new_task, h));
}

void TaskTable::erase(const Task* t) {
    if (!moving_.empty()) move_some(kMoveSlots);
    std::size_t in_moving = 0;
    std::size_t hole = find_slot(t, &in_moving);
    --size_;
    if (hole == slots_.size()) {
        // The previous array is only read until its move ends: a marker keeps the chains
        // through this slot whole.
        moving_.set(in_moving, kMoved);
        return;
    }
    slots_.set(hole, 0);
    // Backward-shift: pull later entries of the cluster into the hole when their home
    // slot does not lie cyclically in (hole, j].
    const std::size_t n = slots_.size();
    for (std::size_t j = next(hole, n);; j = next(j, n)) {
        const std::uint64_t v = slots_.get(j);
        if (v == 0) break;
        const Task* o = task_of(v);
        std::size_t home = home_of(hash(o->queue_id, o->key()), n);
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays) continue;
        slots_.set(hole, v);
        slots_.set(j, 0);
        hole = j;
    }
}

void TaskTable::grow(std::size_t slots) {
    finish_move();
    moving_ = std::move(slots_);
    slots_ = SlotArray(slots);
    moved_ = 0;
    if (size_ == 0) moving_ = SlotArray();
}

void TaskTable::move_some(std::size_t n) const {
    const std::size_t end = std::min(moved_ + n, moving_.size());
    for (; moved_ < end; ++moved_) {
        const std::uint64_t v = moving_.get(moved_);
        if (v == 0 || v == kMoved) continue;
        const Task* t = task_of(v);
        place(v, hash(t->queue_id, t->key()));
        moving_.set(moved_, kMoved);
    }
    if (moved_ == moving_.size()) {
        moving_ = SlotArray();
        moved_ = 0;
    }
}

}  // namespace dueq::queue::detail
