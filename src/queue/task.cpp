#include "queue/task.h"

#include <new>

namespace dueq::queue::detail {

Task* Task::create(TaskArena& arena, std::uint16_t queue_id, std::string_view key,
                   std::string_view payload) {
    void* mem = arena.allocate(sizeof(Task) + key.size() + payload.size());
    Task* t = new (mem) Task();
    arena.content_bytes += key.size() + payload.size();
    t->queue_id = queue_id;
    t->key_len = static_cast<std::uint16_t>(key.size());
    t->payload_len = static_cast<std::uint32_t>(payload.size());
    if (!key.empty()) std::memcpy(t->tail(), key.data(), key.size());
    if (!payload.empty()) std::memcpy(t->tail() + key.size(), payload.data(), payload.size());
    return t;
}

void Task::destroy(TaskArena& arena, Task* t) {
    const std::size_t size = t->alloc_size();
    arena.content_bytes -= t->key_len + t->payload_len;
    t->~Task();
    arena.deallocate(t, size);
}

}  // namespace dueq::queue::detail
