// Every metric family a node exports on /metrics, once: name, type and help. docs/admin.md
// lists the same names (tests/node/metric_families_test.cpp compares them); Prometheus's
// conventions: a dueq_ prefix, base units (seconds, bytes), _total on counters.
#pragma once

#include <array>

#include "admin/prometheus.h"

namespace dueq::node::metric {

using admin::Family;

// clang-format off
inline constexpr Family kRequests{"dueq_requests_total", "counter",
    "Client requests answered, by op and result code (invalid: the frame did not decode)."};
inline constexpr Family kRequestDuration{"dueq_request_duration_seconds", "histogram",
    "Time from a request's frame to its answer, by op; a blocking take's wait is left out."};
inline constexpr Family kTakeWait{"dueq_take_wait_seconds", "histogram",
    "Each wait of a blocking take parked on the leader until a task came due or its wait ran out."};
inline constexpr Family kRefreshMargin{"dueq_refresh_margin_seconds", "histogram",
    "Acks on the leader: the task's time minus when it was acked (negative: acked late)."};
inline constexpr Family kRaftTerm{"dueq_raft_term", "gauge", "The Raft term this node is in."};
inline constexpr Family kRaftIsLeader{"dueq_raft_is_leader", "gauge", "1 if this node is the leader."};
inline constexpr Family kRaftHasLeader{"dueq_raft_has_leader", "gauge", "1 if this node knows a leader."};
inline constexpr Family kRaftCommitIndex{"dueq_raft_commit_index", "gauge",
    "The highest log index known to be committed."};
inline constexpr Family kRaftAppliedIndex{"dueq_raft_applied_index", "gauge",
    "The highest log index applied to the store."};
inline constexpr Family kRaftLastIndex{"dueq_raft_last_index", "gauge", "The last index in this node's log."};
inline constexpr Family kRaftLeaderChanges{"dueq_raft_leader_changes_total", "counter",
    "Times this node saw its leader change, to none included."};
inline constexpr Family kRaftElections{"dueq_raft_elections_total", "counter",
    "Terms this node began as a candidate."};
inline constexpr Family kRaftProposalsPending{"dueq_raft_proposals_pending", "gauge",
    "Proposals waiting to commit."};
inline constexpr Family kPeerInputDropped{"dueq_peer_input_dropped_total", "counter",
    "Peer frames refused before the Raft core (malformed, forged or out of place)."};
inline constexpr Family kFsyncDuration{"dueq_storage_fsync_duration_seconds", "histogram",
    "Time of each synced RocksDB write batch, the fsync included."};
inline constexpr Family kWrittenBytes{"dueq_storage_written_bytes_total", "counter",
    "Bytes handed to RocksDB in write batches."};
inline constexpr Family kWriteBatches{"dueq_storage_write_batches_total", "counter", "RocksDB write batches."};
inline constexpr Family kStorageSize{"dueq_storage_size_bytes", "gauge",
    "Bytes of the files in the node's data dir (RocksDB's tables and logs)."};
inline constexpr Family kTasks{"dueq_tasks", "gauge", "Tasks in the store, every queue and status."};
inline constexpr Family kStoreBytes{"dueq_store_bytes", "gauge",
    "What the tasks take in memory, as the store budget counts it (docs/config.md)."};
inline constexpr Family kStoreLimit{"dueq_store_limit_bytes", "gauge",
    "The store budget ([limits] max_store_bytes): writes past it get store_full."};
inline constexpr Family kStoreRegion{"dueq_store_region_bytes", "gauge",
    "Bytes in use of the address range the task records live in."};
inline constexpr Family kStoreRegionLimit{"dueq_store_region_limit_bytes", "gauge",
    "The size of that range: a store that fills it cannot add a record."};
inline constexpr Family kQueueTasks{"dueq_queue_tasks", "gauge",
    "Tasks by queue and status (ready includes delayed)."};
inline constexpr Family kQueueDue{"dueq_queue_due_tasks", "gauge",
    "Ready tasks due now (time - lead_ms has passed), counted up to 100000 (dueq_queue_count_capped)."};
inline constexpr Family kQueueLate{"dueq_queue_late_tasks", "gauge",
    "Ready tasks whose time has passed, counted up to 100000 (dueq_queue_count_capped)."};
inline constexpr Family kQueueCountCapped{"dueq_queue_count_capped", "gauge",
    "1 when the due or late count of a queue stopped at its cap of 100000: there are more."};
inline constexpr Family kQueueOldestLate{"dueq_queue_oldest_late_age_seconds", "gauge",
    "How long ago the time of the oldest late ready task passed (0: none late)."};
inline constexpr Family kQueuePuts{"dueq_queue_puts_total", "counter", "Puts applied."};
inline constexpr Family kQueueTakes{"dueq_queue_takes_total", "counter", "Tasks handed out under a lease."};
inline constexpr Family kQueueLateTakes{"dueq_queue_late_takes_total", "counter",
    "Tasks handed out after their time had passed."};
inline constexpr Family kQueueAcks{"dueq_queue_acks_total", "counter",
    "Acks applied (refreshes, when the ack carries a new time)."};
inline constexpr Family kQueueLeaseExpiries{"dueq_queue_lease_expiries_total", "counter",
    "Leases that ran out before an ack."};
inline constexpr Family kQueueBuries{"dueq_queue_buries_total", "counter",
    "Tasks buried, by bury or by running out of attempts."};
inline constexpr Family kSessions{"dueq_sessions", "gauge", "Client sessions, connected or within their grace."};
inline constexpr Family kConnections{"dueq_client_connections", "gauge", "Open client connections."};
inline constexpr Family kSnapshotSends{"dueq_snapshot_sends_total", "counter",
    "Snapshots streamed to a follower to the end."};
inline constexpr Family kSnapshotInstalls{"dueq_snapshot_installs_total", "counter",
    "Snapshots from the leader installed."};
inline constexpr Family kPeerUp{"dueq_peer_up", "gauge", "1 while the link to a peer is up."};
inline constexpr Family kPeerRtt{"dueq_peer_rtt_seconds", "histogram",
    "Heartbeat round trips to a peer, measured by the leader."};
inline constexpr Family kPeerLag{"dueq_peer_lag_entries", "gauge",
    "Log entries the leader has that a peer is not known to have."};
inline constexpr Family kMembers{"dueq_members", "gauge",
    "Members of this node's Raft group in the membership in force, by role: voter or learner."};
inline constexpr Family kMembershipIndex{"dueq_membership_index", "gauge",
    "The log index of the membership in force (0: the config's member list)."};
inline constexpr Family kMembershipPending{"dueq_membership_pending", "gauge",
    "1 while the membership in force is not committed yet (a change in flight)."};
inline constexpr Family kBuildInfo{"dueq_build_info", "gauge",
    "Always 1; its labels say which build runs: version and git revision."};
inline constexpr Family kTlsCertNotAfter{"dueq_tls_cert_not_after_seconds", "gauge",
    "When this node's TLS certificate expires, in seconds since the epoch (absent without TLS)."};
inline constexpr Family kMode{"dueq_mode", "gauge",
    "1 for the mode this node is in: normal, autonomous (cut off, serving alone) or merging."};
inline constexpr Family kOverlayRecords{"dueq_autonomy_overlay_records", "gauge",
    "Writes made in autonomous mode not merged into the majority yet."};
inline constexpr Family kHealthy{"dueq_healthy", "gauge", "1 when /health answers 200."};
// Prometheus's process collector: the same names every client library exports.
inline constexpr Family kProcessResident{"process_resident_memory_bytes", "gauge",
    "Resident memory size in bytes."};
inline constexpr Family kProcessVirtual{"process_virtual_memory_bytes", "gauge",
    "Virtual memory size in bytes."};
inline constexpr Family kProcessCpu{"process_cpu_seconds_total", "counter",
    "Total user and system CPU time spent in seconds."};
inline constexpr Family kProcessOpenFds{"process_open_fds", "gauge", "Number of open file descriptors."};
inline constexpr Family kProcessMaxFds{"process_max_fds", "gauge",
    "Maximum number of open file descriptors."};
inline constexpr Family kProcessStart{"process_start_time_seconds", "gauge",
    "Start time of the process since unix epoch in seconds."};
// clang-format on

inline constexpr std::array<const Family*, 55> kAll{
    &kRequests,
    &kRequestDuration,
    &kTakeWait,
    &kRefreshMargin,
    &kRaftTerm,
    &kRaftIsLeader,
    &kRaftHasLeader,
    &kRaftCommitIndex,
    &kRaftAppliedIndex,
    &kRaftLastIndex,
    &kRaftLeaderChanges,
    &kRaftElections,
    &kRaftProposalsPending,
    &kPeerInputDropped,
    &kFsyncDuration,
    &kWrittenBytes,
    &kWriteBatches,
    &kStorageSize,
    &kTasks,
    &kStoreBytes,
    &kStoreLimit,
    &kStoreRegion,
    &kStoreRegionLimit,
    &kQueueTasks,
    &kQueueDue,
    &kQueueLate,
    &kQueueCountCapped,
    &kQueueOldestLate,
    &kQueuePuts,
    &kQueueTakes,
    &kQueueLateTakes,
    &kQueueAcks,
    &kQueueLeaseExpiries,
    &kQueueBuries,
    &kSessions,
    &kConnections,
    &kSnapshotSends,
    &kSnapshotInstalls,
    &kPeerUp,
    &kPeerRtt,
    &kPeerLag,
    &kMembers,
    &kMembershipIndex,
    &kMembershipPending,
    &kBuildInfo,
    &kTlsCertNotAfter,
    &kMode,
    &kOverlayRecords,
    &kHealthy,
    &kProcessResident,
    &kProcessVirtual,
    &kProcessCpu,
    &kProcessOpenFds,
    &kProcessMaxFds,
    &kProcessStart,
};

}  // namespace dueq::node::metric
