// CPU time this process has used so far, all threads, user and system: what the tools
// and tests that measure a cost per operation divide by.
#pragma once

#include <sys/resource.h>

namespace dueq {

inline double process_cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace dueq
