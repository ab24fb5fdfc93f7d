// The test-only defects a whole node can carry: one per layer, each acting only in builds
// with DUEQ_PLANTED_BUGS. The product never selects one; testing/planted names them for
// dueqd-test, the simulator and the tests, which fill this seam.
#pragma once

#include <cstdint>

#include "queue/store_defect.h"
#include "raft/config.h"
#include "shell/shell_defect.h"

namespace dueq::node {

enum class NodeDefect : std::uint8_t {
    none,
    // Serves keys of other shards itself instead of forwarding them, so they land on the
    // wrong shard (tests/shard/two_shards_test.cpp).
    shard_serves_every_key,
    // Serves a `consistency: "leader"` read at once, without confirming this node still
    // leads (tests/cluster/stale_leader_read.py).
    leader_reads_unconfirmed,
};

struct PlantedDefects {
    raft::PlantedBug core = raft::PlantedBug::none;
    shell::ShellDefect shell = shell::ShellDefect::none;
    queue::StoreDefect store = queue::StoreDefect::none;
    NodeDefect node = NodeDefect::none;
    bool operator==(const PlantedDefects&) const = default;
};

}  // namespace dueq::node
