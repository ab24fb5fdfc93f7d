// /metrics: the node's state and counters in the Prometheus text format, one family of
// node/metric_families.h at a time (docs/admin.md lists every series).
#include <filesystem>

#include "admin/process_metrics.h"
#include "admin/prometheus.h"
#include "common/version.h"
#include "node/metric_families.h"
#include "node/node.h"
#include "node/node_admin.h"
#include "wire/protocol.h"

namespace dueq::node {

using U = std::uint64_t;

namespace {
// Every file under `dir` (RocksDB keeps a few hundred at most).
std::uint64_t directory_bytes(const std::string& dir) {
    std::uint64_t bytes = 0;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code size_ec;
        if (it->is_regular_file(size_ec)) {
            const auto n = it->file_size(size_ec);
            if (!size_ec) bytes += n;
        }
    }
    return bytes;
}
}  // namespace

std::string NodeAdmin::metrics_text() const {
    admin::PromText m;
    request_metrics(m);
    raft_metrics(m);
    if (const auto* w = node_.raft_io_->write_metrics()) {
        m.family(metric::kFsyncDuration);
        m.histogram({}, w->synced_write);
        m.family(metric::kWrittenBytes);
        m.sample(w->bytes.load(std::memory_order_relaxed));
        m.family(metric::kWriteBatches);
        m.sample(w->batches.load(std::memory_order_relaxed));
    }
    m.family(metric::kStorageSize);
    m.sample(U(directory_bytes(node_.config_.data_dir)));
    queue_metrics(m);
    m.family(metric::kSessions);
    m.sample(U(node_.writes_->sessions().size()));
    m.family(metric::kConnections);
    m.sample(U(node_.server_ ? node_.server_->connections() : 0));
    m.family(metric::kSnapshotSends);
    m.sample(node_.raft_io_->snapshots_sent());
    m.family(metric::kSnapshotInstalls);
    m.sample(node_.shell_->snapshots_installed());
    peer_metrics(m);
    m.family(metric::kMode);
    const std::string mode = to_string(node_.autonomy_->mode());
    for (std::string_view each : wire::kNodeModes)
        m.sample({{"mode", std::string(each)}}, U(mode == each ? 1 : 0));
    m.family(metric::kOverlayRecords);
    m.sample(U(node_.autonomy_->overlay_size()));
    m.family(metric::kHealthy);
    m.sample(U(unhealthy_reason().empty() ? 1 : 0));
    process_metrics(m);
    return m.text();
}

void NodeAdmin::request_metrics(admin::PromText& m) const {
    const auto& rq = node_.metrics_.requests;
    // Every op and code from the start, zeros included, so that rate() and alerts see a
    // series before its first event. `unknown` is the client's own code, never answered.
    m.family(metric::kRequests);
    for (std::size_t op = 0; op < RequestMeter::kOps; ++op)
        for (std::size_t code = 0; code < RequestMeter::kCodes; ++code)
            if (wire::Code(code) != wire::Code::unknown)
                m.sample({{"op", RequestMeter::op_name(op)},
                          {"code", std::string(wire::code_name(wire::Code(code)))}},
                         rq.count(op, code));
    m.family(metric::kRequestDuration);
    for (std::size_t op = 0; op < RequestMeter::kOps; ++op)
        m.histogram({{"op", RequestMeter::op_name(op)}}, rq.latency(op));
    m.family(metric::kTakeWait);
    m.histogram({}, node_.metrics_.take_wait);
    m.family(metric::kRefreshMargin);
    m.histogram({}, node_.metrics_.refresh_margin);
}

void NodeAdmin::process_metrics(admin::PromText& m) const {
    const admin::ProcessFigures p = admin::read_process_figures();
    m.family(metric::kProcessResident);
    m.sample(p.resident_bytes);
    m.family(metric::kProcessVirtual);
    m.sample(p.virtual_bytes);
    m.family(metric::kProcessCpu);
    m.sample(p.cpu_seconds);
    m.family(metric::kProcessOpenFds);
    m.sample(p.open_fds);
    m.family(metric::kProcessMaxFds);
    m.sample(p.max_fds);
    m.family(metric::kProcessStart);
    m.sample(p.start_time_seconds);
}

void NodeAdmin::raft_metrics(admin::PromText& m) const {
    const raft::Raft& raft = node_.shell_->raft();
    m.family(metric::kRaftTerm);
    m.sample(U(raft.term()));
    m.family(metric::kRaftIsLeader);
    m.sample(U(node_.is_leader() ? 1 : 0));
    m.family(metric::kRaftHasLeader);
    m.sample(U(raft.leader() != raft::kNoNode ? 1 : 0));
    m.family(metric::kRaftCommitIndex);
    m.sample(U(raft.log().committed()));
    m.family(metric::kRaftAppliedIndex);
    m.sample(U(node_.applied_index()));
    m.family(metric::kRaftLastIndex);
    m.sample(U(raft.log().last_index()));
    m.family(metric::kRaftLeaderChanges);
    m.sample(node_.metrics_.leader_changes);
    m.family(metric::kRaftElections);
    m.sample(node_.metrics_.elections_started);
    m.family(metric::kRaftProposalsPending);
    m.sample(U(node_.shell_->pending_proposals()));
    m.family(metric::kPeerInputDropped);
    m.sample(node_.raft_io_->dropped());
}

