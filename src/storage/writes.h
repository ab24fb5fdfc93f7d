// What a node hands its storage to write, and what a restart reads back: plain data,
// shared by the RocksDB storage (database.h) and the simulator's in-memory disk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "raft/types.h"

namespace dueq::storage {

// The persistence half of one Raft Ready: entries replace whatever the log holds from
// entries[0].index on (§3.5: a follower drops a conflicting suffix).
struct LogWrite {
    std::vector<raft::Entry> entries;
    std::optional<raft::HardState> hard_state;
    bool sync = true;  // false: nothing in it needs to survive a crash (a commit-index move)
};

struct TaskChange {
    std::string queue, key;
    std::optional<std::string> encoded;  // nullopt: the task is gone
};

// What applying entries up to `applied_index` changed, written as one atomic batch.
struct AppliedState {
    std::uint64_t applied_index = 0;
    std::int64_t applied_time = 0;
    std::vector<TaskChange> changes;
    std::string store_meta;  // queue::Store::encode_meta
    // Log entries up to and including trim.index may be deleted; trim is then the
    // entry just before the log (index 0: no trim).
    raft::SnapshotMeta trim;
};

// Writes of an autonomous node to its overlay (docs/autonomy.md), keyed like tasks.
struct OverlayChange {
    std::string queue, key;
    std::optional<std::string> record;  // queue::encode_overlay_record; nullopt: merged, remove
};
struct OverlayWrite {
    std::vector<OverlayChange> changes;
    bool sync = true;  // false: removals after a merge (a lost one is merged again)
};

// A snapshot received from the leader, to replace everything this node holds.
struct SnapshotInstall {
    raft::SnapshotMeta meta;
    raft::HardState hard_state;
    std::vector<std::pair<std::string, std::string>> tasks;  // tasks key -> sealed record
    std::string store_meta_sealed;                           // as Reader::store_meta gives it
};

// What a node holds on disk when it starts.
struct Loaded {
    raft::HardState hard_state;
    raft::SnapshotMeta base;           // the entry just before the first one in `entries`
    std::vector<raft::Entry> entries;  // the whole log, in order, from base.index + 1
    std::uint64_t applied_index = 0;   // `store` holds the state after this entry
    std::int64_t applied_time = 0;
    std::vector<OverlayChange> overlay;  // what an autonomous node has not merged yet
    // Where the load's time went, for the log: reading the task records into the store,
    // then ordering them in its indexes.
    std::int64_t tasks_read_ms = 0, indexes_built_ms = 0;
};

}  // namespace dueq::storage
