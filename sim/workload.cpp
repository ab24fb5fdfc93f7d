// Faults and the liveness check of the simulator (the clients are in clients.cpp).
#include <algorithm>
#include <sstream>

#include "sim/cluster.h"

namespace dueq::sim {

using raft::NodeId;

namespace {
constexpr std::uint64_t kChaosUs = 50'000;
constexpr std::uint64_t kLiveCheckUs = 20'000;
const std::string kQueue = "tokens";

// A msgpack str, as a client's payload would be.
std::string payload(std::uint64_t n) {
    std::string s = "v" + std::to_string(n);
    return std::string(1, char(0xa0 | s.size())) + s;
}
}  // namespace

void Cluster::chaos() {
    if (healed_) return;
    const int n = slots();
    if (rng_.chance(crash_rate_)) {
        int k = static_cast<int>(rng_.uniform(0, static_cast<std::uint64_t>(n - 1)));
        if (nodes_[k]->up) {
            crash_node(k);
            schedule(now_ + rng_.uniform(20'000, 1'500'000), EventKind::restart, k,
                     nodes_[k]->incarnation);
        }
    }
    if (rng_.chance(partition_rate_)) partition();
    for (auto& node : nodes_)
        if (rng_.chance(slow_disk_rate_)) node->slow_disk = !node->slow_disk;
    if (membership_changes_ && member_rng_.chance(membership_rate_)) {
        int leader = -1;  // the newest: a deposed leader may not know it yet
        for (int k = 0; k < n; ++k) {
            const Node& node = *nodes_[k];
            if (node.up && node.shell->is_leader() &&
                (leader < 0 || node.shell->raft().term() > nodes_[leader]->shell->raft().term()))
                leader = k;
        }
        if (leader >= 0) change_membership(leader);
    }
    if (rng_.chance(transfer_rate_)) {
        for (int k = 0; k < n; ++k) {
            Node& node = *nodes_[k];
            if (!node.up || !node.shell->is_leader()) continue;
            auto target = static_cast<NodeId>(rng_.uniform(1, static_cast<std::uint64_t>(n)));
            if (target != node.id) {
                trace("n%llu transfer leadership to n%llu", (unsigned long long)node.id,
                      (unsigned long long)target);
                node.shell->raft_for_tests().transfer_leadership(target);
                pump(k);
            }
            break;
        }
    }
    schedule(now_ + kChaosUs, EventKind::chaos, 0);
}

void Cluster::partition() {
    const int n = slots();
    ++partition_gen_;
    ++stats_.partitions;
    for (auto& row : blocked_)
        row.assign(row.size(), false);
    auto pick = [&] {
        return static_cast<int>(rng_.uniform(0, static_cast<std::uint64_t>(n - 1)));
    };
    switch (rng_.uniform(0, 3)) {
        case 0: {  // symmetric split into two sides
            std::vector<bool> side(static_cast<std::size_t>(n));
            for (int k = 0; k < n; ++k)
                side[k] = rng_.chance(0.5);
            for (int a = 0; a < n; ++a)
                for (int b = 0; b < n; ++b)
                    blocked_[a][b] = side[a] != side[b];
            trace("partition: symmetric split");
            break;
        }
        case 1: {  // one node cannot talk (but still hears), or cannot hear
            int a = pick();
            bool outbound = rng_.chance(0.5);
            for (int b = 0; b < n; ++b) {
                if (b == a) continue;
                if (outbound)
                    blocked_[a][b] = true;
                else
                    blocked_[b][a] = true;
            }
            trace("partition: n%d one-way %s", a + 1, outbound ? "mute" : "deaf");
            break;
        }
        case 2: {  // isolate one node
            int a = pick();
            for (int b = 0; b < n; ++b)
                blocked_[a][b] = blocked_[b][a] = a != b;
            trace("partition: n%d isolated", a + 1);
            break;
        }
        default: {  // random one-way links
            for (int a = 0; a < n; ++a)
                for (int b = 0; b < n; ++b)
                    blocked_[a][b] = a != b && rng_.chance(0.3);
            trace("partition: random one-way links");
            break;
        }
    }
    schedule(now_ + rng_.uniform(100'000, 2'000'000), EventKind::unpartition, 0, partition_gen_);
}

void Cluster::heal() {
    healed_ = true;
    healed_at_ = now_;
    trace("HEAL: no more faults");
    for (auto& row : blocked_)
        row.assign(row.size(), false);
    for (int k = 0; k < slots(); ++k) {
        nodes_[k]->slow_disk = false;
        if (!nodes_[k]->up && nodes_[k]->joined && !nodes_[k]->retired) {
            start_node(k);
            pump(k);
        }
    }
    schedule(now_ + kLiveCheckUs, EventKind::check_live, 0);
}

bool Cluster::cluster_live(std::string* why) {
    std::ostringstream os;
    int leader = -1;
    for (int k = 0; k < slots(); ++k) {
        const Node& n = *nodes_[k];
        if (!n.up) continue;
        if (n.shell->is_leader()) {
            if (leader >= 0) {
                *why = "two nodes think they lead";
                return false;
            }
            leader = k;
        }
    }
    if (leader < 0) {
        *why = "no leader";
        return false;
    }
    const shell::RaftShell& l = *nodes_[leader]->shell;
    // Every member counts; a spare that was never added or a removed node does not. A
    // member whose machine is lost for good is removed, as the runbook's last step.
    for (int k = 0; k < slots(); ++k) {
        const Node& n = *nodes_[k];
        if (!in_membership(l, k)) continue;
        if (n.retired) {
            remove_lost(leader, n.id);
            *why = "a member lost for good is not removed yet";
            return false;
        }
        if (!n.up || n.shell->busy() || n.disk->busy()) {
            *why = "a node is down or busy";
            return false;
        }
    }
    // After healing, a write must get through, and the log time must pass every lease
    // a client abandoned (then G2 can be checked).
    if (!marker_acked_) {
        propose(leader,
                queue::Put{kQueue, "marker", payload(0), std::nullopt, queue::PutMode::upsert},
                [this](const shell::Outcome&) { marker_acked_ = true; });
        *why = "the write after healing is not acknowledged yet";
        return false;
    }
    if (queue::Millis(l.applied().time) <= history_->abandoned_until()) {
        propose(leader, queue::Advance{}, nullptr);
        *why = "the log time has not passed every abandoned lease";
        return false;
    }
    for (const auto& node : nodes_) {
        if (!in_membership(l, node->k)) continue;
        const shell::RaftShell& s = *node->shell;
        if (s.raft().leader() != l.raft().id() || s.raft().term() != l.raft().term()) {
            os << "node " << node->id << " does not follow leader " << l.raft().id();
            *why = os.str();
            return false;
        }
        if (s.applied().index != l.raft().log().committed() || s.pending_proposals() > 0) {
            os << "node " << node->id << " applied " << s.applied().index << " of "
               << l.raft().log().committed();
            *why = os.str();
            return false;
        }
    }
    if (l.raft().log().committed() != l.raft().log().last_index()) {
        *why = "leader has uncommitted entries";
        return false;
    }
    for (const auto& node : nodes_) {
        if (!in_membership(l, node->k)) continue;
        if (node->autonomy->mode() != node::Autonomy::Mode::normal ||
            node->autonomy->overlay_size() > 0) {
            os << "node " << node->id << " is " << node::to_string(node->autonomy->mode())
               << " with " << node->autonomy->overlay_size() << " writes not merged";
            *why = os.str();
            return false;
        }
    }
    return true;
}

void Cluster::check_live() {
    std::string why;
    if (cluster_live(&why)) {
        auto lead = std::find_if(nodes_.begin(), nodes_.end(),
                                 [](const auto& n) { return n->up && n->shell->is_leader(); });
        const shell::RaftShell& leader = *(*lead)->shell;  // cluster_live found it
        for (const auto& n : nodes_) {
            if (!in_membership(leader, n->k)) continue;
            history_->check_final(n->id, n->shell->store(), n->shell->applied().index,
                                  queue::Millis(n->shell->applied().time));
            stats_.merged += n->autonomy->totals().merged;
            stats_.merges_taken_over += n->autonomy->totals().taken_over;
        }
        // G4: a write answered in autonomous mode is lost only to a newer write of its
        // key. A removal (deletion or finish) as new as the write ended its judgement
        // (key_removed); without one, the key must still be there.
        const queue::Store& store = leader.store();
        for (const auto& [key, hlc] : autonomous_writes_) {
            // A node removed before it merged takes its writes with it (docs/autonomy.md).
            const int writer = autonomous_writer_[key];
            if (nodes_[writer]->retired || !in_membership(leader, writer)) continue;
            auto t = store.get(kQueue, key);
            if (!t || t->hlc < hlc)
                return checker_->fail("G4: a write of " + kQueue + "/" + key +
                                      " answered in autonomous mode (hlc " + std::to_string(hlc) +
                                      ") is lost: " +
                                      (t ? "the task's hlc is " + std::to_string(t->hlc)
                                         : std::string("the key is gone, and no removal is "
                                                       "as new as the write")));
        }
        stats_.heal_to_live_ms = (now_ - healed_at_) / 1000;
        done_ = true;
        return;
    }
    if (now_ > healed_at_ + opts_.heal_limit_ms * 1000) {
        checker_->fail("liveness: " + std::to_string(opts_.heal_limit_ms) +
                       " ms after healing the cluster is still not done: " + why);
        return;
    }
    schedule(now_ + kLiveCheckUs, EventKind::check_live, 0);
}

}  // namespace dueq::sim
