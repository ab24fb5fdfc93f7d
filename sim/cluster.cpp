#include "sim/cluster.h"

#include "common/invariant.h"
#include "testing/planted/planted.h"

#include <spdlog/spdlog.h>

#include <cstdarg>
#include <cstdio>
#include <sstream>

namespace dueq::sim {

using raft::Message;
using raft::NodeId;

namespace {
constexpr std::uint64_t kTickUs = 10'000;   // nodes tick every 10 ms of their own clock
constexpr std::uint64_t kChaosUs = 50'000;  // a fault decision every 50 ms
constexpr std::uint64_t kLinkCheckUs = 30'000;
constexpr std::uint64_t kMaxEvents = 20'000'000;
}  // namespace

std::string replay_command(const SimOptions& o) {
    std::ostringstream os;
    os << "dueq-sim run --seed " << o.seed << " --nodes " << o.nodes;
    if (!o.faults) os << " --no-faults";
    if (o.fault_ms != SimOptions{}.fault_ms) os << " --fault-ms " << o.fault_ms;
    if (o.planted != node::PlantedDefects{}) os << " --plant " << testing::planted_name(o.planted);
    if (!o.contract_checks) os << " --no-contract-checks";
    if (o.membership >= 0) os << " --membership " << (o.membership ? "on" : "off");
    os << " --trace";
    return os.str();
}

SimResult run_simulation(const SimOptions& opts) {
    // A broken invariant stops a real node (dueqd exits 70): here it fails the seed.
    try {
        return Cluster(opts).run();
    } catch (const InvariantBroken& e) {
        return SimResult{false, std::string("a node stopped: ") + e.what(), {}};
    }
}

Cluster::Cluster(const SimOptions& opts)
    : opts_(opts),
      rng_(opts.seed * 0x2545F4914F6CDD1DULL + 1),
      client_rng_(opts.seed ^ 0xc1c1c1c1ULL),
      disk_rng_(opts.seed ^ 0xd15cd15cULL) {
    // The shell logs elections and snapshots; thousands of seeds would drown the output.
    spdlog::set_level(opts.trace ? spdlog::level::info : spdlog::level::off);
    // The shape of this run: every fault is on, at an intensity drawn from the seed.
    heartbeat_tick_ = static_cast<int>(rng_.uniform(1, 3));
    lease_read_ = rng_.chance(0.5);
    // Not from rng_, so that the fault stream of a seed stays what it was.
    autonomous_queue_ = ((opts.seed * 0x9E3779B97F4A7C15ULL) >> 40) & 1;
    // How often the applied state is written (a restart replays the log after it).
    const std::uint64_t state_entries_choices[] = {1, 7, 100, 20000};
    const std::int64_t state_ms_choices[] = {0, 50, 1000, 1000};
    const std::uint64_t state_pick = ((opts.seed * 0xD6E8FEB86659FD93ULL) >> 50) & 3;
    state_write_entries_ = state_entries_choices[state_pick];
    state_write_ms_ = state_ms_choices[state_pick];
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
    session_grace_ms_ = std::int64_t(rng_.uniform(0, 300));
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
    // Not from rng_ either: membership changes in half the seeds, with spare machines.
    membership_changes_ = opts.membership < 0 ? (((opts.seed * 0xA24BAED4963EE407ULL) >> 37) & 1)
                                              : opts.membership > 0;
    member_rng_ = raft::Random(opts.seed ^ 0x6d656d62ULL);
    if (membership_changes_) membership_rate_ = member_rng_.uniform(20, 150) / 1000.0;
    const int spares = membership_changes_ ? 2 : 0;
    const auto n = static_cast<std::size_t>(opts.nodes + spares);
    blocked_.assign(n, std::vector<bool>(n, false));
    link_up_.assign(n, std::vector<bool>(n, false));
    std::vector<NodeView> views;
    for (int k = 0; k < opts.nodes + spares; ++k) {
        auto node = std::make_unique<Node>(*this, k);
        if (opts.faults) {
            node->rate = 1.0 + (static_cast<double>(rng_.uniform(0, 100)) - 50.0) / 1000.0;  // ±5%
            node->offset_ms = static_cast<std::int64_t>(rng_.uniform(0, 1000)) - 500;
        }
        Node* raw = node.get();
        SimDisk::Hooks dh;
        dh.schedule_flush = [this, raw] {
            const std::uint64_t latency =
                raw->slow_disk ? rng_.uniform(5'000, 80'000) : rng_.uniform(20, 400);
            schedule(now_ + latency, EventKind::disk_flush, raw->k, raw->incarnation);
        };
        dh.on_synced = [this, raw](const storage::LogWrite& w) { checker_->on_synced(raw->id, w); };
        dh.on_install = [this, raw](const StoreImage& image) {
            auto store = image.load();
            if (store) raw->digest.reset(*store);
            checker_->on_install(raw->id, image.meta, raw->digest.value());
            trace("n%llu installs snapshot %llu", (unsigned long long)raw->id,
                  (unsigned long long)image.meta.index);
        };
        node->disk = std::make_unique<SimDisk>(std::move(dh));
        node->joined = k < opts.nodes;
        views.push_back({node->id, &node->disk->durable().log, nullptr});
        nodes_.push_back(std::move(node));
    }
    checker_ = std::make_unique<Checker>(views, opts.contract_checks);
    history_ = std::make_unique<TaskHistory>(*checker_);
}

Cluster::~Cluster() = default;

shell::ShellConfig Cluster::node_config(int k) const {
    shell::ShellConfig sc;
    raft::Config& c = sc.raft;
    c.id = nodes_[k]->id;
    // The first members; a spare starts knowing none and learns them from the leader.
    if (k < opts_.nodes) {
        for (int j = 0; j < opts_.nodes; ++j)
            c.voters.push_back(nodes_[j]->id);
    }
    c.election_tick = 10;
    c.heartbeat_tick = heartbeat_tick_;
    c.lease_read = lease_read_;
    c.max_entries_per_msg = max_entries_;
    c.max_inflight_msgs = max_inflight_;
    c.max_inflight_bytes = max_inflight_bytes_;
    c.snapshot_threshold = snapshot_threshold_;
    c.seed = opts_.seed * 7919 + c.id * 104729 + nodes_[k]->incarnation;
    c.planted_bug = opts_.planted.core;
    sc.proposal_timeout_ms = 300;
    sc.campaign_step_ms = 10 * heartbeat_tick_;
    sc.log_keep = keep_entries_;
    sc.state_write_entries = state_write_entries_;
    sc.state_write_ms = state_write_ms_;
    sc.defect = opts_.planted.shell;
    sc.store_defect = opts_.planted.store;
    return sc;
}

std::int64_t Cluster::clock_ms(const Node& n) const {
    auto ms = static_cast<std::int64_t>(static_cast<double>(now_) * n.rate / 1000.0);
    return 1'700'000'000'000LL + n.offset_ms + ms;
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
    Node& n = *nodes_[k];
    n.up = true;
    ++n.incarnation;
    auto loaded = n.disk->load();
    if (!loaded) return checker_->fail("node " + std::to_string(n.id) + ": its disk does not load");
    shell::Hooks hooks;
    hooks.fatal = [this, &n](const std::string& why) {
        checker_->fail("node " + std::to_string(n.id) + " stopped: " + why);
    };
    hooks.on_apply = [this, k](const raft::Entry& e, const queue::Command* cmd,
                               const queue::Result* r, std::span<const storage::TaskChange> ch) {
        on_apply(k, e, cmd, r, ch);
    };
    hooks.on_read_state = [this, k](const raft::ReadState& rs) { on_read_state(k, rs); };
    hooks.applied = [this, &n](bool wrote) { n.writes->on_batch_applied(wrote, clock_ms(n)); };
    hooks.term_started = [this, &n] { n.writes->on_term_started(clock_ms(n)); };
    hooks.fork_ended = [&n] {
        if (n.autonomy) n.autonomy->on_fork_ended();
    };
    hooks.merged = [&n](const queue::Merge& m, const queue::Result& r) {
        if (n.autonomy) n.autonomy->on_merge_applied(m, r);
    };
    n.shell = std::make_unique<shell::RaftShell>(node_config(k), *n.disk, n, std::move(hooks));
    if (auto err = n.shell->start(loaded->first, std::move(loaded->second)))
        return checker_->fail("node " + std::to_string(n.id) + ": " + *err);
    node::WritePathSettings ws;
    ws.max_waiting_takes = 64;
    ws.session_grace_ms = session_grace_ms_;
    ws.node_bits = n.id;
    ws.first_session = std::uint64_t(clock_ms(n)) << 4;
    n.writes = std::make_unique<node::WritePath>(ws, *n.shell);
    node::AutonomySettings as;
    as.after_ms = 300;  // 3 election timeouts
    as.self = n.id;
    as.members = static_cast<std::size_t>(opts_.nodes);
    as.merge_batch = 8;
    as.merge_resend_ms = 300;
    as.max_waiting_takes = 64;
    n.autonomy = std::make_unique<node::Autonomy>(
        as, *n.shell, n.writes->sessions(), *n.disk,
        [this, k](raft::NodeId leader, const std::vector<queue::Merge>& merges) {
            send_merges(k, leader, merges);
        },
        clock_ms(n));
    if (!n.autonomy->load(loaded->first.overlay))
        return checker_->fail("node " + std::to_string(n.id) + ": its overlay does not load");
    const raft::SnapshotMeta base = n.shell->log().snapshot().meta;
    n.disk->checkpoint_now(base);
    n.sendable = n.disk->checkpoint_at(base);
    n.digest.reset(n.shell->store());
    checker_->set_raft(n.id, &n.shell->raft());
    checker_->on_start(n.id, n.shell->applied(), n.digest.value());
    trace("n%llu start term=%llu commit=%llu applied=%llu last=%llu", (unsigned long long)n.id,
          (unsigned long long)n.shell->raft().term(),
          (unsigned long long)n.shell->raft().log().committed(),
          (unsigned long long)n.shell->applied().index,
          (unsigned long long)n.shell->log().last_index());
    schedule(now_ + client_rng_.uniform(1, tick_interval(n)), EventKind::tick, k, n.incarnation);
}

void Cluster::crash_node(int k) {
    Node& n = *nodes_[k];
    if (!n.up) return;
    const std::size_t unsynced = n.disk->unsynced_jobs();
    const std::size_t keep = unsynced == 0 ? 0 : rng_.uniform(0, unsynced);
    trace("n%llu CRASH (keeps %zu of %zu unsynced writes)", (unsigned long long)n.id, keep,
          unsynced);
    n.up = false;
    ++n.incarnation;
    checker_->set_raft(n.id, nullptr);
    n.autonomy.reset();
    n.writes.reset();
    n.shell.reset();
    n.sendable.reset();
    n.disk->crash(keep);
    for (int j = 0; j < slots(); ++j)
        if (j != k) set_link(k, j, false);
    ++stats_.crashes;
    if (keep > 0 && keep < unsynced) ++stats_.torn_crashes;
}

void Cluster::pump(int k) {
    Node& n = *nodes_[k];
    if (!n.up) return;
    checker_->after_step(n.id);
    n.shell->process_ready();
    if (n.up) {
        n.writes->after_ready(clock_ms(n));
        checker_->after_step(n.id);
        if (n.shell->is_leader()) {
            leader_hint_ = k;
            after_leader_step(k);
        }
    }
}

void Cluster::run_timers(int k) {
    // dueqd arms a timer for the write path's next deadline; ticks come often enough.
    Node& n = *nodes_[k];
    const std::int64_t now = clock_ms(n);
    // An autonomous node is its own leader: leases, parked takes and sessions are its.
    if (n.autonomy->serving()) {
        if (auto at = n.autonomy->next_deadline(); at && *at <= now) n.autonomy->on_timer(now);
    } else if (auto at = n.writes->next_deadline(); at && *at <= now) {
        n.writes->on_timer(now);
    }
}

void Cluster::flush_disk(int k) {
    Node& n = *nodes_[k];
    // Sometimes a flush writes only the oldest few jobs (a group commit while the next
    // group waits). From its own stream, so that the faults of a seed stay what they were.
    const std::size_t max_jobs = disk_rng_.chance(0.5) ? disk_rng_.uniform(1, 3) : SIZE_MAX;
    auto [ticket, checkpoints] = n.disk->flush(max_jobs);
    if (ticket != 0) {
        n.autonomy->on_persisted(ticket);
        n.shell->on_persisted(ticket);
    }
    for (const auto& meta : checkpoints)
        if (n.up && n.shell->on_checkpoint(meta)) n.sendable = n.disk->checkpoint_at(meta);
    pump(k);
}

void Cluster::on_apply(int k, const raft::Entry& e, const queue::Command* cmd,
                       const queue::Result* result, std::span<const storage::TaskChange> changes) {
    Node& n = *nodes_[k];
    // The shell may go from one Ready to the next inside one input (a commit-only Ready
    // needs no disk): let the checker see the commit index this entry was applied under.
    checker_->after_step(n.id);
    n.digest.apply(changes, n.shell->store());
    checker_->on_apply(n.id, e, n.digest.value());
    history_->applied(n.id, e, cmd, result);
    // In log order: the first application of each index.
    if (e.index > removals_seen_) {
        removals_seen_ = e.index;
        if (cmd && result) key_removed(*cmd, *result, n.shell->store());
    }
}

// Merge frames go to the leader over the simulated network (as RaftIo's peer frames): a
// blocked link or a drop loses them, and the sender sends them again.
void Cluster::send_merges(int from, raft::NodeId leader, const std::vector<queue::Merge>& merges) {
    const int to = static_cast<int>(leader - 1);
    if (to < 0 || to >= slots() || !link_up_[from][to]) return;
    if (!healed_ && (blocked_[from][to] || rng_.chance(drop_))) return;
    merge_slots_[next_merge_slot_] = {from, merges};
    schedule(now_ + link_latency_us_, EventKind::merges, to, next_merge_slot_++);
}

void Cluster::deliver_merges(int to, std::uint64_t slot) {
    auto it = merge_slots_.find(slot);
    if (it == merge_slots_.end()) return;
    auto [from, merges] = std::move(it->second);
    merge_slots_.erase(it);
    Node& n = *nodes_[to];
    if (!n.up) return;
    const std::string problem =
        n.autonomy->receive_merges(nodes_[from]->id, std::move(merges), clock_ms(n));
    trace("n%llu <- n%d merges%s%s", (unsigned long long)n.id, from + 1,
          problem.empty() ? "" : ": ", problem.c_str());
    pump(to);
}

void Cluster::net_send(int from, const Message& m) {
    ++stats_.messages;
    const int to = static_cast<int>(m.to - 1);
    Slot slot_value{m, nullptr};
    if (m.type == raft::MessageType::snapshot) {
        // As the node's RaftIo: the checkpoint the message names, or nothing.
        const Node& n = *nodes_[from];
        if (!n.sendable || !m.snapshot || !(n.sendable->meta == m.snapshot->meta)) return;
        slot_value.snapshot = n.sendable;
        ++stats_.snapshots_sent;
    }
    checker_->on_send(m);
    int copies = 1;
    if (!link_up_[from][to]) return;  // the mesh refuses to send on a link that is down
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
            slots_.push_back(slot_value);
        } else {
            slot = free_slots_.back();
            free_slots_.pop_back();
            slots_[slot] = slot_value;
        }
        schedule(now_ + delay, EventKind::deliver, to, slot);
    }
}

