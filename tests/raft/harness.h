// A hand-driven cluster for unit tests: messages are delivered only when a test says
// so, so each test can build the exact interleaving a rule is about.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "raft/raft.h"

namespace dueq::raft::test {

struct TestNode {
    Config cfg;
    std::unique_ptr<MemoryStorage> storage = std::make_unique<MemoryStorage>();
    std::unique_ptr<Raft> raft;
    std::vector<Entry> applied;
    std::vector<ReadState> reads;
    std::vector<Ready> readies;  // every Ready handed out, for tests that inspect them
};

class Cluster {
  public:
    // n voters with ids 1..n. `tweak` may change each node's config.
    explicit Cluster(int n, const std::function<void(Config&)>& tweak = {}) {
        for (int k = 1; k <= n; ++k) {
            TestNode t;
            t.cfg.id = static_cast<NodeId>(k);
            for (int j = 1; j <= n; ++j)
                t.cfg.voters.push_back(static_cast<NodeId>(j));
            t.cfg.seed = 100 + static_cast<std::uint64_t>(k);
            if (tweak) tweak(t.cfg);
            t.raft = std::make_unique<Raft>(t.cfg, *t.storage);
            nodes_.emplace(static_cast<NodeId>(k), std::move(t));
        }
    }

    // A node that joins: it starts knowing no membership and learns it from the leader.
    void add_node(NodeId id) {
        TestNode t;
        t.cfg.id = id;
        t.cfg.seed = 100 + id;
        t.raft = std::make_unique<Raft>(t.cfg, *t.storage);
        nodes_.emplace(id, std::move(t));
    }

    Raft& raft(NodeId id) { return *nodes_.at(id).raft; }
    TestNode& node(NodeId id) { return nodes_.at(id); }
    MemoryStorage& storage(NodeId id) { return *nodes_.at(id).storage; }

    // Carries out every pending Ready of `id` (persist, queue messages, apply).
    void process(NodeId id) {
        TestNode& t = nodes_.at(id);
        while (t.raft->has_ready()) {
            Ready rd = t.raft->ready();
            for (const Message& m : rd.messages_before_persist)
                outbox_.push_back(m);
            if (rd.snapshot) t.storage->apply_snapshot(*rd.snapshot);
            t.storage->append(rd.entries);
            if (rd.hard_state) t.storage->set_hard_state(*rd.hard_state);
            for (const Message& m : rd.messages)
                outbox_.push_back(m);
            for (const Entry& e : rd.committed_entries)
                t.applied.push_back(e);
            for (const ReadState& r : rd.read_states)
                t.reads.push_back(r);
            if (rd.snapshot_wanted) {
                t.storage->create_snapshot(*rd.snapshot_wanted,
                                           "snap@" + std::to_string(*rd.snapshot_wanted));
                t.storage->compact(*rd.snapshot_wanted);
            }
            t.raft->advance(rd);
            t.readies.push_back(std::move(rd));
        }
    }
    void process_all() {
        for (auto& [id, t] : nodes_)
            process(id);
    }

    // Messages sent so far and not yet delivered (after processing every node).
    std::vector<Message> take_messages() {
        process_all();
        std::vector<Message> out;
        out.swap(outbox_);
        return out;
    }

    // True if m cannot pass (cut link or the drop filter). The filter may also edit
    // the message in flight.
    bool blocked(Message& m) const { return cut_.count({m.from, m.to}) > 0 || (drop_ && drop_(m)); }

    // Delivers messages until none are left (dropping those that cannot pass).
    // Returns how many were delivered.
    int deliver_all(int limit = 100000) {
        int delivered = 0;
        while (delivered < limit) {
            auto msgs = take_messages();
            if (msgs.empty()) break;
            for (Message& m : msgs) {
                if (blocked(m)) continue;
                raft(m.to).step(m);
                ++delivered;
            }
        }
        process_all();
        return delivered;
    }

    void deliver(const Message& m) {
        raft(m.to).step(m);
        process(m.to);
    }

    void tick(NodeId id, int n = 1) {
        for (int k = 0; k < n; ++k)
            raft(id).tick(now_ms);
        process(id);
    }
    void tick_all(int n = 1) {
        for (int k = 0; k < n; ++k) {
            for (auto& [id, t] : nodes_)
                t.raft->tick(now_ms);
        }
        process_all();
    }

    // Makes `id` campaign (pre-vote then vote, as configured) and delivers everything.
    // The other nodes first forget their leader (as if its lease had run out).
    void elect(NodeId id) {
        for (auto& [other, t] : nodes_) {
            if (other != id) t.raft->forget_leader();
        }
        raft(id).campaign_now();
        process(id);
        deliver_all();
    }

    // Cuts both directions between a and b.
    void cut(NodeId a, NodeId b) {
        cut_.insert({a, b});
        cut_.insert({b, a});
    }
    void cut_one_way(NodeId from, NodeId to) { cut_.insert({from, to}); }
    void isolate(NodeId a) {
        for (auto& [id, t] : nodes_) {
            if (id != a) cut(a, id);
        }
    }
    void heal() { cut_.clear(); }
    void set_drop(std::function<bool(Message&)> f) { drop_ = std::move(f); }

    // Simulates a crash and restart: the core is rebuilt from what its storage holds.
    void restart(NodeId id) {
        TestNode& t = nodes_.at(id);
        outbox_.erase(std::remove_if(outbox_.begin(), outbox_.end(),
                                     [&](const Message& m) { return m.from == id; }),
                      outbox_.end());
        t.raft = std::make_unique<Raft>(t.cfg, *t.storage);
        t.applied.clear();
    }

    Millis now_ms = 1000;

  private:
    std::map<NodeId, TestNode> nodes_;
    std::vector<Message> outbox_;
    std::set<std::pair<NodeId, NodeId>> cut_;
    std::function<bool(Message&)> drop_;
};

// Payload helper.
inline std::string cmd(int k) {
    return "cmd" + std::to_string(k);
}

}  // namespace dueq::raft::test
