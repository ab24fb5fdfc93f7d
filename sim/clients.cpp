// The simulator's clients: refreshers that connect to a node, send it commands through
// the write path dueqd runs (node::WritePath), hold the leases they are given, and
// disconnect, resume or abandon them. What they are told is checked (task_history.h).
#include <algorithm>
#include <sstream>

#include "sim/cluster.h"

namespace dueq::sim {

using raft::NodeId;

namespace {
const std::string kQueue = "tokens";
constexpr std::size_t kClients = 4;

// A msgpack str, as a client's payload would be.
std::string payload(std::uint64_t n) {
    std::string s = "v" + std::to_string(n);
    return std::string(1, char(0xa0 | s.size())) + s;
}
// The key a put, an ack or a delete names; nullptr for the other commands.
const std::string* key_of(const queue::Command& cmd) {
    if (auto* put = std::get_if<queue::Put>(&cmd)) return &put->key;
    if (auto* ack = std::get_if<queue::Ack>(&cmd)) return &ack->key;
    if (auto* del = std::get_if<queue::Delete>(&cmd)) return &del->key;
    return nullptr;
}

// A delete, or an ack that finishes its task (no new time): the key's history ends.
bool removes_key(const queue::Command& cmd) {
    auto* ack = std::get_if<queue::Ack>(&cmd);
    return std::holds_alternative<queue::Delete>(cmd) || (ack && !ack->time);
}

}  // namespace

// Carries a node's answer to a simulated client while its connection is up.
class Cluster::ClientReply final : public node::Replier {
  public:
    ClientReply(Cluster& cluster, std::size_t client, std::shared_ptr<bool> open)
        : cluster_(cluster), client_(client), open_(std::move(open)) {}
    bool open() const override { return *open_; }
    void answer(const shell::Outcome& o) override {
        if (*open_) cluster_.on_answer(client_, o);
    }

