// The Ready batch: everything the core wants the shell to do, and in which order.
//
// Contract (the shell, for each Ready, in this order):
//  1. Persist: install `snapshot` (LogStorage::apply_snapshot), append `entries`
//     (LogStorage::append), store `hard_state`. All durable before step 2.
//  2. Send `messages`. They may promise what step 1 wrote (a vote, an appended entry),
//     so sending any of them earlier is a safety bug (Figure 3.1: persistent state is
//     "updated on stable storage before responding to RPCs").
//  3. Apply `committed_entries` in order (after the snapshot, if any); answer
//     `read_states` once the state machine has applied their index.
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
    std::vector<Message> messages;
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
               committed_entries.empty() && read_states.empty() && !snapshot_wanted;
    }
};

std::string_view to_string(Role r);

}  // namespace dueq::raft
