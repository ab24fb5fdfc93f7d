// The node's side of the Raft shell: starting it over RocksDB and the peer mesh, proposing
// commands and answering their clients, ticks, and what a batch of applied entries wakes.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "node/node.h"

namespace dueq::node {

namespace asio = boost::asio;
using queue::Code;

shell::ShellConfig Node::shell_config() const {
    shell::ShellConfig sc;
    raft::Config& rc = sc.raft;
    rc.id = raft_id_;
    for (std::size_t i = 0; i < std::max<std::size_t>(1, config_.members.size()); ++i)
        rc.voters.push_back(i + 1);
    rc.election_tick = int(config_.raft.election_timeout_ms / config_.raft.tick_ms);
    rc.heartbeat_tick = int(std::max(1u, config_.raft.heartbeat_ms / config_.raft.tick_ms));
    rc.snapshot_threshold = config_.raft.snapshot_entries;
    rc.seed = std::uint64_t(now_ms()) ^ (raft_id_ << 32);
    rc.planted_bug = raft_bug_;
    sc.members = std::max<std::size_t>(1, config_.members.size());
    sc.proposal_timeout_ms = config_.raft.proposal_timeout_ms;
    sc.campaign_step_ms = config_.raft.heartbeat_ms;
    sc.log_keep = config_.log_keep;
    return sc;
}

std::optional<std::string> Node::start_shell(const storage::Loaded& loaded,
                                             std::unique_ptr<queue::Store> store) {
    raft_id_ = config_.members.empty() ? 1 : raft_id_of(config_, config_.node_id);
    raft_io_ = std::make_unique<RaftIo>(io_, config_, raft_id_, *db_, [this] { return now_ms(); });
    shell::Hooks hooks;
    hooks.schedule = [this] { schedule_ready(); };
    hooks.applied = [this](bool wrote) { on_batch_applied(wrote); };
    hooks.term_started = [this] { propose_configured_settings(); };
    hooks.fatal = [this](const std::string& message) { fail_stop(message); };
    shell_ =
        std::make_unique<shell::RaftShell>(shell_config(), *raft_io_, *raft_io_, std::move(hooks));
    if (auto err = shell_->start(loaded, std::move(store))) return err;
    raft_io_->set_checkpoint(db_->checkpoint(shell_->log().snapshot().meta));
    if (auto err = raft_io_->start(*shell_)) return err;
    on_tick();
    return std::nullopt;
}

std::string Node::leader_client_address() const {
    const raft::NodeId leader = shell_ ? shell_->raft().leader() : raft::kNoNode;
    if (leader == raft::kNoNode) return {};
    if (config_.members.empty()) return config_.client_advertise;
    return config_.members[leader - 1].client;
}

raft::Index Node::propose(queue::Command cmd, Reply reply) {
    const bool advance = std::holds_alternative<queue::Advance>(cmd);
    const raft::Index index =
        shell_->propose(std::move(cmd), now_ms(),
                        [this, advance, reply = std::move(reply)](shell::Outcome& o) mutable {
                            if (advance) advance_index_ = 0;
                            if (o.code != Code::ok) return answer_error(reply, o.code, o.message);
                            on_applied(*o.command, *o.result, reply);
                        });
    if (advance && index != 0) advance_index_ = index;
    return index;
}

void Node::propose_configured_settings() {
    auto declare = [](const std::string& queue, const queue::QueueSettings& s) {
        return queue::Declare{queue,          s.lead_ms,      s.ttr_ms,
                              s.retention_ms, s.max_attempts, s.late_share};
    };
    const queue::Store& store = shell_->store();
    if (!(store.default_settings() == config_.queue_defaults)) {
        spdlog::info(
            "[queues.default] of this node's config differs from the replicated "
            "defaults; proposing it");
        propose(declare(std::string(queue::kDefaultsQueue), config_.queue_defaults), Reply{});
    }
    for (const auto& [name, s] : config_.queues) {
        if (name == "default" || store.settings(name) == s) continue;
        spdlog::info(
            "[queues.{}] of this node's config differs from the replicated settings; "
            "proposing it",
            name);
        propose(declare(name, s), Reply{});
    }
}

void Node::on_tick() {
    if (stopped_) return;
    shell_->tick(now_ms());
    raft_io_->pump();
    tick_timer_.expires_after(std::chrono::milliseconds(config_.raft.tick_ms));
    tick_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) on_tick();
    });
}

void Node::schedule_ready() {
    if (ready_scheduled_ || stopped_) return;
    ready_scheduled_ = true;
    // After the frames already read are handled, so that they share one Ready.
    asio::post(io_, [this] {
        ready_scheduled_ = false;
        if (!stopped_) shell_->process_ready();
    });
}

void Node::on_batch_applied(bool wrote) {
    // A follower holds no waiters to wake but the leader's (they learn where it went).
    if (wrote || !is_leader()) {
        for (const auto& queue : waiters_.queues())
            wake_waiters(queue);
    }
    arm_timer();
}

void Node::fail_stop(const std::string& message) {
    spdlog::critical("stopping: {}", message);
    spdlog::shutdown();
    std::_Exit(70);
}

}  // namespace dueq::node
