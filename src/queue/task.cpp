#include "queue/task.h"

#include <new>

namespace dueq::queue::detail {

Task* Task::create(TaskArena& arena, std::uint16_t queue_id, std::string_view key,
                   std::string_view payload) {
    const std::size_t content = key.size() + payload.size();
    void* mem = arena.allocate(header_block_size(content));
    Task* t = new (mem) Task();
    if (sizeof(Task) + content > TaskArena::kMaxSmall) {
        t->indirect = 1;
        try {
            t->tail_block() = static_cast<char*>(arena.allocate(content));
        } catch (...) {
            arena.deallocate(t, header_block_size(content));
            throw;
        }
    }
    arena.content_bytes += content;
    t->queue_id = queue_id;
    t->key_len = key.size();
    t->payload_len = static_cast<std::uint32_t>(payload.size());
    if (!key.empty()) std::memcpy(t->tail(), key.data(), key.size());
    if (!payload.empty()) std::memcpy(t->tail() + key.size(), payload.data(), payload.size());
    return t;
}

void Task::destroy(TaskArena& arena, Task* t) {
    const std::size_t content = t->key_len + t->payload_len;
    arena.content_bytes -= content;
    if (t->indirect) arena.deallocate(t->tail_block(), content);
    t->~Task();
    arena.deallocate(t, header_block_size(content));
}

}  // namespace dueq::queue::detail
