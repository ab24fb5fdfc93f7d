// Requests a node answers from its own state, without the log: get, stats, status.
#include "net/frame.h"
#include "node/node.h"
#include "node/replies.h"

namespace dueq::node {

using queue::Code;

namespace {
constexpr const char* kLeaderOnly = "consistency \"leader\" reads are served by the leader";
}  // namespace

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::GetTask& get) {
    if (get.leader_only && !is_leader()) {
        send_error(conn, id, Code::not_leader, kLeaderOnly);
        return Code::not_leader;
    }
    auto task = shell_->store().get(get.queue, get.key);
    if (!task) {
        conn->send(net::error_frame(id, Code::not_found, "no such task"));
        return Code::not_found;
    }
    conn->send(get_reply(id, *task));
    return Code::ok;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::GetStats& stats) {
    if (stats.leader_only && !is_leader()) {
        send_error(conn, id, Code::not_leader, kLeaderOnly);
        return Code::not_leader;
    }
    conn->send(
        stats_reply(id, shell_->store(), stats.queue ? &*stats.queue : nullptr, store_now()));
    return Code::ok;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::GetStatus&) {
    conn->send(status_reply(id, status_info()));
    return Code::ok;
}

StatusInfo Node::status_info() const {
    const raft::Raft& raft = shell_->raft();
    StatusInfo s;
    s.node_id = config_.node_id;
    s.role = config_.members.size() > 1 || !is_leader() ? std::string(raft::to_string(raft.role()))
                                                        : "standalone";
    s.term = raft.term();
    s.leader = leader_client_address();
    s.leader_id = member_id(config_, raft.leader());
    s.commit_index = raft.log().committed();
    s.last_index = raft.log().last_index();
    s.applied_index = applied_index();
    s.tasks = shell_->store().task_count();
    s.pending = shell_->pending_proposals();
    s.peer_input_dropped = raft_io_->dropped();
    s.mode = to_string(autonomy_->mode());
    s.mode_ms = now_ms() - autonomy_->mode_since();
    s.overlay = autonomy_->overlay_size();
    s.served_autonomous = autonomy_->totals().served;
    const auto& heal = autonomy_->last_heal();
    s.merged = heal.merged;
    s.merge_taken_over = heal.taken_over;
    s.merge_kept = heal.kept;
    s.merge_both_sides = heal.both_sides;
    for (std::size_t i = 0; i < config_.members.size(); ++i) {
        if (i + 1 == raft_id_) continue;
        PeerStatus p{config_.members[i].id, config_.members[i].peer,
                     raft_io_->has_mesh() && raft_io_->connected(i + 1)};
        if (const auto* pr = raft.progress(i + 1)) {
            p.match = pr->match;
            p.lag = s.last_index > pr->match ? s.last_index - pr->match : 0;
        }
        s.peers.push_back(std::move(p));
    }
    return s;
}

}  // namespace dueq::node
