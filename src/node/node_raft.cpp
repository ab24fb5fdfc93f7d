// The node's side of the Raft shell: starting it over RocksDB and the peer mesh, proposing
// commands and answering their clients, ticks, and what a batch of applied entries wakes;
// and the shard map this node routes by (docs/sharding.md).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "net/peer_handshake.h"
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

namespace {
// "cluster=ID member=NODE raft_id=N[ joined]": who this data dir's votes and log are, and
// whether it joined a running cluster (dueqd --join: it learns the membership from the
// leader, never from its config's list).
std::string member_record(const Config& c, std::uint64_t raft_id, bool joined = false) {
    return "cluster=" + c.cluster_id + " member=" + c.node_id +
           " raft_id=" + std::to_string(raft_id) + (joined ? " joined" : "");
}

// A record is "<who> data=HEX": the data id ends it (records written before data ids have
// none).
std::string record_who(const std::string& record) {
    const auto at = record.rfind(" data=");
    return at == std::string::npos ? record : record.substr(0, at);
}

std::uint64_t record_data_id(const std::string& record) {
    const auto at = record.rfind(" data=");
    if (at == std::string::npos) return 0;
    try {
        return std::stoull(record.substr(at + 6), nullptr, 16);
    } catch (const std::exception&) {
        return 0;
    }
}

std::string with_data_id(const std::string& who, std::uint64_t data_id) {
    return fmt::format("{} data={:016x}", who, data_id);
}

std::uint64_t new_data_id() {
    const net::Nonce n = net::random_nonce();
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
        v = (v << 8) | n[std::size_t(i)];
    return v == 0 ? 1 : v;
}

// The Raft id a record names (0 if it names none).
std::uint64_t record_raft_id(const std::string& record) {
    const auto at = record.find(" raft_id=");
    if (at == std::string::npos) return 0;
    try {
        return std::stoull(record.substr(at + 9));
    } catch (const std::exception&) {
        return 0;
    }
}
}  // namespace

// Written at the first start and checked at every later one, so that a node never runs on
// another member's data (a mixed-up data_dir) nor under another Raft id: either would let
// it vote with a log it never wrote. The id is the record's from then on (membership
// changes make ids that are no place in any config's list); check_member_name compares it
// with the membership in force once that is loaded.
std::optional<std::string> Node::check_member_record() {
    std::string stored;
    if (auto st = db_->read_member(stored); !st.ok)
        return "refusing to serve from " + config_.data_dir + ": " + st.message;
    if (stored.empty()) {
        joined_ = config_.join_id != 0;
        raft_id_ = joined_                   ? config_.join_id
                   : config_.members.empty() ? 1
                                             : raft_id_of(config_, config_.node_id);
        data_id_ = new_data_id();
        const std::string record = with_data_id(member_record(config_, raft_id_, joined_), data_id_);
        if (auto st = db_->write_member(record); !st.ok) return st.message;
        return std::nullopt;
    }
    const std::string who = record_who(stored);
    raft_id_ = record_raft_id(who);
    joined_ = who.ends_with(" joined");
    data_id_ = record_data_id(stored);
    const std::string mine = member_record(config_, raft_id_, joined_);
    if (raft_id_ != 0 && who == mine && (config_.join_id == 0 || config_.join_id == raft_id_)) {
        if (data_id_ != 0) return std::nullopt;
        data_id_ = new_data_id();  // a data dir from before data ids
        if (auto st = db_->write_member(with_data_id(who, data_id_)); !st.ok) return st.message;
        return std::nullopt;
    }
    const std::uint64_t wanted = config_.join_id != 0      ? config_.join_id
                                 : config_.members.empty() ? 1
                                                           : raft_id_of(config_, config_.node_id);
    return "refusing to serve from " + config_.data_dir + ": it holds the data of " + who +
           ", but this config makes this node " + member_record(config_, wanted) +
           ". Give each member its own data_dir; a new member (dueqd --join) starts from an "
           "empty one.";
}

