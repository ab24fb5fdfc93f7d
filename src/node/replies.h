// Response frames of each op (docs/protocol.md gives their fields).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/request.h"
#include "queue/store.h"

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
};

std::string hello_reply(std::uint64_t id, std::uint64_t session, const std::string& node_id,
                        const std::string& leader);
std::string get_reply(std::uint64_t id, const queue::TaskView& task);
// `queue` null: every queue.
std::string stats_reply(std::uint64_t id, const queue::Store& store, const std::string* queue,
                        std::int64_t now);
std::string status_reply(std::uint64_t id, const StatusInfo& s);
// The answer to an applied command: the fields its type returns, or its error.
std::string result_reply(std::uint64_t id, const queue::Command& cmd, const queue::Result& result);

}  // namespace dueq::node
