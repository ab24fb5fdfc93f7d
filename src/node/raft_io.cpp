#include "node/raft_io.h"

#include <spdlog/spdlog.h>

#include "queue/command_codec.h"
#include "queue/msgpack_fields.h"
#include "raft/message_codec.h"

namespace dueq::node {

namespace asio = boost::asio;

namespace {
constexpr char kRaftKind = 'R';
constexpr char kMergeKind = 'M';  // then a msgpack array of encoded Merge commands (bin)
constexpr std::uint32_t kMaxMergesPerFrame = 4096;

std::string encode_merges(const std::vector<queue::Merge>& merges) {
    std::string out(1, kMergeKind);
    StringSink sink{out};
    queue::detail::Packer p(sink);
    p.pack_array(std::uint32_t(merges.size()));
    for (const auto& m : merges)
        queue::detail::pack_bytes(p, queue::encode_command(m));
    return out;
}

std::optional<std::vector<queue::Merge>> decode_merges(std::string_view bytes) {
    const msgpack::unpack_limit limit(kMaxMergesPerFrame, 0, 0, std::size_t(1) << 30, 0, 2);
    auto oh = queue::detail::unpack_whole(bytes, limit);
    if (!oh) return std::nullopt;
    std::uint32_t n = 0;
    const msgpack::object* a = queue::detail::array_items(oh->get(), &n);
    if (oh->get().type != msgpack::type::ARRAY) return std::nullopt;
    std::vector<queue::Merge> out;
    for (std::uint32_t i = 0; i < n; ++i) {
        std::string_view encoded;
        if (!queue::detail::read_bytes(a[i], &encoded)) return std::nullopt;
        auto cmd = queue::decode_command(encoded);
        auto* m = cmd ? std::get_if<queue::Merge>(&*cmd) : nullptr;
        if (!m) return std::nullopt;
        out.push_back(std::move(*m));
    }
    return out;
}
}  // namespace

RaftIo::RaftIo(asio::io_context& io, const Config& config, std::uint64_t raft_id,
               storage::Database& db, Clock clock)
    : io_(io), config_(config), raft_id_(raft_id), db_(db), clock_(std::move(clock)) {
    transfer_.set_max_stream_bytes(config_.raft.max_snapshot_mib << 20);
}

namespace {
// Every member but `self`, at the address this node dials it ([node] dial may override).
std::vector<net::PeerAddress> peers_of(const MemberDirectory& members, const Config& config,
                                       std::uint64_t self) {
    std::vector<net::PeerAddress> out;
    for (const auto& m : members.members) {
        // An old member of this node's own name (it was removed and came back under a new
        // id) listens where this node does.
        if (m.raft_id == self || m.name == config.node_id) continue;
        auto dial = config.dial.find(m.name);
        out.push_back({m.raft_id, dial == config.dial.end() ? m.peer : dial->second});
    }
    return out;
}
}  // namespace

void RaftIo::follow_inline_writes(const MemberDirectory& members) {
    // Unsynced writes cost a copy into the OS, which the event loop can spare. A synced one
    // blocks it for an fsync: fine on a node alone (it gained 5-18% throughput and latency
    // here), but a leader among others that waited on a slow disk would stop heartbeating,
    // where with the storage thread its followers commit without it.
    if (writer_) writer_->set_inline_writes(!config_.fsync || members.members.size() <= 1);
}

std::string RaftIo::set_members(const MemberDirectory& members, std::uint64_t leader) {
    follow_inline_writes(members);
    if (!mesh_) return {};
    auto peers = peers_of(members, config_, raft_id_);
    // The leader stays a peer even when the membership this node knows predates it (a
    // joining node that installed an older snapshot): it brings the newer one.
    if (leader != 0 && leader != raft_id_ && !members.by_id(leader)) peers.push_back({leader, ""});
    try {
        // A node that is no member of what it knows yet is joining: the leader dials it.
        mesh_->set_peers(peers, !members.by_id(raft_id_));
    } catch (const std::exception& e) {
        return e.what();
    }
    for (auto it = seen_.begin(); it != seen_.end();)
        it = members.by_id(it->first) ? std::next(it) : seen_.erase(it);
    return {};
}

RaftIo::~RaftIo() {
    stop();
    *alive_ = false;
}

std::optional<std::string> RaftIo::start(shell::RaftShell& shell, const MemberDirectory& members) {
    shell_ = &shell;
    std::weak_ptr<bool> alive = alive_;
    writer_ = std::make_unique<storage::Writer>(
        db_,
        [this, alive](std::uint64_t ticket) {
            asio::post(io_, [this, alive, ticket] {
                if (alive.expired() || stopped_) return;
                if (autonomy_) autonomy_->on_persisted(ticket);
                shell_->on_persisted(ticket);
            });
        },
        [](const std::string& message) {
            spdlog::critical("storage failed, stopping: {}", message);
            spdlog::shutdown();
            std::_Exit(70);
        });
    writer_->set_slow_sync_ms(config_.slow_fsync_ms);
    follow_inline_writes(members);
    if (config_.members.size() <= 1 && config_.join_id == 0) return std::nullopt;
    if (config_.cluster_secret.empty())
        return "[cluster] secret_file is required in a cluster of more than one member: "
               "the members prove to each other that they hold it";
    net::MeshOptions mo;
    mo.cluster_id = config_.cluster_id;
    mo.secret = config_.cluster_secret;
    mo.fingerprint = cluster_fingerprint(config_);
    mo.self_id = raft_id_;
    const Member* self = nullptr;
    for (const auto& m : config_.members)
        if (m.id == config_.node_id) self = &m;
    mo.listen = !config_.peer_listen.empty() ? config_.peer_listen : self ? self->peer : "";
    if (mo.listen.empty())
        return "this node has no peer address: list it in [cluster] members or set [node] "
               "peer_listen";
    mo.peers = peers_of(members, config_, raft_id_);
    mo.accept_strangers = !members.by_id(raft_id_);
    mo.data_id = data_ids_.self;
    mo.known_data_id = data_ids_.known;
    mo.on_peer_data = data_ids_.seen;
    mo.on_replaced = data_ids_.replaced;
    mo.tls_accept = peer_tls_.accept;
    mo.tls_dial = peer_tls_.dial;
    mo.member_name = peer_tls_.member_name;
    if (!mo.tls_accept)
        spdlog::warn("peer links are plaintext ([tls] peers = \"off\"): replicated entries, tokens "
                     "included, cross the network in clear");
    mo.heartbeat = std::chrono::milliseconds(config_.raft.heartbeat_ms);
    mo.dead_after = std::chrono::milliseconds(config_.raft.election_timeout_ms);
    mo.max_frame_bytes = config_.limits.max_frame_bytes * 4 + (8u << 20);
    mesh_ = std::make_unique<net::PeerMesh>(
        io_, mo, [this](std::uint64_t from, std::string_view p) { on_peer_frame(from, p); },
        [this](std::uint64_t peer, bool up) { on_peer_change(peer, up); });
    try {
        mesh_->start();
    } catch (const std::exception& e) {
        return "cannot listen for peers on " + mo.listen + ": " + e.what();
    }
    spdlog::info("node {} (raft id {}) in cluster '{}' with {} peers; peers on {}", config_.node_id,
                 raft_id_, config_.cluster_id, mo.peers.size(), mo.listen);
    return std::nullopt;
}

void RaftIo::stop() {
    if (stopped_) return;
    stopped_ = true;
    if (mesh_) mesh_->stop();
    transfer_.cancel_all();
    writer_.reset();  // flushes what is queued
    checkpoint_.reset();
}

void RaftIo::pump() {
    if (!mesh_ || stopped_) return;
    transfer_.pump(
        [this](std::uint64_t to, std::string p) { return mesh_->send(to, std::move(p)); },
        [this](std::uint64_t peer) { return mesh_->queued_bytes(peer); });
}

std::uint64_t RaftIo::write_log(storage::LogWrite w) {
    return writer_->submit(std::move(w));
}

std::uint64_t RaftIo::write_applied(storage::AppliedState s) {
    return writer_->submit(std::move(s));
}

std::uint64_t RaftIo::write_overlay(storage::OverlayWrite w) {
    return writer_->submit(std::move(w));
}

void RaftIo::set_peer_tls(PeerTls tls) {
    if (!tls.member_name) tls.member_name = std::move(peer_tls_.member_name);
    peer_tls_ = std::move(tls);
    if (mesh_) mesh_->set_tls(peer_tls_.accept, peer_tls_.dial);
}

void RaftIo::send_merges(raft::NodeId leader, const std::vector<queue::Merge>& merges) {
    if (!mesh_ || stopped_ || merges.empty()) return;
    mesh_->send(leader, encode_merges(merges));
}

std::optional<std::uint64_t> RaftIo::install_snapshot(const raft::SnapshotMeta& meta,
                                                      const raft::HardState& hs) {
    auto records = transfer_.take_received(meta);
    if (!records) return std::nullopt;
    records->hard_state = hs;
    return writer_->submit(std::move(*records));
}

void RaftIo::take_checkpoint(const raft::SnapshotMeta& meta, CheckpointDone done) {
    std::weak_ptr<bool> alive = alive_;
    writer_->submit(storage::CheckpointRequest{
        meta, [this, alive, done = std::move(done)](std::shared_ptr<const storage::Checkpoint> cp) {
            asio::post(io_, [this, alive, done, cp = std::move(cp)]() mutable {
                if (!alive.expired() && !stopped_) done(std::move(cp));
            });
        }});
}

void RaftIo::checkpoint(const raft::SnapshotMeta& meta) {
    take_checkpoint(meta, [this](std::shared_ptr<const storage::Checkpoint> cp) {
        if (shell_->on_checkpoint(cp->meta())) checkpoint_ = std::move(cp);
    });
}

void RaftIo::backup_checkpoint(const raft::SnapshotMeta& meta, CheckpointDone done) {
    if (meta.index != 0) return take_checkpoint(meta, std::move(done));
    asio::post(
        io_, [this, alive = std::weak_ptr<bool>(alive_), cp = checkpoint_, done = std::move(done)] {
            if (!alive.expired() && !stopped_) done(cp);
        });
}

void RaftIo::send(const raft::Message& m) {
    if (!mesh_ || stopped_) return;
    if (m.type == raft::MessageType::snapshot) {
        if (checkpoint_ && m.snapshot && m.snapshot->meta == checkpoint_->meta())
            transfer_.start_send(m, checkpoint_);
        return;
    }
    if (m.type == raft::MessageType::heartbeat) {
        // One round trip timed at a time: the first heartbeat out, its answer back.
        auto& seen = seen_[m.to];
        if (seen.heartbeat_sent == std::chrono::steady_clock::time_point{})
            seen.heartbeat_sent = std::chrono::steady_clock::now();
    }
    std::string payload(1, kRaftKind);
    payload += raft::encode_message(m);
    mesh_->send(m.to, std::move(payload));
}

bool RaftIo::connected(raft::NodeId peer) const {
    return !mesh_ || (mesh_->connected(peer));
}

void RaftIo::on_peer_frame(std::uint64_t from, std::string_view payload) {
    if (stopped_ || payload.empty()) return;
    // Frames reach here only over a link that passed the handshake, so `from` is a member.
    seen_[from].last_heard_ms = clock_();
    if (payload[0] == SnapshotTransfer::kKind) {
        std::string problem;
        if (auto m = transfer_.receive(from, raft_id_, payload, problem)) {
            // Every record is checked before the core hears of the snapshot.
            auto store = storage::store_of(*transfer_.received());
            if (!store) {
                transfer_.discard_received();
                return drop(from, "snapshot stream with a corrupt record");
            }
            if (shell_->step_snapshot(*m, std::move(store)))
                transfer_.accept_received();
            else
                transfer_.discard_received();
        } else if (!problem.empty()) {
            drop(from, "snapshot stream: " + problem);
        }
        return;
    }
    if (payload[0] == kMergeKind) {
        auto merges = decode_merges(payload.substr(1));
        if (!merges) return drop(from, "undecodable merge frame");
        if (!autonomy_) return drop(from, "merge frame before the node started");
        if (auto problem = autonomy_->receive_merges(from, std::move(*merges), clock_());
            !problem.empty())
            drop(from, problem);
        return;
    }
    if (payload[0] != kRaftKind) return drop(from, "unknown peer frame kind");
    auto m = raft::decode_message(payload.substr(1));
    if (!m) return drop(from, "undecodable raft message");
    if (m.value().type == raft::MessageType::heartbeat_resp) {
        auto& seen = seen_[from];
        if (seen.heartbeat_sent != std::chrono::steady_clock::time_point{}) {
            seen.rtt_us = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - seen.heartbeat_sent)
                              .count();
            seen.rtt.record_us(std::uint64_t(std::max<std::int64_t>(seen.rtt_us, 0)));
            seen.heartbeat_sent = {};
        }
    }
    if (auto problem = shell_->step(from, m.value()); !problem.empty()) drop(from, problem);
}

void RaftIo::drop(std::uint64_t from, const std::string& problem) {
    ++dropped_;
    std::uint64_t suppressed = 0;
    if (drop_log_.allow(std::to_string(from), suppressed))
        spdlog::warn("peer {}: dropped {}{}", from, problem,
                     net::LogLimiter::suppressed_note(suppressed));
}

void RaftIo::on_peer_change(std::uint64_t peer, bool up) {
    if (stopped_) return;
    if (!up) {
        transfer_.cancel(peer);
        seen_[peer].heartbeat_sent = {};  // its answer will not come over this link
    }
    shell_->on_link_change(peer, up, clock_());
}

}  // namespace dueq::node
