// Membership ops (docs/operations.md, docs/protocol.md): `members` lists the membership in
// force; member_add, member_promote and member_remove propose the next one on the leader
// (raft::Raft::propose_membership) and answer once it is applied. New members get the
// directory's next id: ids are never reused.
#include <spdlog/spdlog.h>

#include <algorithm>

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
