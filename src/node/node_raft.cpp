// The node's side of the Raft shell: starting it over RocksDB and the peer mesh, proposing
// commands and answering their clients, ticks, and what a batch of applied entries wakes;
// and the shard map this node routes by (docs/sharding.md).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "node/node.h"
#include "wire/protocol.h"

namespace dueq::node {

namespace asio = boost::asio;
using queue::Code;

shell::ShellConfig Node::shell_config() const {
    shell::ShellConfig sc;
    raft::Config& rc = sc.raft;
    rc.id = raft_id_;
    // A new cluster starts from the config's members; a joining node from nothing (the
    // leader's log or snapshot says who the members are). The applied state's membership,
    // if any, takes over from either (RaftShell::start).
    if (!joined_) {
        const raft::Membership seed = seed_membership(config_);
        rc.voters = seed.voters;
        rc.directory = seed.directory;
    }
    rc.election_tick = int(config_.raft.election_timeout_ms / config_.raft.tick_ms);
    rc.heartbeat_tick = int(std::max(1u, config_.raft.heartbeat_ms / config_.raft.tick_ms));
    rc.snapshot_threshold = config_.raft.snapshot_entries;
    rc.seed = std::uint64_t(now_ms()) ^ (raft_id_ << 32);
    rc.planted_bug = planted_.core;
    sc.proposal_timeout_ms = config_.raft.proposal_timeout_ms;
    sc.campaign_step_ms = config_.raft.heartbeat_ms;
    sc.log_keep = config_.log_keep;
    sc.state_write_entries = config_.state_write_entries;
    sc.state_write_ms = config_.state_write_ms;
    sc.defect = planted_.shell;
    sc.store_defect = planted_.store;
    return sc;
}

std::optional<std::string> Node::start_shell(const storage::Loaded& loaded,
                                             std::unique_ptr<queue::Store> store) {
    raft_io_ = std::make_unique<RaftIo>(io_, config_, raft_id_, *db_, [this] { return now_ms(); });
    raft_io_->set_data_ids(
        {data_id_,
         // Until the leader records a member's data id in the membership, the first one
         // its handshakes named since this node started stands in: a member wiped in its
         // first seconds is refused too, unless every other member restarted meanwhile.
         [this](std::uint64_t peer) {
             auto it = known_members_.find(peer);
             if (it != known_members_.end() && it->second.data_id != 0) return it->second.data_id;
             auto seen = seen_data_ids_.find(peer);
             return seen == seen_data_ids_.end() ? std::uint64_t(0) : seen->second;
         },
         [this](std::uint64_t peer, std::uint64_t data) { seen_data_ids_.emplace(peer, data); },
         [this](std::uint64_t peer, std::uint64_t known) {
             spdlog::critical(
                 "member {} knows this node ({}, raft id {}) by data id {:#x}, but this data "
                 "dir's is {:#x}: it is not the data dir this member had (wiped or replaced), "
                 "and a node must not vote with a log it no longer has, so the members refuse "
                 "it. Remove this member (dueqctl member remove {}) and add this machine as a "
                 "new member with an empty data dir (dueqd --join; docs/operations.md).",
                 member_name(peer), config_.node_id, raft_id_, known, data_id_, config_.node_id);
         }});
    raft_io_->set_peer_tls({tls_.peer_accept, tls_.peer_dial, [this](std::uint64_t peer) {
                                auto known = known_members_.find(peer);
                                if (known != known_members_.end()) return known->second.name;
                                const MemberEntry* m = members_.by_id(peer);
                                return m ? m->name : std::string();
                            }});
    shell::Hooks hooks;
    hooks.schedule = [this] { schedule_ready(); };
    hooks.applied = [this](bool wrote) {
        writes_->on_batch_applied(wrote, now_ms());
        if (leader_reads_) leader_reads_->on_applied();
        arm_timer();
    };
    hooks.term_started = [this] {
        propose_configured_settings();
        writes_->on_term_started(now_ms());
        arm_timer();
    };
    hooks.fatal = [this](const std::string& message) { fail_stop(message); };
    hooks.fork_ended = [this] {
        if (autonomy_) autonomy_->on_fork_ended();
    };
    hooks.merged = [this](const queue::Merge& m, const queue::Result& r) {
        if (autonomy_) autonomy_->on_merge_applied(m, r);
    };
    hooks.on_read_state = [this](const raft::ReadState& rs) {
        if (leader_reads_) leader_reads_->on_read_state(rs);
    };
    hooks.membership_changed = [this] { on_membership_changed(); };
    shell_ =
        std::make_unique<shell::RaftShell>(shell_config(), *raft_io_, *raft_io_, std::move(hooks));
    if (auto err = shell_->start(loaded, std::move(store))) return err;
    members_ = current_members();
    if (auto err = check_member_name()) return err;
    WritePathSettings ws;
    ws.max_take_count = config_.limits.max_take_count;
    ws.max_waiting_takes = config_.limits.max_waiting_takes;
    ws.session_grace_ms = config_.session_grace_ms;
    // Session ids are unique across the cluster: the low bits say which node made it.
    ws.node_bits = raft_id_;
    ws.first_session = std::uint64_t(now_ms()) << 4;
    writes_ = std::make_unique<WritePath>(ws, *shell_);
    leader_reads_ = std::make_unique<LeaderReads>(*shell_, config_.raft.proposal_timeout_ms,
                                                  [this] { schedule_ready(); });
    AutonomySettings as;
    as.after_ms = config_.raft.autonomy_after_ms;
    as.self = raft_id_;
    as.members = std::max<std::size_t>(1, config_.members.size());
    as.max_waiting_takes = config_.limits.max_waiting_takes;
    autonomy_ = std::make_unique<Autonomy>(
        as, *shell_, writes_->sessions(), *raft_io_,
        [this](raft::NodeId leader, const std::vector<queue::Merge>& merges) {
            raft_io_->send_merges(leader, merges);
        },
        now_ms());
    if (!autonomy_->load(loaded.overlay))
        return "refusing to serve from " + config_.data_dir + ": a corrupt overlay record";
    raft_io_->set_autonomy(autonomy_.get());
    raft_io_->set_checkpoint(db_->checkpoint(shell_->log().snapshot().meta));
    peers_ = members_;
    if (auto err = raft_io_->start(*shell_, members_)) return err;
    on_tick();
    return std::nullopt;
}

std::string Node::leader_client_address() const {
    const raft::NodeId leader = shell_ ? shell_->raft().leader() : raft::kNoNode;
    if (leader == raft::kNoNode) return {};
    if (config_.members.empty()) return config_.client_advertise;
    const MemberEntry* m = members_.by_id(leader);
    return m ? m->client : std::string();
}

void Node::propose_configured_settings() {
    auto declare = [](const std::string& queue, const queue::QueueSettings& s) {
        return queue::Declare{queue,          s.lead_ms,    s.ttr_ms,    s.retention_ms,
                              s.max_attempts, s.late_share, s.autonomous};
    };
    const queue::Store& store = shell_->store();
    if (!(store.default_settings() == config_.queue_defaults)) {
        spdlog::info(
            "[queues.default] of this node's config differs from the replicated "
            "defaults; proposing it");
        writes_->propose(declare(std::string(queue::kDefaultsQueue), config_.queue_defaults),
                         nullptr, now_ms());
    }
    for (const auto& [name, s] : config_.queues) {
        if (name == wire::kDefaultQueue || store.settings(name) == s) continue;
        spdlog::info(
            "[queues.{}] of this node's config differs from the replicated settings; "
            "proposing it",
            name);
        writes_->propose(declare(name, s), nullptr, now_ms());
    }
}

void Node::on_tick() {
    if (stopped_) return;
    shell_->tick(now_ms());
    update_peers(false);  // a new leader, or a removed member it stops telling
    record_data_ids();
    publish_shard_members();
    leader_reads_->on_tick(is_leader(), now_ms());
    if (admin_) admin_->observe_raft();
    const bool was_serving = autonomy_->serving();
    autonomy_->on_tick(now_ms());
    if (autonomy_->serving() != was_serving) arm_timer();
    raft_io_->pump();
    backups_.sweep(now_ms());
    drive_moves();
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
        if (stopped_) return;
        // The leader reads of this turn get their read point into this Ready; read_index
        // asks for a Ready again, which the flag still makes a no-op.
        if (leader_reads_) leader_reads_->flush();
        ready_scheduled_ = false;
        shell_->process_ready();
        writes_->after_ready(now_ms());
    });
}