std::optional<std::string> Node::check_member_name() const {
    const MemberDirectory& dir = members_;
    const MemberEntry* by_id = dir.by_id(raft_id_);
    const MemberEntry* by_name = dir.by_name(config_.node_id);
    // A node that joined may know a membership from before it was added, in which its
    // name may belong to the member it replaced.
    if (by_id ? by_id->name == config_.node_id : (!by_name || joined_)) return std::nullopt;
    const std::uint64_t listed = by_name ? by_name->raft_id : 0;
    return "refusing to serve from " + config_.data_dir + ": it holds the data of " +
           member_record(config_, raft_id_) + ", but the membership in force makes this node " +
           member_record(config_, listed) +
           (shell_->store().membership().empty()
                ? ". List [cluster] members in the same order on every node (a member's Raft id "
                  "is its place in that list until the membership first changes)."
                : ". Each member has its own data_dir.");
}

std::optional<std::string> Node::start_shell(const storage::Loaded& loaded,
                                             std::unique_ptr<queue::Store> store) {
    raft_io_ = std::make_unique<RaftIo>(io_, config_, raft_id_, *db_, [this] { return now_ms(); });
    raft_io_->set_data_ids(
        {data_id_,
         [this](std::uint64_t peer) {
             auto it = known_members_.find(peer);
             return it == known_members_.end() ? std::uint64_t(0) : it->second.data_id;
         },
         [this](std::uint64_t peer, std::uint64_t data) { seen_data_ids_[peer] = data; },
         [this](std::uint64_t peer, std::uint64_t known) {
             spdlog::critical(
                 "member {} knows this node ({}, raft id {}) by data id {:#x}, but this data "
                 "dir's is {:#x}: it is not the data dir this member had (wiped or replaced), "
                 "and a node must not vote with a log it no longer has, so the members refuse "
                 "it. Remove this member (dueqctl member remove {}) and add this machine as a "
                 "new member with an empty data dir (dueqd --join; docs/operations.md).",
                 member_name(peer), config_.node_id, raft_id_, known, data_id_, config_.node_id);
         }});
    shell::Hooks hooks;
    hooks.schedule = [this] { schedule_ready(); };
    hooks.applied = [this](bool wrote) {
        writes_->on_batch_applied(wrote, now_ms());
        if (leader_reads_) leader_reads_->on_applied();
        arm_timer();
    };
    hooks.term_started = [this] { propose_configured_settings(); };
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
    ws.first_session = std::uint64_t(now_ms()) << 12;
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
    update_peers();  // a removed member the leader stops telling
    record_data_ids();
    leader_reads_->on_tick(is_leader(), now_ms());
    if (admin_) admin_->observe_raft();
    const bool was_serving = autonomy_->serving();
    autonomy_->on_tick(now_ms());
    if (autonomy_->serving() != was_serving) arm_timer();
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
        if (stopped_) return;
        // The leader reads of this turn get their read point into this Ready; read_index
        // asks for a Ready again, which the flag still makes a no-op.
        if (leader_reads_) leader_reads_->flush();
        ready_scheduled_ = false;
        shell_->process_ready();
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

std::string Node::member_name(std::uint64_t raft_id) const {
    if (raft_id == 0) return {};
    if (const MemberEntry* m = members_.by_id(raft_id)) return m->name;
    return "#" + std::to_string(raft_id);
}

void Node::record_data_ids() {
    // The leader writes each member's data id into the directory the first time it sees
    // it (a directory-only change, one at a time like any), so that a member that comes
    // back with a wiped data dir is refused by every peer.
    if (!is_leader() || !raft_io_->has_mesh() || now_ms() < next_data_id_try_) return;
    const raft::Raft& raft = shell_->raft();
    if (!raft.pending_changes().empty()) return;
    MemberDirectory dir = members_;
    bool changed = false;
    for (auto& m : dir.members) {
        if (m.data_id != 0) continue;
        auto seen = seen_data_ids_.find(m.raft_id);
        const std::uint64_t data = m.raft_id == raft_id_ ? data_id_
                                   : seen == seen_data_ids_.end() ? 0
                                                                  : seen->second;
        if (data == 0) continue;
        m.data_id = data;
        changed = true;
    }
    if (!changed) return;
    next_data_id_try_ = now_ms() + 1000;
    raft::Membership next = raft.membership();
    next.directory = encode_directory(dir);
    shell_->propose_membership(std::move(next), now_ms(), nullptr);
}

void Node::update_peers() {
    if (!raft_io_ || !shell_) return;
    const raft::Raft& raft = shell_->raft();
    for (const auto& m : members_.members)
        known_members_[m.raft_id] = m;
    // Until a change commits, the members of the committed membership still count (a
    // removed leader leads until then); a leader also tells removed members they are.
    MemberDirectory peers = members_;
    auto add = [&](raft::NodeId id) {
        auto known = known_members_.find(id);
        if (!peers.by_id(id) && known != known_members_.end())
            peers.members.push_back(known->second);
    };
    if (!raft.membership().empty()) {
        for (raft::NodeId id : raft.committed_membership().voters)
            add(id);
        for (raft::NodeId id : raft.committed_membership().learners)
            add(id);
    }
    for (raft::NodeId id : raft.leaving())
        add(id);
    if (peers == peers_ && raft.leader() == peers_leader_) return;
    peers_ = peers;
    peers_leader_ = raft.leader();
    if (auto err = raft_io_->set_members(peers_, peers_leader_); !err.empty())
        spdlog::error("membership: peers not updated: {}", err);
}

MemberDirectory Node::current_members() const {
    const raft::Membership& m = shell_->raft().membership();
    if (m.empty()) return {};  // joining: no member known yet
    return directory_of(m, config_);
}

void Node::on_membership_changed() {
    const raft::Raft& raft = shell_->raft();
    const raft::Membership& m = raft.membership();
    const bool committed = raft.log().committed() >= raft.membership_index();
    MemberDirectory now = current_members();
    if (!(now == members_)) {
        spdlog::info("membership now {} (index {}, {})", raft::describe(m), raft.membership_index(),
                     committed ? "committed" : "not committed yet");
        members_ = std::move(now);
    }
    update_peers();
    // Removed: a committed membership leaves this node out, and its ids are past ours (a
    // node that joins learns older memberships first, which predate its id).
    const auto dir = decode_directory(m.directory);
    if (!m.empty() && !m.contains(raft_id_) && committed && dir && dir->next_id > raft_id_ &&
        !removed_) {
        removed_ = true;
        spdlog::warn(
            "this node ({}, raft id {}) was removed from cluster '{}' (membership at index {}: "
            "{}); it stops in {} ms",
            config_.node_id, raft_id_, config_.cluster_id, raft.membership_index(),
            raft::describe(m), kRemovedStopMs);
        // Not at once: the client that removed the leader itself gets its answer first.
        stop_timer_.expires_after(std::chrono::milliseconds(kRemovedStopMs));
        stop_timer_.async_wait([this](boost::system::error_code ec) {
            if (ec) return;
            spdlog::critical(
                "stopping: this node was removed from the cluster. It takes no further part; "
                "its data dir may be deleted. To bring this machine back, add it as a new "
                "member (dueqctl member add, then dueqd --join with an empty data dir; "
                "docs/operations.md).");
            spdlog::shutdown();
            std::_Exit(kRemovedExitStatus);
        });
    }
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

// Why `map` cannot be this node's map: its shard must exist and list exactly this Raft
// group's members, so that clients that route by the map reach the group that has the keys.
std::string own_shard_mismatch(const shard::ShardMap& map, const Config& c) {
    const auto own = map.find(c.shard_name);
    if (!own) return "the shard map has no shard named '" + c.shard_name + "' ([shard] name)";
    if (map.shards[*own].members != group_members(c))
        return "shard '" + c.shard_name +
               "' in the shard map must list this group's members ([cluster] members: id and "
               "client), in the same order";
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
    if (!config_.auth_token.empty()) options.token = config_.auth_token;
    // The other shard answers a write within its proposal timeout (3 s by default); a
    // little more covers the hop, and stays within a client's usual 5 s.
    options.call_timeout = std::chrono::milliseconds(config_.raft.proposal_timeout_ms + 500);
    router_ = std::make_unique<shard::Router>(io_, std::move(map), std::move(options));
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
    return "";
}

}  // namespace dueq::node
