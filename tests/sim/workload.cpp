// Faults, the client workload and the liveness check of the simulator.
#include <algorithm>
#include <sstream>

#include "sim/cluster.h"

namespace dueq::sim {

using raft::Index;
using raft::NodeId;

namespace {
constexpr std::uint64_t kChaosUs = 50'000;
constexpr std::uint64_t kRetryUs = 300'000;  // a client retries an unanswered command
constexpr std::size_t kMaxUnacked = 200;     // clients stop adding work while this far behind
}  // namespace

void Cluster::chaos() {
    if (healed_) return;
    int n = opts_.nodes;
    if (rng_.chance(crash_rate_)) {
        int k = static_cast<int>(rng_.uniform(0, static_cast<std::uint64_t>(n - 1)));
        if (nodes_[k].up) {
            crash_node(k);
            schedule(now_ + rng_.uniform(20'000, 1'500'000), EventKind::restart, k,
                     nodes_[k].incarnation);
        }
    }
    if (rng_.chance(partition_rate_)) {
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
        schedule(now_ + rng_.uniform(100'000, 2'000'000), EventKind::unpartition, 0,
                 partition_gen_);
    }
    for (Node& node : nodes_) {
        if (rng_.chance(slow_disk_rate_)) node.slow_disk = !node.slow_disk;
    }
    if (rng_.chance(transfer_rate_)) {
        for (int k = 0; k < n; ++k) {
            Node& node = nodes_[k];
            if (node.up && node.raft->role() == raft::Role::leader) {
                auto target = static_cast<NodeId>(rng_.uniform(1, static_cast<std::uint64_t>(n)));
                if (target != node.id) {
                    trace("n%llu transfer leadership to n%llu", (unsigned long long)node.id,
                          (unsigned long long)target);
                    node.raft->transfer_leadership(target);
                    pump(k);
                }
                break;
            }
        }
    }
    schedule(now_ + kChaosUs, EventKind::chaos, 0);
}

void Cluster::heal() {
    healed_ = true;
    healed_at_ = now_;
    trace("HEAL: no more faults");
    for (auto& row : blocked_)
        row.assign(row.size(), false);
    for (int k = 0; k < opts_.nodes; ++k) {
        nodes_[k].slow_disk = false;
        if (!nodes_[k].up) {
            start_node(k);
            pump(k);
        }
    }
    schedule(now_ + 20'000, EventKind::check_live, 0);
}

int Cluster::leader_guess() {
    auto n = static_cast<std::uint64_t>(opts_.nodes);
    const Node& hint = nodes_[leader_hint_];
    if (hint.up && hint.raft->role() == raft::Role::leader) return leader_hint_;
    // Ask a random node; follow its redirect if it knows a leader (as a client would).
    int k = static_cast<int>(client_rng_.uniform(0, n - 1));
    if (!nodes_[k].up) return -1;
    NodeId l = nodes_[k].raft->leader();
    if (l != 0 && nodes_[l - 1].up) return static_cast<int>(l - 1);
    return k;
}

void Cluster::client_action() {
    std::vector<std::uint64_t> batch;
    if (!healed_ && unacked_.size() < kMaxUnacked && client_rng_.chance(0.6)) {
        auto count = client_rng_.uniform(1, 4);
        for (std::uint64_t c = 0; c < count; ++c) {
            commands_.push_back({false, now_});
            batch.push_back(commands_.size());
            unacked_.push_back(commands_.size());
        }
    }
    // Retry commands that have gone unanswered for a while (at least once semantics).
    for (std::size_t scan = unacked_.size(); scan > 0 && batch.size() < 16; --scan) {
        std::uint64_t id = unacked_.front();
        unacked_.pop_front();
        Command& c = commands_[id - 1];
        if (c.acked) continue;
        unacked_.push_back(id);
        if (c.last_attempt + kRetryUs <= now_ &&
            std::find(batch.begin(), batch.end(), id) == batch.end()) {
            batch.push_back(id);
        }
    }
    int k = leader_guess();
    if (k >= 0 && !batch.empty()) {
        Node& node = nodes_[k];
        std::vector<std::string> payloads;
        for (std::uint64_t id : batch)
            payloads.push_back(encode_command(id, client_rng_.uniform(0, 48)));
        auto r = node.raft->propose(payloads, clock_ms(node));
        for (std::uint64_t id : batch)
            commands_[id - 1].last_attempt = now_;
        if (r) {
            for (std::size_t j = 0; j < batch.size(); ++j) {
                attempts_[{node.id, r.value() + j}] = {node.raft->term(), batch[j]};
            }
        }
        pump(k);
    } else {
        for (std::uint64_t id : batch)
            commands_[id - 1].last_attempt = now_;
    }
    if (!healed_ && k >= 0 && client_rng_.chance(0.2)) {
        Node& node = nodes_[k];
        std::uint64_t ctx = next_read_++;
        if (node.raft->read_index(ctx)) {
            reads_[ctx] = {node.id, acked_max_index_};
            trace("n%llu read_index ctx=%llu min=%llu commit=%llu lease=%d",
                  (unsigned long long)node.id, (unsigned long long)ctx,
                  (unsigned long long)acked_max_index_,
                  (unsigned long long)node.raft->log().committed(),
                  node.raft->lease_valid() ? 1 : 0);
            pump(k);
        }
    }
    schedule(now_ + client_rng_.uniform(2'000, 20'000), EventKind::client, 0);
}

void Cluster::on_applied_command(int k, const raft::Entry& e) {
    std::uint64_t id;
    if (e.type != raft::EntryType::normal || !decode_command(e.data, id)) return;
    auto it = attempts_.find({nodes_[k].id, e.index});
    if (it == attempts_.end()) return;
    if (it->second.first == e.term && it->second.second == id && id >= 1 &&
        id <= commands_.size()) {
        // The node that accepted the proposal applied it: the client gets its "ok".
        commands_[id - 1].acked = true;
        trace("n%llu ack cmd %llu at %llu", (unsigned long long)nodes_[k].id,
              (unsigned long long)id, (unsigned long long)e.index);
        acked_max_index_ = std::max(acked_max_index_, e.index);
    }
    attempts_.erase(it);
}

void Cluster::on_read_state(int k, const raft::ReadState& rs) {
    auto it = reads_.find(rs.context);
    if (it == reads_.end()) return;
    if (it->second.node != nodes_[k].id) {
        checker_->fail("read state delivered to the wrong node");
    } else if (rs.index < it->second.min_index) {
        std::ostringstream os;
        os << "stale read on node " << nodes_[k].id << ": read index " << rs.index << " but index "
           << it->second.min_index << " was acknowledged before the read began";
        checker_->fail(os.str());
    }
    ++stats_.reads;
    reads_.erase(it);
}

bool Cluster::cluster_live(std::string* why) const {
    std::ostringstream os;
    int leader = -1;
    for (int k = 0; k < opts_.nodes; ++k) {
        const Node& n = nodes_[k];
        if (!n.up || n.persisting) {
            *why = "a node is down or busy";
            return false;
        }
        if (n.raft->role() == raft::Role::leader) {
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
    const raft::Raft& l = *nodes_[leader].raft;
    for (const Node& n : nodes_) {
        if (n.raft->leader() != l.id() || n.raft->term() != l.term()) {
            os << "node " << n.id << " does not follow leader " << l.id() << " (term "
               << n.raft->term() << " vs " << l.term() << ")";
            *why = os.str();
            return false;
        }
        if (n.sm.applied != l.log().committed()) {
            os << "node " << n.id << " applied " << n.sm.applied << " of " << l.log().committed();
            *why = os.str();
            return false;
        }
    }
    if (l.log().committed() != l.log().last_index()) {
        *why = "leader has uncommitted entries";
        return false;
    }
    for (std::uint64_t id : unacked_) {
        if (!commands_[id - 1].acked) {
            os << "command " << id << " not acknowledged";
            *why = os.str();
            return false;
        }
    }
    return true;
}

void Cluster::check_live() {
    std::string why;
    if (cluster_live(&why)) {
        // No acknowledged command may be missing from any replica.
        for (std::size_t i = 0; i < commands_.size(); ++i) {
            if (!commands_[i].acked) continue;
            for (const Node& n : nodes_) {
                if (!n.sm.ids.count(i + 1)) {
                    std::ostringstream os;
                    os << "acknowledged command " << i + 1 << " is lost on node " << n.id;
                    checker_->fail(os.str());
                    return;
                }
            }
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
    schedule(now_ + 20'000, EventKind::check_live, 0);
}

}  // namespace dueq::sim