void Node::on_timer() {
    timer_at_ = 0;
    if (stopped_) return;
    // An autonomous node is its own leader: leases, parked takes and sessions are its.
    if (autonomy_->serving())
        autonomy_->on_timer(now_ms());
    else
        writes_->on_timer(now_ms());
    arm_timer();
}

void Node::arm_timer() {
    if (stopped_ || !writes_ || !autonomy_) return;
    auto at = writes_->next_deadline();
    if (auto a = autonomy_->next_deadline()) at = at ? std::min(*at, *a) : *a;
    if (!at || (timer_at_ != 0 && timer_at_ <= *at)) return;
    timer_at_ = *at;
    // A task due in 300 years would overflow the timer's nanoseconds; waking once an hour
    // to look again costs nothing.
    const std::int64_t delay = std::clamp<std::int64_t>(*at - now_ms(), 0, 3'600'000);
    timer_.expires_after(std::chrono::milliseconds(delay));
    timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) on_timer();
    });
}

void Node::fail_stop(const std::string& message) {
    spdlog::critical("stopping: {}", message);
    spdlog::shutdown();
    std::_Exit(70);
}

// ---- the shard map

namespace {

// This Raft group's members as a shard map lists them.
std::vector<shard::ShardMember> group_members(const Config& c) {
    if (c.members.empty()) return {{c.node_id, c.client_advertise}};
    std::vector<shard::ShardMember> group;
    for (const auto& m : c.members)
        group.push_back({m.id, m.client});
    return group;
}

// Why `map` cannot be this node's map: its shard must exist. The members the map lists for
// it only seed routing (the group's committed membership replaces them everywhere:
// publish_shard_members, Router::start_discovery), so they may predate a membership change,
// and a name removed and added again may be at another address now.
std::string own_shard_mismatch(const shard::ShardMap& map, const Config& c) {
    if (!map.find(c.shard_name))
        return "the shard map has no shard named '" + c.shard_name + "' ([shard] name)";
    return "";
}

}  // namespace

