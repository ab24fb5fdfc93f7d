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
    // Client connections: over either cap a new connection is told `unavailable` and closed.
    std::size_t max_connections = 10'000;
    std::size_t max_connections_per_address = 1'000;
    // Requests read from one connection and not answered yet; at the cap the node stops
    // reading from it until an answer goes out (blocking takes count while they wait).
    std::size_t max_in_flight = 1'024;
    // A frame that has started arriving must be complete within this (slowloris), and a
    // connection with nothing in flight that sends nothing for idle_timeout_ms is closed.
    std::uint32_t frame_timeout_ms = 10'000;
    std::uint32_t idle_timeout_ms = 600'000;
    int max_depth = 32;
};

// Reads a socket gets in one turn of the event loop while a sender keeps the buffer full
// (client connections and peer links); then it waits its turn behind the others.
constexpr int kReadsPerTurn = 4;

}  // namespace dueq::net
