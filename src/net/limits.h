// Caps on what a client may send. Checked on the wire before anything is allocated,
// and again by the store before anything changes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/limits.h"

namespace dueq::net {

// Defaults and ranges: wire/limits.h.
struct Limits {
    std::size_t max_frame_bytes = limits::kMaxFrameBytes.dflt;
    std::size_t max_key_bytes = limits::kMaxKeyBytes.dflt;
    std::size_t max_payload_bytes = limits::kMaxPayloadBytes.dflt;
    std::size_t max_queue_name_bytes = limits::kMaxQueueNameBytes;
    std::uint32_t max_take_count = limits::kMaxTakeCount.dflt;
    std::size_t max_waiting_takes = limits::kMaxWaitingTakes.dflt;  // parked on one node
    // Client connections: over either cap a new connection is told `unavailable` and closed.
    std::size_t max_connections = limits::kMaxConnections.dflt;
    std::size_t max_connections_per_address = limits::kMaxConnectionsPerAddress.dflt;
    // Requests read from one connection and not answered yet; at the cap the node stops
    // reading from it until an answer goes out (blocking takes count while they wait).
    std::size_t max_in_flight = limits::kMaxInFlight.dflt;
    // A frame that has started arriving must be complete within this (slowloris), and a
    // connection with nothing in flight that sends nothing for idle_timeout_ms is closed.
    std::uint32_t frame_timeout_ms = limits::kFrameTimeoutMs.dflt;
    std::uint32_t idle_timeout_ms = limits::kIdleTimeoutMs.dflt;
    int max_depth = limits::kMaxDepth;
    // The store budget (node/store_budget.h); unset: the node lowers it to half its RAM.
    std::uint64_t max_store_bytes = limits::kMaxStoreBytes.dflt;
    bool max_store_bytes_set = false;
};

// Reads a socket gets in one turn of the event loop while a sender keeps the buffer full
// (client connections and peer links); then it waits its turn behind the others.
constexpr int kReadsPerTurn = 4;

}  // namespace dueq::net
