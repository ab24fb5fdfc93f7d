// Faults, the client workload and the liveness check of the simulator.
#include <algorithm>
#include <sstream>

#include "sim/cluster.h"

namespace dueq::sim {

using raft::NodeId;

namespace {
constexpr std::uint64_t kChaosUs = 50'000;
constexpr std::uint64_t kLiveCheckUs = 20'000;
const std::string kQueue = "tokens";
constexpr queue::SessionId kSessions = 4;

// A msgpack str, as a client's payload would be.
std::string payload(std::uint64_t n) {
    std::string s = "v" + std::to_string(n);
    return std::string(1, char(0xa0 | s.size())) + s;
}
}  // namespace

void Cluster::chaos() {
    if (healed_) return;
    const int n = opts_.nodes;
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
    const int n = opts_.nodes;
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
    for (int k = 0; k < opts_.nodes; ++k) {
        nodes_[k]->slow_disk = false;
        if (!nodes_[k]->up) {
            start_node(k);
            pump(k);
        }
    }
    schedule(now_ + kLiveCheckUs, EventKind::check_live, 0);
}

int Cluster::leader_guess() {
    auto n = static_cast<std::uint64_t>(opts_.nodes);
    const Node& hint = *nodes_[leader_hint_];
    if (hint.up && hint.shell->is_leader()) return leader_hint_;
    // Ask a random node; follow its redirect if it knows a leader (as a client would).
    int k = static_cast<int>(client_rng_.uniform(0, n - 1));
    if (!nodes_[k]->up) return -1;
    NodeId l = nodes_[k]->shell->raft().leader();
    if (l != 0 && nodes_[l - 1]->up) return static_cast<int>(l - 1);
    return k;
}

void Cluster::propose(int k, queue::Command cmd, std::function<void(shell::Outcome&)> then) {
    Node& n = *nodes_[k];
    ++stats_.proposed;
    n.shell->propose(std::move(cmd), clock_ms(n),
                     [this, then = std::move(then)](shell::Outcome& o) {
                         if (o.code != queue::Code::ok) return;
                         history_->acknowledged(o.index, o.term);
                         acked_max_index_ = std::max(acked_max_index_, o.index);
                         if (then) then(o);
                     });
    pump(k);
}

queue::Command Cluster::next_command(int k) {
    auto& r = client_rng_;
    const std::string key = "k" + std::to_string(r.uniform(0, 11));
    const std::int64_t now = clock_ms(*nodes_[k]);
    if (!declared_ || r.chance(0.01)) return queue::Declare{kQueue, 20, 200, 300, 3, 0.25};
    const std::uint64_t roll = r.uniform(0, 99);
    if (roll < 30) {
        const auto mode = r.chance(0.8)
                              ? queue::PutMode::upsert
                              : (r.chance(0.5) ? queue::PutMode::insert : queue::PutMode::update);
        return queue::Put{kQueue, key, payload(r.uniform(0, 1'000'000)),
                          now + std::int64_t(r.uniform(0, 700)) - 300, mode};
    }
    if (roll < 55)
        return queue::Take{kQueue, std::uint32_t(r.uniform(1, 2)), std::int64_t(r.uniform(30, 300)),
                           r.uniform(1, kSessions), r.chance(0.5)};
    if (roll < 85 && !held_.empty()) {
        const std::size_t pick = r.uniform(0, held_.size() - 1);
        const Held h = held_[pick];
        const std::uint64_t what = r.uniform(0, 99);
        if (what < 15) {  // abandoned: the client walks away
            held_.erase(held_.begin() + std::ptrdiff_t(pick));
            history_->abandoned(kQueue, h.key, h.lease, h.until);
            return queue::Advance{};
        }
        if (what < 25)
            return queue::Touch{kQueue, h.key, h.lease, std::int64_t(r.uniform(30, 300))};
        held_.erase(held_.begin() + std::ptrdiff_t(pick));
        if (what < 70)  // refreshed: the new token and its new expiry
            return queue::Ack{kQueue, h.key, h.lease, payload(r.uniform(0, 1'000'000)),
                              now + std::int64_t(r.uniform(100, 600))};
        if (what < 80) return queue::Ack{kQueue, h.key, h.lease, std::nullopt, std::nullopt};
        if (what < 95)
            return queue::Release{kQueue, h.key, h.lease, std::int64_t(r.uniform(0, 50))};
        return queue::Bury{kQueue, h.key, h.lease};
    }
    if (roll < 90) return queue::Delete{kQueue, key};
    if (roll < 93) {
        // A client went away for good (what dueqd proposes when its grace period ends).
        const queue::SessionId session = r.uniform(1, kSessions);
        std::erase_if(held_, [session](const Held& h) { return h.session == session; });
        return queue::ReleaseSession{session};
    }
    if (roll < 95) return queue::Kick{kQueue, std::uint32_t(r.uniform(1, 3))};
    return queue::Advance{};
}

void Cluster::client_action() {
    int k = leader_guess();
    if (!healed_ && k >= 0 && client_rng_.chance(0.7)) {
        queue::Command cmd = next_command(k);
        const bool declare = std::holds_alternative<queue::Declare>(cmd);
        const auto* take = std::get_if<queue::Take>(&cmd);
        const queue::SessionId session = take ? take->session : 0;
        propose(k, std::move(cmd), [this, declare, session](shell::Outcome& o) {
            if (declare) declared_ = true;
            if (!std::holds_alternative<queue::Take>(*o.command)) return;
            for (const auto& t : o.result->tasks)
                held_.push_back({t.key, t.lease, t.lease_until, session});
        });
    }
    if (!healed_ && k >= 0 && client_rng_.chance(0.2)) {
        Node& node = *nodes_[k];
        std::uint64_t ctx = next_read_++;
        if (node.shell->read_index(ctx)) {
            reads_[ctx] = {node.id, acked_max_index_};
            pump(k);
        }
    }
    schedule(now_ + client_rng_.uniform(2'000, 20'000), EventKind::client, 0);
}

void Cluster::on_read_state(int k, const raft::ReadState& rs) {
    auto it = reads_.find(rs.context);
    if (it == reads_.end()) return;
    if (it->second.node != nodes_[k]->id) {
        checker_->fail("read state delivered to the wrong node");
    } else if (rs.index < it->second.min_index) {
        std::ostringstream os;
        os << "stale read on node " << nodes_[k]->id << ": read index " << rs.index << " but index "
           << it->second.min_index << " was acknowledged before the read began";
        checker_->fail(os.str());
    }
    ++stats_.reads;
    reads_.erase(it);
}

bool Cluster::cluster_live(std::string* why) {
    std::ostringstream os;
    int leader = -1;
    for (int k = 0; k < opts_.nodes; ++k) {
        const Node& n = *nodes_[k];
        if (!n.up || n.shell->busy() || n.disk->busy()) {
            *why = "a node is down or busy";
            return false;
        }
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
    // After healing, a write must get through, and the log time must pass every lease
    // a client abandoned (then G2 can be checked).
    if (!marker_acked_) {
        propose(leader,
                queue::Put{kQueue, "marker", payload(0), std::nullopt, queue::PutMode::upsert},
                [this](shell::Outcome&) { marker_acked_ = true; });
        *why = "the write after healing is not acknowledged yet";
        return false;
    }
    if (queue::Millis(l.applied().time) <= history_->abandoned_until()) {
        propose(leader, queue::Advance{}, nullptr);
        *why = "the log time has not passed every abandoned lease";
        return false;
    }
    for (const auto& node : nodes_) {
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
    return true;
}

void Cluster::check_live() {
    std::string why;
    if (cluster_live(&why)) {
        for (const auto& n : nodes_)
            history_->check_final(n->id, n->shell->store(), n->shell->applied().index,
                                  queue::Millis(n->shell->applied().time));
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
