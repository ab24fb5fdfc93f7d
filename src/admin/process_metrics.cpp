#include "admin/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/process_cpu.h"

namespace dueq::admin {

namespace {
// The system's boot time, from /proc/stat's btime: a process's start is given after it.
double boot_time_seconds() {
    std::ifstream in("/proc/stat");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
    return 0;
}
}  // namespace

ProcessFigures read_process_figures() {
    ProcessFigures f;
    f.cpu_seconds = process_cpu_seconds();
    const long page = sysconf(_SC_PAGESIZE), ticks = sysconf(_SC_CLK_TCK);
    if (std::ifstream statm("/proc/self/statm"); statm) {
        std::uint64_t size = 0, resident = 0;
        if (statm >> size >> resident) {
            f.virtual_bytes = size * std::uint64_t(page);
            f.resident_bytes = resident * std::uint64_t(page);
        }
    }
    // Field 22 of /proc/self/stat, after the command name in parentheses: start time in
    // clock ticks after boot.
    if (std::ifstream stat("/proc/self/stat"); stat && ticks > 0) {
        std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        const auto close = text.rfind(')');
        if (close != std::string::npos) {
            std::istringstream rest(text.substr(close + 2));
            std::string field;
            for (int i = 3; i <= 22 && rest >> field; ++i)
                if (i == 22)
                    f.start_time_seconds = boot_time_seconds() + std::stod(field) / double(ticks);
        }
    }
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
        ++f.open_fds;
    if (f.open_fds > 0) --f.open_fds;  // the listing's own
    if (rlimit r{}; getrlimit(RLIMIT_NOFILE, &r) == 0) f.max_fds = r.rlim_cur;
    return f;
}

}  // namespace dueq::admin
