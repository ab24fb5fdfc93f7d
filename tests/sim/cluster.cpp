#include "sim/cluster.h"

#include <cstdarg>
#include <cstdio>
#include <sstream>

namespace dueq::sim {

using raft::Entry;
using raft::Index;
using raft::Message;
using raft::NodeId;
using raft::Ready;

namespace {
constexpr std::uint64_t kTickUs = 10'000;   // nodes tick every 10 ms of their own clock
constexpr std::uint64_t kChaosUs = 50'000;  // a fault decision every 50 ms
constexpr std::uint64_t kMaxEvents = 20'000'000;
}  // namespace

std::string replay_command(const SimOptions& o) {
    std::ostringstream os;
    os << "raft-sim run --seed " << o.seed << " --nodes " << o.nodes;
    if (!o.faults) os << " --no-faults";
    if (o.fault_ms != SimOptions{}.fault_ms) os << " --fault-ms " << o.fault_ms;
    if (o.planted_bug != raft::PlantedBug::none)
        os << " --plant " << raft::to_string(o.planted_bug);
    if (!o.contract_checks) os << " --no-contract-checks";
    os << " --trace";
    return os.str();
}

SimResult run_simulation(const SimOptions& opts) {
    return Cluster(opts).run();
}

Cluster::Cluster(const SimOptions& opts)
    : opts_(opts),
      rng_(opts.seed * 0x2545F4914F6CDD1DULL + 1),
      client_rng_(opts.seed ^ 0xc1c1c1c1ULL) {
    // The shape of this run: every fault is on, at an intensity drawn from the seed.
    heartbeat_tick_ = static_cast<int>(rng_.uniform(1, 3));
    lease_read_ = rng_.chance(0.5);
    const std::uint64_t entries_choices[] = {1, 3, 16, 64};
    const std::uint64_t inflight_choices[] = {1, 4, 64};
    const std::uint64_t threshold_choices[] = {8, 32, 200};
    const std::uint64_t keep_choices[] = {0, 4, 64};
    max_entries_ = entries_choices[rng_.uniform(0, 3)];
    max_inflight_ = inflight_choices[rng_.uniform(0, 2)];
    max_inflight_bytes_ = rng_.chance(0.3) ? 2048 : 1 << 20;
    snapshot_threshold_ = threshold_choices[rng_.uniform(0, 2)];
    keep_entries_ = keep_choices[rng_.uniform(0, 2)];
    link_latency_us_ = rng_.uniform(100, 1000);
    if (opts.faults) {
        drop_ = rng_.uniform(0, 100) / 1000.0;  // up to 10%
        dup_ = rng_.uniform(0, 50) / 1000.0;
        slow_net_ = rng_.uniform(10, 300) / 1000.0;
        max_delay_us_ = rng_.uniform(5, 60) * 1000;
        crash_rate_ = rng_.uniform(5, 60) / 1000.0;
        partition_rate_ = rng_.uniform(5, 80) / 1000.0;
        slow_disk_rate_ = rng_.uniform(0, 50) / 1000.0;
        transfer_rate_ = rng_.uniform(0, 20) / 1000.0;
    }
    int n = opts.nodes;
    nodes_ = std::vector<Node>(static_cast<std::size_t>(n));
    blocked_.assign(static_cast<std::size_t>(n),
                    std::vector<bool>(static_cast<std::size_t>(n), false));
    std::vector<NodeView> views;
    for (int k = 0; k < n; ++k) {
        Node& node = nodes_[k];
        node.id = static_cast<NodeId>(k + 1);
        if (opts.faults) {
            node.rate = 1.0 + (static_cast<double>(rng_.uniform(0, 100)) - 50.0) / 1000.0;  // ±5%
            node.offset_ms = static_cast<std::int64_t>(rng_.uniform(0, 1000)) - 500;
        }
        views.push_back({node.id, &node.storage, nullptr});
    }
    checker_ = std::make_unique<Checker>(views, opts.contract_checks);
}

raft::Config Cluster::node_config(int k) const {
    raft::Config c;
    c.id = nodes_[k].id;
    for (const Node& n : nodes_)
        c.voters.push_back(n.id);
    c.election_tick = 10;
    c.heartbeat_tick = heartbeat_tick_;
    c.lease_read = lease_read_;
    c.max_entries_per_msg = max_entries_;
    c.max_inflight_msgs = max_inflight_;
    c.max_inflight_bytes = max_inflight_bytes_;
    c.snapshot_threshold = snapshot_threshold_;
    c.seed = opts_.seed * 7919 + c.id * 104729 + nodes_[k].incarnation;
    c.planted_bug = opts_.planted_bug;
    return c;
}

raft::Millis Cluster::clock_ms(const Node& n) const {
    auto ms = static_cast<std::int64_t>(static_cast<double>(now_) * n.rate / 1000.0);
    return static_cast<raft::Millis>(1'700'000'000'000LL + n.offset_ms + ms);
}

std::uint64_t Cluster::tick_interval(const Node& n) const {
    return static_cast<std::uint64_t>(static_cast<double>(kTickUs) / n.rate);
}

void Cluster::trace(const char* fmt, ...) const {
    if (!opts_.trace) return;
    std::fprintf(stderr, "%8llu.%03llu ", static_cast<unsigned long long>(now_ / 1000),
                 static_cast<unsigned long long>(now_ % 1000));
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
}

void Cluster::schedule(std::uint64_t at, EventKind kind, int node, std::uint64_t arg) {
    events_.push(Event{at, seq_++, kind, node, arg});
}

void Cluster::start_node(int k) {
    Node& n = nodes_[k];
    n.up = true;
    ++n.incarnation;
    n.persisting = false;
    n.raft = std::make_unique<raft::Raft>(node_config(k), n.storage);
    n.sm = SimStateMachine::restore(n.storage.snapshot().data);
    checker_->set_raft(n.id, n.raft.get());
    checker_->on_start(n.id);
    trace("n%llu start term=%llu commit=%llu snap=%llu last=%llu", (unsigned long long)n.id,
          (unsigned long long)n.raft->term(), (unsigned long long)n.raft->log().committed(),
          (unsigned long long)n.storage.snapshot().meta.index,
          (unsigned long long)n.storage.last_index());
    schedule(now_ + client_rng_.uniform(1, tick_interval(n)), EventKind::tick, k, n.incarnation);
}

void Cluster::crash_node(int k) {
    Node& n = nodes_[k];
    if (!n.up) return;
    trace("n%llu CRASH (ready in flight: %d)", (unsigned long long)n.id, n.persisting ? 1 : 0);
    n.up = false;
    ++n.incarnation;
    checker_->set_raft(n.id, nullptr);
    n.raft.reset();
    n.persisting = false;
    n.pending = Ready{};
    n.sm = SimStateMachine{};
    ++stats_.crashes;
}

void Cluster::pump(int k) {
    Node& n = nodes_[k];
    checker_->after_step(n.id);
    while (n.up && !n.persisting && n.raft->has_ready()) {
        Ready rd = n.raft->ready();
        if (rd.role == raft::Role::leader) leader_hint_ = k;
        for (const Message& m : rd.messages_before_persist) {
            checker_->on_send(m);
            net_send(m);
        }
        bool disk = rd.hard_state || !rd.entries.empty() || rd.snapshot;
        std::uint64_t latency = 0;
        if (disk) {
            latency = n.slow_disk ? rng_.uniform(5'000, 80'000) : rng_.uniform(20, 400);
        }
        if (latency > 0) {
            n.persisting = true;
            n.busy_until = now_ + latency;
            n.pending = std::move(rd);
            schedule(n.busy_until, EventKind::persist_done, k, n.incarnation);
            return;
        }
        complete_ready(k, std::move(rd));
    }
}

void Cluster::complete_ready(int k, Ready rd) {
    Node& n = nodes_[k];
    checker_->on_persist(n.id, rd);
    if (rd.snapshot) {
        n.storage.apply_snapshot(*rd.snapshot);
        n.sm = SimStateMachine::restore(rd.snapshot->data);
        checker_->on_install(n.id, rd.snapshot->meta, n.sm.digest);
        trace("n%llu installed snapshot %llu", (unsigned long long)n.id,
              (unsigned long long)rd.snapshot->meta.index);
    }
    if (!n.storage.append(rd.entries)) checker_->fail("storage refused an append from the core");
    if (rd.hard_state) n.storage.set_hard_state(*rd.hard_state);
    for (const Message& m : rd.messages) {
        checker_->on_send(m);
        net_send(m);
    }
    apply_entries(k, rd.committed_entries);
    for (const raft::ReadState& rs : rd.read_states)
        on_read_state(k, rs);
    if (rd.snapshot_wanted && n.sm.applied > n.storage.snapshot().meta.index) {
        n.storage.create_snapshot(n.sm.applied, n.sm.serialize());
        if (n.sm.applied > keep_entries_) n.storage.compact(n.sm.applied - keep_entries_);
    }
    n.raft->advance(rd);
    checker_->after_step(n.id);
}

void Cluster::apply_entries(int k, const std::vector<Entry>& entries) {
    Node& n = nodes_[k];
    for (const Entry& e : entries) {
        n.sm.apply(e);
        checker_->on_apply(n.id, e, n.sm.digest);
        on_applied_command(k, e);
    }
}

void Cluster::net_send(const Message& m) {
    ++stats_.messages;
    if (m.type == raft::MessageType::snapshot) ++stats_.snapshots_sent;
    int from = static_cast<int>(m.from - 1), to = static_cast<int>(m.to - 1);
    int copies = 1;
    if (!healed_) {
        if (blocked_[from][to] || rng_.chance(drop_)) {
            trace("n%llu -> n%llu %s dropped", (unsigned long long)m.from, (unsigned long long)m.to,
                  raft::to_string(m.type).data());
            return;
        }
        if (rng_.chance(dup_)) copies = 2;
    }
    for (int c = 0; c < copies; ++c) {
        // A healthy link is FIFO (like TCP): a fixed latency. Faults add random delay to
        // some messages, which reorders them.
        std::uint64_t delay = link_latency_us_;
        if (!healed_ && (c > 0 || rng_.chance(slow_net_))) delay += rng_.uniform(0, max_delay_us_);
        std::size_t slot;
        if (free_slots_.empty()) {
            slot = slots_.size();
            slots_.push_back(m);
        } else {
            slot = free_slots_.back();
            free_slots_.pop_back();
            slots_[slot] = m;
        }
        schedule(now_ + delay, EventKind::deliver, to, slot);
    }
}

void Cluster::deliver(int k, std::size_t slot) {
    Node& n = nodes_[k];
    const Message& m = slots_[slot];
    trace("n%llu <- n%llu %s t=%llu i=%llu lt=%llu c=%llu n=%zu%s%s", (unsigned long long)m.to,
          (unsigned long long)m.from, raft::to_string(m.type).data(), (unsigned long long)m.term,
          (unsigned long long)m.index, (unsigned long long)m.log_term, (unsigned long long)m.commit,
          m.entries.size(), m.reject ? " reject" : "", n.up ? "" : " (down)");
    if (n.up) {
        n.raft->step(m);
        pump(k);
    }
    free_slots_.push_back(slot);
}

void Cluster::dispatch(const Event& ev) {
    int k = ev.node;
    switch (ev.kind) {
        case EventKind::tick: {
            Node& n = nodes_[k];
            if (!n.up || ev.arg != n.incarnation) return;
            // Ticks run on time even while a Ready is being persisted: the shell's
            // timer does not wait for the disk (the core allows input between ready()
            // and advance(); only the next Ready waits).
            n.raft->tick(clock_ms(n));
            pump(k);
            schedule(now_ + tick_interval(n), EventKind::tick, k, ev.arg);
            return;
        }
        case EventKind::deliver:
            deliver(k, ev.arg);
            return;
        case EventKind::persist_done: {
            Node& n = nodes_[k];
            if (!n.up || ev.arg != n.incarnation || !n.persisting) return;
            n.persisting = false;
            complete_ready(k, std::move(n.pending));
            n.pending = Ready{};
            pump(k);
            return;
        }
        case EventKind::restart:
            if (!nodes_[k].up && ev.arg == nodes_[k].incarnation) {
                start_node(k);
                pump(k);
            }
            return;
        case EventKind::chaos:
            chaos();
            return;
        case EventKind::client:
            client_action();
            return;
        case EventKind::heal:
            heal();
            return;
        case EventKind::unpartition:
            if (ev.arg == partition_gen_) {
                for (auto& row : blocked_)
                    row.assign(row.size(), false);
                trace("partition healed");
            }
            return;
        case EventKind::check_live:
            check_live();
            return;
    }
}

SimResult Cluster::run() {
    for (int k = 0; k < opts_.nodes; ++k) {
        nodes_[k].incarnation = 0;
        start_node(k);
    }
    schedule(0, EventKind::client, 0);
    if (opts_.faults) schedule(kChaosUs, EventKind::chaos, 0);
    schedule(opts_.fault_ms * 1000, EventKind::heal, 0);
    while (!events_.empty() && !done_ && !checker_->failed()) {
        Event ev = events_.top();
        events_.pop();
        now_ = ev.time;
        checker_->set_time(now_);
        dispatch(ev);
        if (++stats_.events > kMaxEvents) checker_->fail("event limit reached (livelock?)");
    }
    SimResult r;
    stats_.sim_ms = now_ / 1000;
    stats_.elections = checker_->leader_terms();
    std::uint64_t acked = 0;
    for (const Command& c : commands_)
        acked += c.acked ? 1 : 0;
    stats_.proposed = commands_.size();
    stats_.acked = acked;
    r.stats = stats_;
    if (checker_->failed()) {
        r.ok = false;
        r.violation = checker_->failure();
    } else if (!done_) {
        r.ok = false;
        r.violation = "simulation ended before the cluster became live";
    }
    return r;
}

}  // namespace dueq::sim