void NodeAdmin::queue_metrics(admin::PromText& m) const {
    const queue::Store& store = node_.shell_->store();
    const std::int64_t now = node_.store_now();
    const auto names = store.queue_names();
    std::vector<std::pair<std::string, queue::QueueStats>> stats;
    std::vector<queue::QueueCounters> counters;
    for (const auto& n : names) {
        stats.emplace_back(n, store.stats(n, now, queue::Store::kMetricsCountCap));
        counters.push_back(store.counters(n));
    }
    m.family(metric::kTasks);
    m.sample(U(store.task_count()));
    m.family(metric::kStoreBytes);
    m.sample(U(store.memory_bytes()));
    m.family(metric::kStoreLimit);
    m.sample(U(node_.budget_.limit()));
    m.family(metric::kStoreRegion);
    m.sample(U(store.region_bytes()));
    m.family(metric::kStoreRegionLimit);
    m.sample(U(store.region_limit_bytes()));
    m.family(metric::kQueueTasks);
    for (const auto& [n, s] : stats)
        for (const auto& [status, count] : {std::pair{queue::Status::ready, s.ready},
                                            {queue::Status::taken, s.taken},
                                            {queue::Status::buried, s.buried},
                                            {queue::Status::done, s.done}})
            m.sample({{"queue", n}, {"status", queue::to_string(status)}}, count);
    m.family(metric::kQueueDue);
    for (const auto& [n, s] : stats)
        m.sample({{"queue", n}}, s.due_now);
    m.family(metric::kQueueLate);
    for (const auto& [n, s] : stats)
        m.sample({{"queue", n}}, s.late_now);
    m.family(metric::kQueueCountCapped);
    for (const auto& [n, s] : stats) {
        m.sample({{"queue", n}, {"figure", "due"}}, U(s.due_now_capped ? 1 : 0));
        m.sample({{"queue", n}, {"figure", std::string(wire::word::late)}},
                 U(s.late_now_capped ? 1 : 0));
    }
    m.family(metric::kQueueOldestLate);
    for (const auto& [n, s] : stats)
        m.sample({{"queue", n}}, s.oldest_late ? double(now - *s.oldest_late) / 1000.0 : 0.0);
    auto counter = [&](const admin::Family& family, U queue::QueueCounters::*field) {
        m.family(family);
        for (std::size_t i = 0; i < names.size(); ++i)
            m.sample({{"queue", names[i]}}, counters[i].*field);
    };
    counter(metric::kQueuePuts, &queue::QueueCounters::puts);
    counter(metric::kQueueTakes, &queue::QueueCounters::takes);
    counter(metric::kQueueLateTakes, &queue::QueueCounters::late_takes);
    counter(metric::kQueueAcks, &queue::QueueCounters::acks);
    counter(metric::kQueueLeaseExpiries, &queue::QueueCounters::lease_expiries);
    counter(metric::kQueueBuries, &queue::QueueCounters::buries);
}

void NodeAdmin::peer_metrics(admin::PromText& m) const {
    m.family(metric::kBuildInfo);
    m.sample(admin::Labels{{"version", std::string(dueq::version())},
                           {"revision", std::string(dueq::revision())}},
             std::uint64_t{1});
    const raft::Raft& r = node_.shell_->raft();
    m.family(metric::kMembers);
    m.sample(admin::Labels{{"role", "voter"}}, U(r.membership().voters.size()));
    m.sample(admin::Labels{{"role", "learner"}}, U(r.membership().learners.size()));
    m.family(metric::kMembershipIndex);
    m.sample(U(r.membership_index()));
    m.family(metric::kMembershipPending);
    m.sample(U(r.log().committed() < r.membership_index() ? 1 : 0));
    if (const std::int64_t not_after = node_.tls_not_after_ms(); not_after > 0) {
        m.family(metric::kTlsCertNotAfter);
        m.sample(U(not_after / 1000));
    }
    if (!node_.raft_io_->has_mesh()) return;
    const auto& io = *node_.raft_io_;
    // Learners included: their lag is their catch-up.
    auto others = [&](auto&& each) {
        for (const auto& member : node_.members_.members)
            if (member.raft_id != node_.raft_id_)
                each(member.raft_id, admin::Labels{{"peer", member.name}});
    };
    m.family(metric::kPeerUp);
    others([&](std::size_t id, const admin::Labels& peer) {
        m.sample(peer, U(io.connected(id) ? 1 : 0));
    });
    m.family(metric::kPeerRtt);
    others([&](std::size_t id, const admin::Labels& peer) {
        if (const auto* seen = io.peer_seen(id)) m.histogram(peer, seen->rtt);
    });
    if (!node_.is_leader()) return;
    const raft::Raft& raft = node_.shell_->raft();
    m.family(metric::kPeerLag);
    const raft::Index last = raft.log().last_index();
    others([&](std::size_t id, const admin::Labels& peer) {
        if (const auto* pr = raft.progress(id))
            m.sample(peer, U(last > pr->match ? last - pr->match : 0));
    });
}

}  // namespace dueq::node
