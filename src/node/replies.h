// Response frames of each op (docs/protocol.md gives their fields).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/request.h"
#include "queue/store.h"
#include "wire/protocol.h"

namespace dueq::node {

struct PeerStatus {
    std::string id, peer;
    bool connected = false;
    std::uint64_t match = 0, lag = 0;  // leader only
};

struct StatusInfo {
    std::string node_id, role, leader, leader_id;  // leader: its client address
    std::uint64_t term = 0, commit_index = 0, last_index = 0, applied_index = 0;
    std::uint64_t tasks = 0, pending = 0;
    std::uint64_t peer_input_dropped = 0;  // peer frames refused before the Raft core
    std::vector<PeerStatus> peers;
    // Autonomous mode (docs/autonomy.md).
    std::string mode{wire::word::normal};  // wire::kNodeModes
    std::int64_t mode_ms = 0;             // time in that mode
    std::uint64_t overlay = 0;            // writes of autonomous mode not merged yet
    std::uint64_t served_autonomous = 0;  // commands served in autonomous mode (since start)
    // The latest heal: overlay records merged; of them, those that became the task, those
    // dropped for a newer write of the majority, those written on both sides.
    std::uint64_t merged = 0, merge_taken_over = 0, merge_kept = 0, merge_both_sides = 0;
};

// One member as `members` lists it.
struct MemberStatus {
    std::string name;
    std::uint64_t raft_id = 0;
    bool voter = true;
    std::string peer, client, admin;
    bool connected = false;            // this node's link to it (true for itself)
    std::uint64_t match = 0, lag = 0;  // as the leader sees it; 0 elsewhere
};

struct MembersInfo {
    std::vector<MemberStatus> members;
    std::string leader_id;               // the leader's name; empty when unknown
    std::uint64_t membership_index = 0;  // the entry it came from (0: the config's list)
    bool pending = false;                // not committed yet
};

// One chunk of a backup (the `backup` op): the stream, its place, the view's index, term
// and time, who sent it, and the records.
struct BackupReply {
    std::uint64_t backup = 0;
    std::uint32_t seq = 0;
    std::uint64_t index = 0, term = 0;
    std::int64_t time = 0;
    std::string_view cluster, node_id, data;  // viewed, not copied: one reply per chunk
    bool last = false;
};

std::string get_reply(std::uint64_t id, const queue::TaskView& task);
std::string backup_reply(std::uint64_t id, const BackupReply& b);
std::string members_reply(std::uint64_t id, const MembersInfo& m);
// A membership change applied: the member it was about.
std::string member_changed_reply(std::uint64_t id, const std::string& name, std::uint64_t raft_id);
// `queue` null: every queue.
std::string stats_reply(std::uint64_t id, const queue::Store& store, const std::string* queue,
                        std::int64_t now);
std::string status_reply(std::uint64_t id, const StatusInfo& s);
// One page of `list`: the tasks, and where the next page starts when there is one.
std::string list_reply(std::uint64_t id, const queue::ListPage& page);
// The answer to an applied command: the fields its type returns, or its error.
std::string result_reply(std::uint64_t id, const queue::Command& cmd, const queue::Result& result);

}  // namespace dueq::node
