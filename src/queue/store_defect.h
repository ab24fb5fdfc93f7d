// Test-only defects of the task store that the simulator must catch
// (tests/sim/planted_defects_test.cpp). Store::plant selects one; it acts only in builds with
// DUEQ_PLANTED_BUGS; testing/planted names them.
#pragma once

#include <cstdint>

namespace dueq::queue {

enum class StoreDefect : std::uint8_t {
    none,
    fork_put_below_deletion,  // a put in a fork ignores the fork's own deletion of the key
    merge_older_finish_wins,  // a merged finished task wins even when older than the key
};

}  // namespace dueq::queue
