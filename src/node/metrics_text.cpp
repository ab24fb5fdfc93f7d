// /metrics: the node's state and counters in the Prometheus text format (docs/admin.md
// lists every series). Names follow Prometheus's conventions: a dueq_ prefix, base units
// (seconds, bytes), _total on counters.
#include "admin/prometheus.h"
#include "node/node.h"
#include "wire/protocol.h"

namespace dueq::node {

std::string Node::metrics_text() const {
    admin::PromText m;
    const raft::Raft& raft = shell_->raft();
    using U = std::uint64_t;

    m.family(
        "dueq_requests_total", "counter",
        "Client requests answered, by op and result code (invalid: the frame did not decode).");
    const auto& rq = metrics_.requests;
    for (std::size_t op = 0; op < RequestMeter::kOps; ++op)
        for (std::size_t code = 0; code < RequestMeter::kCodes; ++code)
            if (const U n = rq.count(op, code))
                m.sample("dueq_requests_total",
                         {{"op", RequestMeter::op_name(op)},
                          {"code", std::string(wire::code_name(wire::Code(code)))}},
                         n);
    m.family(
        "dueq_request_duration_seconds", "histogram",
        "Time from a request's frame to its answer, by op; blocking takes include their wait.");
    for (std::size_t op = 0; op < RequestMeter::kOps; ++op)
        if (rq.latency(op).count() > 0)
            m.histogram("dueq_request_duration_seconds", {{"op", RequestMeter::op_name(op)}},
                        rq.latency(op));

    m.family("dueq_raft_term", "gauge", "The Raft term this node is in.");
    m.sample("dueq_raft_term", U(raft.term()));
    m.family("dueq_raft_is_leader", "gauge", "1 if this node is the leader.");
    m.sample("dueq_raft_is_leader", U(is_leader() ? 1 : 0));
    m.family("dueq_raft_has_leader", "gauge", "1 if this node knows a leader.");
    m.sample("dueq_raft_has_leader", U(raft.leader() != raft::kNoNode ? 1 : 0));
    m.family("dueq_raft_commit_index", "gauge", "The highest log index known to be committed.");
    m.sample("dueq_raft_commit_index", U(raft.log().committed()));
    m.family("dueq_raft_applied_index", "gauge", "The highest log index applied to the store.");
    m.sample("dueq_raft_applied_index", U(applied_index()));
    m.family("dueq_raft_last_index", "gauge", "The last index in this node's log.");
    m.sample("dueq_raft_last_index", U(raft.log().last_index()));
    m.family("dueq_raft_leader_changes_total", "counter",
             "Times this node saw its leader change, to none included.");
    m.sample("dueq_raft_leader_changes_total", metrics_.leader_changes);
    m.family("dueq_raft_elections_total", "counter", "Terms this node began as a candidate.");
    m.sample("dueq_raft_elections_total", metrics_.elections_started);
    m.family("dueq_raft_proposals_pending", "gauge", "Proposals waiting to commit.");
    m.sample("dueq_raft_proposals_pending", U(shell_->pending_proposals()));
    m.family("dueq_peer_input_dropped_total", "counter",
             "Peer frames refused before the Raft core (malformed, forged or out of place).");
    m.sample("dueq_peer_input_dropped_total", raft_io_->dropped());

    if (const auto* w = raft_io_->write_metrics()) {
        m.family("dueq_storage_fsync_duration_seconds", "histogram",
                 "Time of each synced RocksDB write batch, the fsync included.");
        m.histogram("dueq_storage_fsync_duration_seconds", {}, w->synced_write);
        m.family("dueq_storage_written_bytes_total", "counter",
                 "Bytes handed to RocksDB in write batches.");
        m.sample("dueq_storage_written_bytes_total", w->bytes.load(std::memory_order_relaxed));
        m.family("dueq_storage_write_batches_total", "counter", "RocksDB write batches.");
        m.sample("dueq_storage_write_batches_total", w->batches.load(std::memory_order_relaxed));
    }

    const queue::Store& store = shell_->store();
    const std::int64_t now = store_now();
    const auto names = store.queue_names();
    std::vector<std::pair<std::string, queue::QueueStats>> stats;
    std::vector<queue::QueueCounters> counters;
    for (const auto& n : names) {
        stats.emplace_back(n, store.stats(n, now));
        counters.push_back(store.counters(n));
    }
    m.family("dueq_tasks", "gauge", "Tasks in the store, every queue and status.");
    m.sample("dueq_tasks", U(store.task_count()));
    m.family("dueq_queue_tasks", "gauge", "Tasks by queue and status (ready includes delayed).");
    for (const auto& [n, s] : stats) {
        m.sample("dueq_queue_tasks", {{"queue", n}, {"status", "ready"}}, s.ready);
        m.sample("dueq_queue_tasks", {{"queue", n}, {"status", "taken"}}, s.taken);
        m.sample("dueq_queue_tasks", {{"queue", n}, {"status", "buried"}}, s.buried);
        m.sample("dueq_queue_tasks", {{"queue", n}, {"status", "done"}}, s.done);
    }
    m.family("dueq_queue_due_tasks", "gauge",
             "Ready tasks due now (time - lead_ms has passed), counted up to 10000.");
    for (const auto& [n, s] : stats)
        m.sample("dueq_queue_due_tasks", {{"queue", n}}, s.due_now);
    m.family("dueq_queue_late_tasks", "gauge",
             "Ready tasks whose time has passed, counted up to 10000.");
    for (const auto& [n, s] : stats)
        m.sample("dueq_queue_late_tasks", {{"queue", n}}, s.late_now);
    m.family("dueq_queue_oldest_late_age_seconds", "gauge",
             "How long ago the time of the oldest late ready task passed (0: none late).");
    for (const auto& [n, s] : stats)
        m.sample("dueq_queue_oldest_late_age_seconds", {{"queue", n}},
                 s.oldest_late ? double(now - *s.oldest_late) / 1000.0 : 0.0);
    auto counter = [&](const char* name, const char* help, U queue::QueueCounters::*field) {
        m.family(name, "counter", help);
        for (std::size_t i = 0; i < names.size(); ++i)
            m.sample(name, {{"queue", names[i]}}, counters[i].*field);
    };
    counter("dueq_queue_puts_total", "Puts applied.", &queue::QueueCounters::puts);
    counter("dueq_queue_takes_total", "Tasks handed out under a lease.",
            &queue::QueueCounters::takes);
    counter("dueq_queue_late_takes_total", "Tasks handed out after their time had passed.",
            &queue::QueueCounters::late_takes);
    counter("dueq_queue_acks_total", "Acks applied (refreshes, when the ack carries a new time).",
            &queue::QueueCounters::acks);
    counter("dueq_queue_lease_expiries_total", "Leases that ran out before an ack.",
            &queue::QueueCounters::lease_expiries);
    counter("dueq_queue_buries_total", "Tasks buried, by bury or by running out of attempts.",
            &queue::QueueCounters::buries);

    m.family("dueq_sessions", "gauge", "Client sessions, connected or within their grace.");
    m.sample("dueq_sessions", U(writes_->sessions().size()));
    m.family("dueq_client_connections", "gauge", "Open client connections.");
    m.sample("dueq_client_connections", U(server_ ? server_->connections() : 0));
    m.family("dueq_snapshot_sends_total", "counter",
             "Snapshots streamed to a follower to the end.");
    m.sample("dueq_snapshot_sends_total", raft_io_->snapshots_sent());
    m.family("dueq_snapshot_installs_total", "counter", "Snapshots from the leader installed.");
    m.sample("dueq_snapshot_installs_total", shell_->snapshots_installed());

    if (config_.members.size() > 1) {
        m.family("dueq_peer_up", "gauge", "1 while the link to a peer is up.");
        for (std::size_t id = 1; id <= config_.members.size(); ++id)
            if (id != raft_id_)
                m.sample("dueq_peer_up", {{"peer", config_.members[id - 1].id}},
                         U(raft_io_->connected(id) ? 1 : 0));
        m.family("dueq_peer_rtt_seconds", "gauge",
                 "The latest heartbeat round trip to a peer (measured by the leader).");
        for (std::size_t id = 1; id <= config_.members.size(); ++id) {
            const auto* seen = raft_io_->peer_seen(id);
            if (id != raft_id_ && seen && seen->rtt_us >= 0)
                m.sample("dueq_peer_rtt_seconds", {{"peer", config_.members[id - 1].id}},
                         double(seen->rtt_us) / 1e6);
        }
        if (is_leader()) {
            m.family("dueq_peer_lag_entries", "gauge",
                     "Log entries the leader has that a peer is not known to have.");
            const raft::Index last = raft.log().last_index();
            for (std::size_t id = 1; id <= config_.members.size(); ++id)
                if (const auto* pr = id != raft_id_ ? raft.progress(id) : nullptr)
                    m.sample("dueq_peer_lag_entries", {{"peer", config_.members[id - 1].id}},
                             U(last > pr->match ? last - pr->match : 0));
        }
    }

    m.family("dueq_mode", "gauge",
             "1 for the mode this node is in: normal, autonomous (cut off, serving alone) or "
             "merging.");
    const std::string mode = to_string(autonomy_->mode());
    for (std::string_view each : wire::kNodeModes)
        m.sample("dueq_mode", {{"mode", std::string(each)}}, U(mode == each ? 1 : 0));
    m.family("dueq_autonomy_overlay_records", "gauge",
             "Writes made in autonomous mode not merged into the majority yet.");
    m.sample("dueq_autonomy_overlay_records", U(autonomy_->overlay_size()));
    m.family("dueq_healthy", "gauge", "1 when /health answers 200.");
    m.sample("dueq_healthy", U(unhealthy_reason().empty() ? 1 : 0));
    return m.text();
}

}  // namespace dueq::node
