// The Ready batch: everything the core wants the shell to do, and in which order.
//
// Contract (the shell, for each Ready, in this order):
//  0. `messages_before_persist` may be sent at once, before or while step 1 runs: the
//     core put there only what promises nothing about this node's disk.
//  1. Persist: install `snapshot` (LogStorage::apply_snapshot), append `entries`
//     (LogStorage::append), store `hard_state`. When `must_sync` is set, all of it is
//     durable (fsynced) before step 2. When it is not, the write changes nothing a
//     restart needs (only the commit index moved, which peers teach again): the shell
//     may write it without an fsync and go on without waiting.
//  2. Send `messages`. They may promise what step 1 wrote (a vote, an appended entry),
//     so sending any of them earlier is a safety bug (Figure 3.1: persistent state is
//     "updated on stable storage before responding to RPCs").
//  3. Apply `committed_entries` in order (after the snapshot, if any); answer
//     `read_states` once the state machine has applied their index.
//  3a. While step 1 of one Ready is in flight, entries committed since may be taken with
//     Raft::take_committed and applied at once: the cluster holds them durably. The
//     limit keeps a replica's applied state from getting ahead of its own log, which
//     must hold every applied entry once the write in flight is done.
//  4. If `snapshot_wanted` is set, snapshot the state machine (at its applied index) and
//     compact the log when convenient.
//  5. Call Raft::advance(ready) before asking for the next Ready.
// step/tick/propose may be called between ready() and advance(); what they produce goes
// into the next Ready.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "raft/message.h"
#include "raft/types.h"

namespace dueq::raft {

enum class Role : std::uint8_t { follower, pre_candidate, candidate, leader };

// A read request that is now safe to serve (§6.4): once the state machine has applied
// `index`, the read sees every write that was committed before the request was made.
struct ReadState {
    Index index = 0;
    std::uint64_t context = 0;  // the caller's id for the request
};

struct Ready {
    std::optional<HardState> hard_state;  // set when it changed
    std::vector<Entry> entries;
    std::optional<Snapshot> snapshot;
    // Sent after the write (step 2).
    std::vector<Message> messages;
    // May leave before the write is durable (step 0). The leader's appends, heartbeats
    // and snapshots: a leader counts itself toward a commit only for entries advance()
    // has confirmed durable (Raft::self_match), and its term and vote were made durable
    // before it could win, so writing its own log in parallel with its followers'
    // writes is safe (Ongaro's thesis §10.2.1). Everything else waits.
    std::vector<Message> messages_before_persist;
    // `hard_state` changed term or vote, or there are entries: fsync before step 2.
    bool must_sync = false;
    std::vector<Entry> committed_entries;
    std::vector<ReadState> read_states;
    // The core asks for a snapshot: enough applied log has piled up since the last one.
    std::optional<Index> snapshot_wanted;

    // Soft state, for the shell's information (not persisted).
    Role role = Role::follower;
    NodeId leader = kNoNode;
    Term term = 0;

    bool empty() const {
        return !hard_state && entries.empty() && !snapshot && messages.empty() &&
               messages_before_persist.empty() && committed_entries.empty() &&
               read_states.empty() && !snapshot_wanted;
    }
};

std::string_view to_string(Role r);

}  // namespace dueq::raft
