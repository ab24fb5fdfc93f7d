// Membership changes in the simulator, as an operator would make them through dueqctl:
// a spare machine added as a learner, a learner promoted, a member removed (the leader
// included), and a voter's machine lost for good (then removed, as the runbook "replace
// a datacenter's node" says). Proposals go through the shell dueqd runs; the core
// refuses what it must (a change in flight, a learner behind), and the checker judges
// what it accepts (checker.cpp: check_changes, check_commit_safe).
//
// Liveness needs a majority of the voters alive after healing, in whatever membership a
// node may use, so the driver loses a voter for good only while no change is in flight
// anywhere and none is dead yet, and removes a live voter only when no dead one is left.
// (Losing a voter while a change from three voters to two is in flight stalls any Raft:
// the two-voter membership needs both, and the third's vote goes only to a longer log.)
#include <algorithm>

#include "sim/cluster.h"

namespace dueq::sim {

using raft::NodeId;

namespace {

void erase(std::vector<NodeId>& ids, NodeId id) {
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
}

void insert(std::vector<NodeId>& ids, NodeId id) {
    ids.push_back(id);
    std::sort(ids.begin(), ids.end());
}

}  // namespace

bool Cluster::in_membership(const shell::RaftShell& leader, int k) const {
    return leader.raft().membership().contains(nodes_[k]->id);
}

void Cluster::retire(int k) {
    Node& n = *nodes_[k];
    if (n.retired) return;
    trace("n%llu RETIRED for good", (unsigned long long)n.id);
    n.retired = true;
    crash_node(k);
}

void Cluster::remove_lost(int k, NodeId id) {
    Node& leader = *nodes_[k];
    raft::Membership next = leader.shell->raft().membership();
    erase(next.voters, id);
    erase(next.learners, id);
    if (next.voters.empty()) return;
    trace("n%llu proposes remove lost n%llu", (unsigned long long)leader.id,
          (unsigned long long)id);
    leader.shell->propose_membership(next, clock_ms(leader), nullptr);
    pump(k);
}

void Cluster::after_leader_step(int k) {
    if (!membership_changes_) return;
    Node& n = *nodes_[k];
    const raft::Raft& r = n.shell->raft();
    if (r.log().committed() >= r.membership_index()) {
        if (r.membership_index() > changes_seen_ && r.membership_index() > 0) {
            changes_seen_ = r.membership_index();
            ++stats_.membership_changes;
        }
        // A node the committed membership leaves out is stopped for good, as dueqd stops
        // once it learns it was removed (ids are never reused, so it cannot come back);
        // unless a log somewhere still names it (this leader may be a stale one).
        for (int j = 0; j < slots(); ++j) {
            Node& other = *nodes_[j];
            if (!other.joined || other.retired || r.membership().contains(other.id)) continue;
            const bool named = std::any_of(nodes_.begin(), nodes_.end(), [&](const auto& x) {
                return x->up && x->shell->raft().membership().contains(other.id);
            });
            if (!named) retire(j);
        }
    }
    if (!n.up || !n.shell->is_leader() || n.led_term == r.term()) return;
    n.led_term = r.term();
    // Right after an election: the window in which a leader has not yet committed an
    // entry of its term (a change proposed there must be refused).
    if (!healed_ && member_rng_.chance(0.3)) change_membership(k);
}

void Cluster::change_membership(int k) {
    Node& leader = *nodes_[k];
    if (!leader.up || !leader.shell->is_leader()) return;
    raft::Membership next = leader.shell->raft().membership();
    std::size_t dead_voters = 0;
    for (NodeId id : next.voters)
        dead_voters += nodes_[id - 1]->retired ? 1 : 0;
    std::vector<NodeId> members = next.voters;
    members.insert(members.end(), next.learners.begin(), next.learners.end());
    const char* what = "";
    switch (member_rng_.uniform(0, 3)) {
        case 0: {  // a spare machine joins as a learner
            auto spare = std::find_if(nodes_.begin(), nodes_.end(),
                                      [](const auto& n) { return !n->joined; });
            if (spare == nodes_.end()) return;
            Node& s = **spare;
            s.joined = true;
            start_node(s.k);
            pump(s.k);
            insert(next.learners, s.id);
            what = "add learner";
            break;
        }
        case 1: {  // promote a learner
            if (next.learners.empty()) return;
            NodeId id = next.learners[member_rng_.uniform(0, next.learners.size() - 1)];
            erase(next.learners, id);
            insert(next.voters, id);
            what = "promote";
            break;
        }
        case 2: {  // remove a member, maybe the leader
            NodeId id = members[member_rng_.uniform(0, members.size() - 1)];
            if (next.is_voter(id)) {
                const bool dead = nodes_[id - 1]->retired;
                if (next.voters.size() == 1 || (!dead && dead_voters > 0)) return;
                erase(next.voters, id);
            } else {
                erase(next.learners, id);
            }
            what = "remove";
            break;
        }
        default: {  // a voter's machine is lost for good (the runbook then removes it)
            if (dead_voters > 0 || next.voters.size() < 3) return;
            // Every log is seen (a down node's may hold a change too): all members up.
            for (const auto& n : nodes_) {
                if (!n->joined || n->retired) continue;
                if (!n->up || !n->shell->raft().pending_changes().empty()) return;
            }
            NodeId id = next.voters[member_rng_.uniform(0, next.voters.size() - 1)];
            retire(static_cast<int>(id - 1));
            return;
        }
    }
    trace("n%llu proposes %s: %s", (unsigned long long)leader.id, what,
          raft::describe(next).c_str());
    leader.shell->propose_membership(next, clock_ms(leader), [this](shell::Outcome& o) {
        trace("membership change: %s %s", std::string(wire::code_name(o.code)).c_str(),
              o.message.c_str());
    });
    pump(k);
}

}  // namespace dueq::sim