std::optional<std::string> Node::start_sharding() {
    shard::ShardMap map;
    std::string own = config_.shard_name;
    if (config_.shard_map_file.empty()) {
        own = config_.cluster_id;
        map = shard::single_shard_map(own, group_members(config_));
    } else {
        try {
            map = shard::load_shard_map_file(config_.shard_map_file);
        } catch (const std::exception& e) {
            return std::string("shard map: ") + e.what();
        }
        if (auto why = own_shard_mismatch(map, config_); !why.empty())
            return config_.shard_map_file + ": " + why;
        spdlog::info("shard '{}' of {} (shard map version {}, {} of {} buckets)", own,
                     map.shards.size(), map.version, map.bucket_total(*map.find(own)),
                     map.bucket_count);
    }
    own_shard_ = *map.find(own);
    shard::RouterOptions options;
    options.tls = forwarding_tls(config_);
    if (!config_.auth_token.empty()) options.token = config_.auth_token;
    // The other shard answers a write within its proposal timeout (3 s by default); a
    // little more covers the hop, and stays within a client's usual 5 s.
    options.call_timeout = std::chrono::milliseconds(config_.raft.proposal_timeout_ms + 500);
    router_ = std::make_unique<shard::Router>(io_, std::move(map), std::move(options));
    if (!config_.shard_map_file.empty()) router_->start_discovery(own_shard_, config_.node_id);
    return std::nullopt;
}

std::string Node::reload_shard_map() {
    if (!router_) return "the node is not serving";
    const auto& current = router_->map();
    std::string why = "this node has no [shard] map_file";
    std::optional<shard::ShardMap> next;
    if (!config_.shard_map_file.empty()) {
        next = shard::load_for_reload(config_.shard_map_file, current, config_.shard_name, why);
        if (next) why = own_shard_mismatch(*next, config_);
    }
    if (!why.empty()) {
        spdlog::warn("shard map reload refused: {}; still routing by version {}", why,
                     current.version);
        return why;
    }
    spdlog::info("shard map version {} in use (was {}): {} shards", next->version, current.version,
                 next->shards.size());
    own_shard_ = *next->find(config_.shard_name);
    router_->set_map(std::move(*next));
    router_->start_discovery(own_shard_, config_.node_id);
    return "";
}

}  // namespace dueq::node
