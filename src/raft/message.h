// Messages between Raft peers. The core produces them in Ready::messages and consumes
// them in Raft::step(); how they travel (and how they are encoded) is the shell's job.
//
// One struct for every type keeps the shell's plumbing simple; each field's meaning
// per type is listed below. Unused fields are zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "raft/types.h"

namespace dueq::raft {

enum class MessageType : std::uint8_t {
    pre_vote,       // §9.6: "would you vote for me in term `term`?" (changes nobody's term)
    pre_vote_resp,  // reject=false: granted
    vote,           // §3.4 RequestVote
    vote_resp,
    append,  // §3.5 AppendEntries (also carries the commit index)
    append_resp,
    snapshot,   // §5.3 InstallSnapshot, whole snapshot in one message
    heartbeat,  // §3.4 empty AppendEntries without a log check; carries a read context
    heartbeat_resp,
    timeout_now,  // §3.10 leadership transfer: "start an election now"
};

std::string_view to_string(MessageType t);

// Field use by type:
//  pre_vote/vote:   term = candidate's (next) term, index/log_term = candidate's last
//                   entry, context = 1 when the election is a leadership transfer.
//  *_vote_resp:     reject = refused.
//  append:          index/log_term = entry before `entries`, commit = leader's commit,
//                   context = the leader's generation for this follower (echoed).
//  append_resp:     reject=false: index = last index now known to match the leader.
//                   reject=true:  index = the rejected append's `index`; hint_index and
//                   log_term = the follower's guess where logs may match (§5.3 "fast
//                   backtracking": the last entry at or before `index` whose term is
//                   <= the leader's prev term).
//  snapshot:        snapshot = the snapshot; the reply is an append_resp.
//  heartbeat:       commit = min(leader commit, follower's match); context = read round.
//  heartbeat_resp:  context echoed.
struct Message {
    MessageType type = MessageType::append;
    NodeId from = kNoNode;
    NodeId to = kNoNode;
    Term term = 0;
    Index index = 0;
    Term log_term = 0;
    Index commit = 0;
    bool reject = false;
    Index hint_index = 0;
    std::uint64_t context = 0;
    std::vector<Entry> entries;
    std::optional<Snapshot> snapshot;

    bool operator==(const Message&) const = default;
};

// True for the types that are requests for votes (pre-vote or real).
constexpr bool is_vote_request(MessageType t) {
    return t == MessageType::pre_vote || t == MessageType::vote;
}

}  // namespace dueq::raft
