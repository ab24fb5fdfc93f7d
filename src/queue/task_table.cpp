#include "queue/task_table.h"

#include <cassert>

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

TaskTable::TaskTable() : slots_(kInitialSlots, nullptr) {}

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

std::size_t TaskTable::slot_of(std::uint16_t queue_id, std::string_view key) const {
    // Multiply-shift range reduction instead of a power-of-two mask, so the table can grow
    // by 1.5x and stay between 58% and 87% full (8-14 bytes per task).
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::size_t>((u128{hash(queue_id, key)} * slots_.size()) >> 64);
}

Task* TaskTable::find(std::uint16_t queue_id, std::string_view key) const {
    for (std::size_t i = slot_of(queue_id, key);; i = next(i)) {
        Task* t = slots_[i];
        if (t == nullptr) return nullptr;
        if (t->queue_id == queue_id && t->key() == key) return t;
    }
}

std::size_t TaskTable::find_slot(const Task* t) const {
    for (std::size_t i = slot_of(t->queue_id, t->key());; i = next(i)) {
        if (slots_[i] == t) return i;
        assert(slots_[i] != nullptr);
    }
}

void TaskTable::insert(Task* t) {
    // Grow at 7/8 full: linear probing stays short enough there for hits, and lookups of
    // missing keys (put of a new task) pay once per put, not per take.
    if ((size_ + 1) * 8 > slots_.size() * 7) grow();
    std::size_t i = slot_of(t->queue_id, t->key());
    while (slots_[i] != nullptr)
        i = next(i);
    slots_[i] = t;
    ++size_;
}

void TaskTable::replace(const Task* old_task, Task* new_task) {
    slots_[find_slot(old_task)] = new_task;
}

void TaskTable::erase(const Task* t) {
    std::size_t hole = find_slot(t);
    slots_[hole] = nullptr;
    --size_;
    // Backward-shift: pull later entries of the cluster into the hole when their home
    // slot does not lie cyclically in (hole, j].
    for (std::size_t j = next(hole); slots_[j] != nullptr; j = next(j)) {
        std::size_t home = slot_of(slots_[j]->queue_id, slots_[j]->key());
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays) continue;
        slots_[hole] = slots_[j];
        slots_[j] = nullptr;
        hole = j;
    }
}

void TaskTable::grow() {
    std::vector<Task*> old;
    old.swap(slots_);
    slots_.assign(old.size() + old.size() / 2, nullptr);
    for (Task* t : old) {
        if (t == nullptr) continue;
        std::size_t i = slot_of(t->queue_id, t->key());
        while (slots_[i] != nullptr)
            i = next(i);
        slots_[i] = t;
    }
}

}  // namespace dueq::queue::detail