  private:
    Cluster& cluster_;
    std::size_t client_;
    std::shared_ptr<bool> open_;
};

int Cluster::leader_guess() {
    auto n = static_cast<std::uint64_t>(slots());
    const Node& hint = *nodes_[leader_hint_];
    if (hint.up && hint.shell->is_leader()) return leader_hint_;
    // Ask a random node; follow its redirect if it knows a leader (as a client would).
    int k = static_cast<int>(client_rng_.uniform(0, n - 1));
    if (!nodes_[k]->up) return -1;
    NodeId l = nodes_[k]->shell->raft().leader();
    if (l != 0 && nodes_[l - 1]->up) return static_cast<int>(l - 1);
    return k;
}

bool Cluster::connect(Client& c) {
    if (c.node >= 0 && nodes_[c.node]->up && nodes_[c.node]->incarnation == c.incarnation &&
        *c.open)
        return true;
    if (c.open) *c.open = false;
    const int k = leader_guess();
    if (k < 0) return false;
    Node& n = *nodes_[k];
    const std::int64_t now = clock_ms(n);
    const queue::SessionId old = c.session;
    c.session = n.writes->sessions().open();
    // A client that comes back resumes its session (hello), on whichever node it reaches:
    // a new leader knows the sessions that hold leases from the log.
    if (old != 0 && n.writes->resume_session(c.session, old, now)) c.session = old;
    c.node = k;
    c.incarnation = n.incarnation;
    c.open = std::make_shared<bool>(true);
    return true;
}

void Cluster::disconnect(Client& c) {
    if (c.node < 0 || !*c.open) return;
    *c.open = false;
    Node& n = *nodes_[c.node];
    if (n.up && n.incarnation == c.incarnation) n.writes->sessions().close(c.session, clock_ms(n));
    // Held leases come back: by the session's end (release_on_disconnect) or their lease.
    for (const Held& h : c.held)
        history_->abandoned(kQueue, h.key, h.lease, h.until);
    c.held.clear();
    ++stats_.disconnects;
}

void Cluster::submit(Client& c, queue::Command cmd, std::int64_t wait_ms) {
    Node& n = *nodes_[c.node];
    if (auto* take = std::get_if<queue::Take>(&cmd)) take->session = c.session;  // as dueqd
    ++stats_.proposed;
    const auto index = static_cast<std::size_t>(&c - clients_.data());
    auto to = std::make_shared<ClientReply>(*this, index, c.open);
    if (n.autonomy->serving())
        n.autonomy->submit(std::move(cmd), wait_ms, std::move(to), clock_ms(n));
    else
        n.writes->submit(std::move(cmd), wait_ms, std::move(to), clock_ms(n));
    pump(c.node);
}

void Cluster::on_answer(std::size_t client, const shell::Outcome& o) {
    if (o.code != queue::Code::ok) return;
    if (o.local) {  // a node in autonomous mode, from its fork: no log entry
        ++stats_.autonomous_answers;
        Client& c = clients_[client];
        if (c.node >= 0) {
            key_removed(*o.command, *o.result, nodes_[c.node]->shell->store());
            check_fork_stamp(c.node, *o.command, *o.result);
        }
        if (std::holds_alternative<queue::Take>(*o.command)) {
            for (const auto& t : o.result->tasks)
                c.held.push_back({t.key, t.lease, t.lease_until});
            return;
        }
        // The write's own stamp (the fork may hold a later write already, whose overlay
        // record a crash can still lose: seed 5001922, 3 nodes, 60 s of faults): none may
        // be lost unless a newer write of the key wins (G4, checked at the end).
        const std::string* key = key_of(*o.command);
        if (key && !removes_key(*o.command) && o.result->hlc > removed_hlc_[*key]) {
            auto& floor = autonomous_writes_[*key];
            if (o.result->hlc >= floor) autonomous_writer_[*key] = c.node;
            floor = std::max(floor, o.result->hlc);
            trace("n%llu autonomous write %s hlc %llu", (unsigned long long)nodes_[c.node]->id,
                  key->c_str(), (unsigned long long)o.result->hlc);
        }
        return;
    }
    if (o.index == 0) {  // a blocking take that timed out: no entry
        ++stats_.blocking_timeouts;
        return;
    }
    history_->acknowledged(o.index, o.term);
    acked_max_index_ = std::max(acked_max_index_, o.index);
    if (std::holds_alternative<queue::Declare>(*o.command)) declared_ = true;
    if (!std::holds_alternative<queue::Take>(*o.command)) return;
    for (const auto& t : o.result->tasks)
        clients_[client].held.push_back({t.key, t.lease, t.lease_until});
}

void Cluster::check_fork_stamp(int k, const queue::Command& cmd, const queue::Result& r) {
    const std::string* key = key_of(cmd);
    if (!key || !r.ok()) return;
    const Node& n = *nodes_[k];
    ForkStamps& f = fork_stamps_[k];
    if (f.incarnation != n.incarnation || f.since != n.autonomy->mode_since())
        f = ForkStamps{n.incarnation, n.autonomy->mode_since(), {}};
    std::uint64_t& last = f.last[*key];
    if (r.hlc <= last)
        return checker_->fail("autonomous mode: n" + std::to_string(n.id) + " stamped a write of " +
                              kQueue + "/" + *key + " " + std::to_string(r.hlc) +
                              ", not above its earlier write or deletion of that key (" +
                              std::to_string(last) + ")");
    last = r.hlc;
}

void Cluster::key_removed(const queue::Command& cmd, const queue::Result& r,
                          const queue::Store& after) {
    if (!r.ok()) return;
    const std::string* key = nullptr;
    std::uint64_t stamp = 0;  // the removal's own
    if (removes_key(cmd)) {
        key = key_of(cmd);
        stamp = r.hlc;
    }
    if (auto* m = std::get_if<queue::Merge>(&cmd);
        m && r.merge == queue::MergeOutcome::taken_over) {
        // A merged deletion, or a merged finish: an ack without a time on a cut-off node,
        // whose answer the client may never have seen (seed 900006871, 5 nodes, 20 s of
        // faults). A finish whose retention had run out by the merge is gone at once.
        auto t = after.get(kQueue, m->key);
        if (!m->task || !t || t->status == queue::Status::done) {
            key = &m->key;
            stamp = m->hlc;
        }
    }
    if (!key) return;
    // A write answered in autonomous mode with a larger stamp than this removal (on a node
    // whose clock runs ahead) is newer than it, and must still win when it is merged.
    if (auto it = autonomous_writes_.find(*key);
        it != autonomous_writes_.end() && it->second <= stamp)
        autonomous_writes_.erase(it);
    // A write stamped before this removal, answered later by a node whose clock is
    // behind, lost to it: once the tombstone or the done task's retention runs out, it
    // may come back (docs/autonomy.md, limits), and G4 does not judge it.
    auto& removed = removed_hlc_[*key];
    removed = std::max(removed, stamp);
}

void Cluster::propose(int k, queue::Command cmd, std::function<void(const shell::Outcome&)> then) {
    Node& n = *nodes_[k];
    ++stats_.proposed;
    struct Then final : node::Replier {
        std::function<void(const shell::Outcome&)> fn;
        bool open() const override { return true; }
        void answer(const shell::Outcome& o) override {
            if (fn && o.code == queue::Code::ok) fn(o);
        }
    };
    auto to = std::make_shared<Then>();
    to->fn = [this, then = std::move(then)](const shell::Outcome& o) {
        history_->acknowledged(o.index, o.term);
        if (then) then(o);
    };
    n.writes->propose(std::move(cmd), std::move(to), clock_ms(n));
    pump(k);
}

queue::Command Cluster::next_command(Client& c, std::int64_t now) {
    auto& r = client_rng_;
    const std::string key = "k" + std::to_string(r.uniform(0, 11));
    if (!declared_ || r.chance(0.01))
        return queue::Declare{kQueue, 20, 200, 300, 3, 0.25, autonomous_queue_};
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
                           0, r.chance(0.5)};
    if (roll < 85 && !c.held.empty()) {
        const std::size_t pick = r.uniform(0, c.held.size() - 1);
        const Held h = c.held[pick];
        const std::uint64_t what = r.uniform(0, 99);
        if (what < 15) {  // abandoned: the client walks away from it
            c.held.erase(c.held.begin() + std::ptrdiff_t(pick));
            history_->abandoned(kQueue, h.key, h.lease, h.until);
            return queue::Advance{};
        }
        if (what < 25)
            return queue::Touch{kQueue, h.key, h.lease, std::int64_t(r.uniform(30, 300))};
        c.held.erase(c.held.begin() + std::ptrdiff_t(pick));
        if (what < 70)  // refreshed: the new token and its new expiry
            return queue::Ack{kQueue, h.key, h.lease, payload(r.uniform(0, 1'000'000)),
                              now + std::int64_t(r.uniform(100, 600))};
        if (what < 80) return queue::Ack{kQueue, h.key, h.lease, std::nullopt, std::nullopt};
        if (what < 95)
            return queue::Release{kQueue, h.key, h.lease, std::int64_t(r.uniform(0, 50))};
        return queue::Bury{kQueue, h.key, h.lease};
    }
    if (roll < 92) return queue::Delete{kQueue, key};
    if (roll < 95) return queue::Kick{kQueue, std::uint32_t(r.uniform(1, 3))};
    return queue::Advance{};
}

void Cluster::client_action() {
    if (clients_.empty()) clients_.resize(kClients);
    Client& c = clients_[client_rng_.uniform(0, kClients - 1)];
    if (!healed_ && client_rng_.chance(0.03)) {
        disconnect(c);
    } else if (!healed_ && client_rng_.chance(0.7) && connect(c)) {
        queue::Command cmd = next_command(c, clock_ms(*nodes_[c.node]));
        const bool blocking = std::holds_alternative<queue::Take>(cmd) && client_rng_.chance(0.3);
        submit(c, std::move(cmd), blocking ? std::int64_t(client_rng_.uniform(20, 200)) : 0);
    }
    const int k = leader_guess();
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

}  // namespace dueq::sim
