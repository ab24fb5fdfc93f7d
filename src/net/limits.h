// Caps on what a client may send. Checked on the wire before anything is allocated,
// and again by the store before anything changes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dueq::net {

struct Limits {
    std::size_t max_frame_bytes = 16u << 20;
    std::size_t max_key_bytes = 1024;
    std::size_t max_payload_bytes = 1u << 20;
    std::size_t max_queue_name_bytes = 256;
    std::uint32_t max_take_count = 1000;
    std::size_t max_waiting_takes = 100'000;  // blocking takes parked on one node
    int max_depth = 32;
};

}  // namespace dueq::net