void Cluster::deliver(int k, std::size_t slot) {
    Node& n = *nodes_[k];
    Slot s = std::move(slots_[slot]);
    free_slots_.push_back(slot);
    const Message& m = s.message;
    trace("n%llu <- n%llu %s t=%llu i=%llu lt=%llu c=%llu n=%zu%s%s", (unsigned long long)m.to,
          (unsigned long long)m.from, raft::to_string(m.type).data(), (unsigned long long)m.term,
          (unsigned long long)m.index, (unsigned long long)m.log_term, (unsigned long long)m.commit,
          m.entries.size(), m.reject ? " reject" : "", n.up ? "" : " (down)");
    if (!n.up) return;
    if (s.snapshot) {
        auto store = s.snapshot->load();
        if (!store) return checker_->fail("a snapshot's records do not load");
        if (n.shell->step_snapshot(m, std::move(store))) n.disk->set_received(s.snapshot);
    } else if (auto problem = n.shell->step(m.from, m); !problem.empty()) {
        return checker_->fail("node " + std::to_string(n.id) + " refused a real peer's " +
                              std::string(raft::to_string(m.type)) + ": " + problem);
    }
    pump(k);
}

void Cluster::set_link(int a, int b, bool up) {
    if (link_up_[a][b] == up) return;
    link_up_[a][b] = link_up_[b][a] = up;
    if (!up) ++stats_.link_downs;
    trace("link n%d-n%d %s", a + 1, b + 1, up ? "up" : "down");
    for (auto [self, peer] : {std::pair{a, b}, std::pair{b, a}}) {
        Node& n = *nodes_[self];
        if (!n.up) continue;
        n.shell->on_link_change(nodes_[peer]->id, up, clock_ms(n));
        pump(self);
    }
}

