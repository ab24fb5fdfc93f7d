// Test-only defects of the Raft shell that the simulator and the chaos harness must catch.
// The shell acts on one only in builds with DUEQ_PLANTED_BUGS; testing/planted names them.
#pragma once

#include <cstdint>

namespace dueq::shell {

enum class ShellDefect : std::uint8_t {
    none,
    applies_uncommitted,     // applies appended entries before they are committed
    lease_from_local_clock,  // applies at this node's clock instead of the log time
    reply_before_commit,     // answers a proposal as soon as it is in the leader's log
    merge_dropped,           // applies no Merge: every write of autonomous mode is lost
};

}  // namespace dueq::shell
