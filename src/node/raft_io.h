// The disk and network dueqd gives its Raft shell (shell/raft_shell.h): RocksDB through
// the storage thread (storage/writer.h), the peer mesh, and snapshot streams between
// peers (snapshot_transfer.h). The simulator plugs in its own (tests/sim/sim_io.h).
//
// Completions (a write is durable, a checkpoint is taken) come back on the event loop,
// posted, never from inside a call of the shell. Peer frames are decoded and checked
// here; what the shell refuses is counted (`dropped()`, in `status`) and logged at a
// limited rate.
//
// Thread-safety: the event-loop thread, except the writer's own thread inside Writer.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/histogram.h"
#include "net/log_limiter.h"
#include "net/peer_mesh.h"
#include "node/autonomy.h"
#include "node/config.h"
#include "node/members.h"
#include "node/snapshot_transfer.h"
#include "shell/raft_shell.h"
#include "storage/database.h"
#include "storage/writer.h"

namespace dueq::node {

class RaftIo final : public shell::Storage, public shell::Transport, public OverlayStorage {
  public:
    using Clock = std::function<std::int64_t()>;
    RaftIo(boost::asio::io_context& io, const Config& config, std::uint64_t raft_id,
           storage::Database& db, Clock clock);
    ~RaftIo() override;

    // Starts the storage thread and, in a cluster, the peer mesh with `members` as peers
    // (a joining node that knows none accepts the member that dials it). Frames and
    // completions go to `shell` from then on. Returns a message on failure.
    std::optional<std::string> start(shell::RaftShell& shell, const MemberDirectory& members);
    // Data ids (net/peer_handshake.h): this node's, what the cluster knows of a peer's,
    // what a peer's hello named, and a peer that knows this node by another. Before start.
    struct DataIds {
        std::uint64_t self = 0;
        std::function<std::uint64_t(std::uint64_t peer)> known;
        std::function<void(std::uint64_t peer, std::uint64_t data_id)> seen;
        std::function<void(std::uint64_t peer, std::uint64_t known)> replaced;
    };
    void set_data_ids(DataIds ids) { data_ids_ = std::move(ids); }
    // Mutual TLS on peer links (net::MeshOptions): the contexts, and a member's name by its
    // Raft id ("" when unknown) for the certificate check. Before start; later calls give
    // new links new contexts (a certificate reload).
    struct PeerTls {
        std::shared_ptr<const net::TlsContext> accept, dial;
        std::function<std::string(std::uint64_t peer)> member_name;
    };
    void set_peer_tls(PeerTls tls);
    // The membership changed: the mesh's peers are now `members` (the membership in force,
    // the committed one, and removed members the leader still tells). Returns why not.
    std::string set_members(const MemberDirectory& members, std::uint64_t leader);
    void stop();
    // Keeps the snapshot streams going (called on every tick).
    void pump();
    // The checkpoint of the log's starting snapshot, taken at start.
    void set_checkpoint(std::shared_ptr<const storage::Checkpoint> cp) {
        checkpoint_ = std::move(cp);
    }

    // A checkpoint for a backup: the applied state at `meta` (which the shell has just
    // handed to storage), or, for `meta` of index 0, the log's starting snapshot's. `done`
    // runs on the event loop (not after stop()); null when there is none.
    using CheckpointDone = std::function<void(std::shared_ptr<const storage::Checkpoint>)>;
    void backup_checkpoint(const raft::SnapshotMeta& meta, CheckpointDone done);

    // Autonomous mode: where overlay write completions and Merge frames from peers go.
    void set_autonomy(Autonomy* autonomy) { autonomy_ = autonomy; }
    // Sends Merge commands to the leader (a peer frame of kind 'M').
    void send_merges(raft::NodeId leader, const std::vector<queue::Merge>& merges);

    std::uint64_t dropped() const { return dropped_; }
    // What the admin endpoints show (admin.cpp).
    struct PeerSeen {
        std::int64_t last_heard_ms = -1;  // node clock; -1: never
        std::int64_t rtt_us = -1;         // the latest heartbeat round trip (leader); -1: none
        Histogram rtt;                    // every heartbeat round trip (leader)
        std::chrono::steady_clock::time_point heartbeat_sent{};  // {}: none outstanding
    };
    const PeerSeen* peer_seen(std::uint64_t peer) const {
        auto it = seen_.find(peer);
        return it == seen_.end() ? nullptr : &it->second;
    }
    std::uint64_t snapshots_sent() const { return transfer_.sent(); }
    const storage::WriteMetrics* write_metrics() const {
        return writer_ ? &writer_->metrics() : nullptr;
    }
    bool has_mesh() const { return mesh_ != nullptr; }

    // shell::Storage
    std::uint64_t write_log(storage::LogWrite w) override;
    std::uint64_t write_applied(storage::AppliedState s) override;
    std::optional<std::uint64_t> install_snapshot(const raft::SnapshotMeta& meta,
                                                  const raft::HardState& hs) override;
    void checkpoint(const raft::SnapshotMeta& meta) override;
    // shell::Transport
    void send(const raft::Message& m) override;
    bool connected(raft::NodeId peer) const override;
    // OverlayStorage
    std::uint64_t write_overlay(storage::OverlayWrite w) override;

  private:
    // Whether the storage thread's idle writes are carried out on the event loop
    // (storage/writer.h), for this membership and fsync policy.
    void follow_inline_writes(const MemberDirectory& members);
    void on_peer_frame(std::uint64_t from, std::string_view payload);
    void on_peer_change(std::uint64_t peer, bool connected);
    // Counts and logs (rate-limited) peer input refused before the core saw it.
    void drop(std::uint64_t from, const std::string& problem);
    // Asks the storage thread for a checkpoint at `meta`; `done` gets it on the event loop
    // (never after stop()).
    void take_checkpoint(const raft::SnapshotMeta& meta, CheckpointDone done);

    boost::asio::io_context& io_;
    const Config& config_;
    std::uint64_t raft_id_;
    storage::Database& db_;
    Clock clock_;
    shell::RaftShell* shell_ = nullptr;
    Autonomy* autonomy_ = nullptr;
    std::unique_ptr<storage::Writer> writer_;
    std::unique_ptr<net::PeerMesh> mesh_;
    SnapshotTransfer transfer_;
    std::shared_ptr<const storage::Checkpoint> checkpoint_;
    std::uint64_t dropped_ = 0;
    DataIds data_ids_;
    PeerTls peer_tls_;
    // By Raft id: the members', and those of strangers that proved the secret (a joining
    // node), so as many as the directory's ids.
    std::unordered_map<std::uint64_t, PeerSeen> seen_;
    net::LogLimiter drop_log_{std::chrono::seconds(10)};
    bool stopped_ = false;
    // Alive as long as this object: posted completions check it before touching `this`.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dueq::node