void Cluster::check_links() {
    // The mesh's view: a link is up while both ends run and messages pass both ways.
    for (int a = 0; a < slots(); ++a)
        for (int b = a + 1; b < slots(); ++b)
            set_link(a, b, nodes_[a]->up && nodes_[b]->up && !blocked_[a][b] && !blocked_[b][a]);
    schedule(now_ + kLinkCheckUs, EventKind::link_check, 0);
}

void Cluster::dispatch(const Event& ev) {
    const int k = ev.node;
    Node& n = *nodes_[k];
    switch (ev.kind) {
        case EventKind::tick:
            if (!n.up || ev.arg != n.incarnation) return;
            // Ticks run on time even while a Ready is being persisted: the shell's
            // timer does not wait for the disk.
            n.shell->tick(clock_ms(n));
            n.autonomy->on_tick(clock_ms(n));
            run_timers(k);
            pump(k);
            schedule(now_ + tick_interval(n), EventKind::tick, k, ev.arg);
            return;
        case EventKind::deliver:
            return deliver(k, ev.arg);
        case EventKind::merges:
            return deliver_merges(k, ev.arg);
        case EventKind::disk_flush:
            if (n.up && ev.arg == n.incarnation) flush_disk(k);
            return;
        case EventKind::restart:
            if (!n.up && !n.retired && ev.arg == n.incarnation) {
                start_node(k);
                pump(k);
            }
            return;
        case EventKind::chaos:
            return chaos();
        case EventKind::client:
            return client_action();
        case EventKind::heal:
            return heal();
        case EventKind::unpartition:
            if (ev.arg == partition_gen_) {
                for (auto& row : blocked_)
                    row.assign(row.size(), false);
                trace("partition healed");
            }
            return;
        case EventKind::link_check:
            return check_links();
        case EventKind::check_live:
            return check_live();
    }
}

SimResult Cluster::run() {
    for (int k = 0; k < opts_.nodes; ++k)
        start_node(k);
    check_links();
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
    stats_.acked = history_->acknowledged_count();
    stats_.abandoned = history_->abandoned_count();
    stats_.leases = history_->leases_checked();
    stats_.sessions_released = history_->sessions_released();
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
