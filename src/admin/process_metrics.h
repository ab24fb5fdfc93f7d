// The process_* series Prometheus's client libraries export (its "process collector"),
// read from /proc/self: memory (RSS is the capacity signal of an in-memory store), CPU,
// file descriptors against their limit, and the start time.
#pragma once

#include <cstdint>

namespace dueq::admin {

struct ProcessFigures {
    std::uint64_t resident_bytes = 0, virtual_bytes = 0;
    double cpu_seconds = 0;
    std::uint64_t open_fds = 0, max_fds = 0;
    double start_time_seconds = 0;  // since the epoch
};

// Figures that cannot be read stay 0.
ProcessFigures read_process_figures();

}  // namespace dueq::admin
