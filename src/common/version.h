// Which build runs: the project version and the git revision it was built from (generated
// at build time by cmake/write_version.cmake). Every binary's --version, the node's
// `hello` and `status` answers, /status and dueq_build_info say it.
#pragma once

#include <string>
#include <string_view>

namespace dueq {

std::string_view version();
std::string_view revision();  // short git hash, "-dirty" with uncommitted changes, or "unknown"

// "0.1.0 (abc123def456)": what hello and status say.
inline std::string build() {
    return std::string(version()) + " (" + std::string(revision()) + ")";
}
// "dueqd 0.1.0 (abc123def456)": what --version prints.
inline std::string version_line(std::string_view program) {
    return std::string(program) + " " + build();
}

}  // namespace dueq
