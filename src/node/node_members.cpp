// Membership on a node (docs/operations.md): the member record of its data dir (Raft id
// and data id), the membership in force and what follows it (the mesh's peers, a removed
// node's stop, the data ids the leader records), and the ops: `members` lists the
// membership; member_add, member_promote and member_remove propose the next one on the
// leader (raft::Raft::propose_membership) and answer once it is applied. New members get
// the directory's next id: ids are never reused.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "net/peer_handshake.h"
#include "net/server.h"
#include "node/node.h"

namespace dueq::node {

using queue::Code;

namespace {

// Voters beyond this make every commit wait on more replies than any deployment needs.
constexpr std::size_t kMaxVoters = 9;
// Members of either kind: each is a peer link and a replication stream from the leader.
constexpr std::size_t kMaxMembers = 16;

std::string explain(const std::string& core_error, const std::string& name) {
    if (core_error == "change_pending")
        return "another membership change is not committed yet, or this leader has not yet "
               "committed an entry of its term; retry in a moment";
    if (core_error == "not_caught_up")
        return "member " + name +
               " is too far behind the leader's log to become a voter; "
               "promote it once `dueqctl member list` shows its lag near 0";
    if (core_error == "transfer_in_progress")
        return "the leader is handing over leadership; retry on the new leader";
    return core_error;
}

void erase_id(std::vector<raft::NodeId>& ids, raft::NodeId id) {
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
}

}  // namespace

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
    if (std::all_of(members_.members.begin(), members_.members.end(),
                    [](const MemberEntry& m) { return m.data_id != 0; }))
        return;  // the usual case, every tick: nothing to copy
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

void Node::update_peers(bool membership_changed) {
    if (!raft_io_ || !shell_) return;
    const raft::Raft& raft = shell_->raft();
    // Every tick: only the leader or the members being told they were removed can have
    // moved; the rest changes only with the membership.
    std::vector<raft::NodeId> leaving = raft.leaving();
    if (!membership_changed && raft.leader() == peers_leader_ && leaving == peers_leaving_) return;
    peers_leaving_ = std::move(leaving);
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
    for (raft::NodeId id : peers_leaving_)
        add(id);
    if (peers == peers_ && raft.leader() == peers_leader_) return;
    peers_ = peers;
    peers_leader_ = raft.leader();
    if (auto err = raft_io_->set_members(peers_, peers_leader_); !err.empty())
        spdlog::error("membership: peers not updated: {}", err);
}

void Node::publish_shard_members() {
    if (!router_ || !shell_) return;
    const raft::Raft& raft = shell_->raft();
    const raft::Index index = raft.committed_membership_index();
    // Committed only: an uncommitted change may yet be replaced by another at its index,
    // and the index is what tells a newer list from an older one.
    if (raft.membership().empty() || index <= router_->map().shards[own_shard_].membership_index)
        return;
    std::vector<shard::ShardMember> members;
    for (const auto& m : directory_of(raft.committed_membership(), config_).members)
        members.push_back({m.name, m.client});
    router_->learn_members(router_->map().shards[own_shard_].name, std::move(members), index);
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
    update_peers(true);
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
        stop_timer_.async_wait([](boost::system::error_code ec) {
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

MembersInfo Node::members_info() const {
    const raft::Raft& raft = shell_->raft();
    const raft::Membership& m = raft.membership();
    MembersInfo info;
    for (const auto& e : members_.members) {
        MemberStatus s{e.name, e.raft_id, m.is_voter(e.raft_id), e.peer, e.client, e.admin};
        s.connected =
            e.raft_id == raft_id_ || (raft_io_->has_mesh() && raft_io_->connected(e.raft_id));
        if (const auto* pr = raft.progress(e.raft_id)) {
            s.match = pr->match;
            s.lag = raft.log().last_index() > pr->match ? raft.log().last_index() - pr->match : 0;
        } else if (e.raft_id == raft_id_ && is_leader()) {
            s.match = raft.log().last_index();
        }
        info.members.push_back(std::move(s));
    }
    if (const MemberEntry* l = members_.by_id(raft.leader())) info.leader_id = l->name;
    info.membership_index = raft.membership_index();
    info.pending = raft.log().committed() < raft.membership_index();
    return info;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::GetMembers&) {
    conn->send(members_reply(id, members_info()));
    return Code::ok;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::ChangeMember& req) {
    auto refuse = [&](Code code, const std::string& message) {
        send_error(conn, id, code, message);
        return code;
    };
    if (!raft_io_->has_mesh())
        return refuse(Code::bad_request,
                      "a standalone node has no membership to change: a cluster's nodes list "
                      "[cluster] members and share a secret_file (docs/config.md)");
    if (!is_leader()) return refuse(Code::not_leader, "membership changes go to the leader");
    const raft::Raft& raft = shell_->raft();
    raft::Membership next = raft.membership();
    MemberDirectory dir = members_;
    const MemberEntry* found = dir.by_name(req.name);
    std::uint64_t target = found ? found->raft_id : 0;
    switch (req.op) {
        case wire::Op::member_add: {
            if (found)
                return refuse(Code::exists, "member " + req.name + " exists (raft id " +
                                                std::to_string(target) + ")");
            try {
                (void)net::parse_endpoint(req.peer);
            } catch (const std::exception& e) {
                return refuse(Code::bad_request,
                              "field 'peer' must be an ip:port the members can dial: " +
                                  std::string(e.what()));
            }
            if (req.client.find(':') == std::string::npos)
                return refuse(Code::bad_request, "field 'client' must be a host:port");
            if (dir.members.size() >= kMaxMembers)
                return refuse(Code::bad_request,
                              "a group has at most " + std::to_string(kMaxMembers) + " members");
            target = dir.next_id++;
            dir.members.push_back({target, req.name, req.peer, req.client, req.admin});
            next.learners.push_back(target);
            break;
        }
        case wire::Op::member_promote: {
            if (!found) return refuse(Code::not_found, "no member " + req.name);
            if (next.is_voter(target))
                return refuse(Code::bad_request, "member " + req.name + " is a voter already");
            if (next.voters.size() >= kMaxVoters)
                return refuse(Code::bad_request,
                              "a group has at most " + std::to_string(kMaxVoters) + " voters");
            const auto* pr = raft.progress(target);
            const std::uint64_t lag =
                pr && raft.log().last_index() > pr->match ? raft.log().last_index() - pr->match : 0;
            if (!pr || pr->match == 0)
                return refuse(Code::unavailable, "member " + req.name +
                                                     " has not answered the leader yet (is it "
                                                     "running, started with dueqd --join " +
                                                     std::to_string(target) +
                                                     "?); retry once it has caught up");
            if (lag > raft.config().promote_lag)
                return refuse(Code::unavailable,
                              "member " + req.name + " is " + std::to_string(lag) +
                                  " entries behind the leader (at most " +
                                  std::to_string(raft.config().promote_lag) +
                                  " to be promoted); retry once it has caught up");
            erase_id(next.learners, target);
            next.voters.push_back(target);
            break;
        }
        case wire::Op::member_remove: {
            if (!found) return refuse(Code::not_found, "no member " + req.name);
            if (next.is_voter(target) && next.voters.size() == 1)
                return refuse(Code::bad_request, "member " + req.name + " is the only voter");
            erase_id(next.voters, target);
            erase_id(next.learners, target);
            std::erase_if(dir.members, [&](const MemberEntry& e) { return e.raft_id == target; });
            break;
        }
        default:
            return refuse(Code::bad_request, "not a membership change");
    }
    next.directory = encode_directory(dir);
    spdlog::info("membership: {} {} (raft id {}) proposed by client", net::to_string(req.op),
                 req.name, target);
    std::weak_ptr<net::Connection> weak = conn;
    const std::string name = req.name;
    shell_->propose_membership(std::move(next), now_ms(),
                               [this, weak, id, name, target](shell::Outcome& o) {
                                   auto c = weak.lock();
                                   if (!c || !c->open()) return;
                                   if (o.code == Code::ok)
                                       return c->send(member_changed_reply(id, name, target));
                                   send_error(c, id, o.code, explain(o.message, name));
                               });
    return Code::ok;
}

}  // namespace dueq::node
