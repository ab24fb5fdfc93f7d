// The Raft shell of a node: ticks, proposals, the Ready cycle, the peer links, applying
// committed entries, checkpoints and snapshot installs (see node.h for the order).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "net/frame.h"
#include "node/node.h"
#include "queue/command_codec.h"
#include "raft/message_check.h"
#include "raft/message_codec.h"

namespace dueq::node {

namespace asio = boost::asio;
using queue::Code;

namespace {
constexpr char kRaftKind = 'R';

}  // namespace

std::optional<std::string> Node::start_raft(const storage::Loaded& loaded) {
    raft_id_ = config_.members.empty() ? 1 : raft_id_of(config_, config_.node_id);
    // The durable log, mirrored in memory: base, entries, then the applied state as the
    // snapshot the core starts from (it hands out committed entries after it).
    log_.apply_snapshot(raft::Snapshot{loaded.base, {}});
    if (!loaded.entries.empty()) {
        if (auto st = log_.append(loaded.entries); !st.is_ok())
            return "refusing to serve: the stored log does not line up with its base";
    }
    if (loaded.applied_index > loaded.base.index) {
        if (auto st = log_.create_snapshot(loaded.applied_index, {}); !st.is_ok())
            return "refusing to serve: applied index " + std::to_string(loaded.applied_index) +
                   " is not in the stored log";
    }
    log_.set_hard_state(loaded.hard_state);
    applied_ = log_.snapshot().meta;
    replay_until_ = loaded.base.index + loaded.entries.size();
    if (replay_until_ <= applied_.index) replay_until_ = 0;
    applied_.time = std::max<raft::Millis>(applied_.time, raft::Millis(loaded.applied_time));
    checkpoint_ = db_->checkpoint(log_.snapshot().meta);

    raft::Config rc;
    rc.id = raft_id_;
    for (std::size_t i = 0; i < std::max<std::size_t>(1, config_.members.size()); ++i)
        rc.voters.push_back(i + 1);
    rc.election_tick = int(config_.raft.election_timeout_ms / config_.raft.tick_ms);
    rc.heartbeat_tick = int(std::max(1u, config_.raft.heartbeat_ms / config_.raft.tick_ms));
    rc.snapshot_threshold = config_.raft.snapshot_entries;
    rc.seed = std::uint64_t(now_ms()) ^ (raft_id_ << 32);
    rc.planted_bug = raft_bug_;
    raft_ = std::make_unique<raft::Raft>(rc, log_);
    transfer_.set_max_stream_bytes(config_.raft.max_snapshot_mib << 20);

    if (config_.members.size() > 1) {
        if (config_.cluster_secret.empty())
            return "[cluster] secret_file is required in a cluster of more than one member: "
                   "the members prove to each other that they hold it";
        net::MeshOptions mo;
        mo.cluster_id = config_.cluster_id;
        mo.secret = config_.cluster_secret;
        mo.fingerprint = membership_fingerprint(config_);
        mo.self_id = raft_id_;
        mo.listen =
            config_.peer_listen.empty() ? config_.members[raft_id_ - 1].peer : config_.peer_listen;
        for (std::size_t i = 0; i < config_.members.size(); ++i)
            if (i + 1 != raft_id_) {
                const auto& m = config_.members[i];
                auto dial = config_.dial.find(m.id);
                mo.peers.push_back({i + 1, dial == config_.dial.end() ? m.peer : dial->second});
            }
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
        spdlog::info("node {} (raft id {}) in cluster '{}' of {} members; peers on {}",
                     config_.node_id, raft_id_, config_.cluster_id, config_.members.size(),
                     mo.listen);
    } else {
        raft_->campaign_now();  // alone: no one to wait for
    }
    on_tick();
    schedule_ready();
    return std::nullopt;
}

bool Node::is_leader() const {
    return raft_ && raft_->role() == raft::Role::leader;
}

std::string Node::leader_client_address() const {
    const raft::NodeId leader = raft_ ? raft_->leader() : raft::kNoNode;
    if (leader == raft::kNoNode) return {};
    if (config_.members.empty()) return config_.client_advertise;
    return config_.members[leader - 1].client;
}

void Node::propose(queue::Command cmd, Reply reply) {
    // Links to a majority are down: nothing proposed now could commit. Checked first, so
    // that a leader cut off from its followers, or a node that knows no leader because
    // it is alone, says so at once instead of redirecting or waiting for the deadline.
    if (!reaches_quorum()) {
        answer_error(reply, Code::no_quorum,
                     "this node cannot reach a majority of the cluster; not applied");
        return;
    }
    if (!is_leader()) {
        answer_error(reply, Code::not_leader,
                     leader_client_address().empty() ? "no leader is known yet; retry shortly"
                                                     : "this node is a follower");
        return;
    }
    auto index = raft_->propose(queue::encode_command(cmd), raft::Millis(now_ms()));
    if (!index) {
        answer_error(reply,
                     index.error() == raft::Error::not_leader ? Code::not_leader : Code::unavailable,
                     std::string("cannot propose: ") + std::string(raft::to_string(index.error())));
        return;
    }
    if (std::holds_alternative<queue::Advance>(cmd)) advance_index_ = index.value();
#ifdef DUEQ_PLANTED_BUGS
    if (bug_ == NodeBug::reply_before_commit && reply.op != net::Op::take &&
        reply.op != net::Op::ping) {
        answer(reply, queue::Result{});
        reply = Reply{};
    }
#endif
    last_proposed_ = index.value();
    proposals_[index.value()] =
        Proposal{raft_->term(), std::move(reply), now_ms() + config_.raft.proposal_timeout_ms};
    schedule_ready();
}

bool Node::reaches_quorum() const {
    if (!mesh_) return true;
    std::size_t reached = 1;
    for (std::size_t i = 0; i < config_.members.size(); ++i)
        if (i + 1 != raft_id_ && mesh_->connected(i + 1)) ++reached;
    return 2 * reached > config_.members.size();
}

// Proposals are made in index order with a clock that does not go back, so their
// deadlines grow with the index: the sweep stops at the first one still in time.
void Node::expire_proposals(std::int64_t now) {
    while (!proposals_.empty() && proposals_.begin()->second.deadline <= now) {
        answer_error(proposals_.begin()->second.reply, Code::timeout,
                     "not committed within " + std::to_string(config_.raft.proposal_timeout_ms) +
                         " ms; it may or may not be applied later");
        proposals_.erase(proposals_.begin());
    }
}

void Node::on_tick() {
    if (stopped_) return;
    const auto now = now_ms();
    raft_->tick(raft::Millis(now));
    expire_proposals(now);
    if (mesh_)
        transfer_.pump([this](std::uint64_t to, std::string p) { return mesh_->send(to, std::move(p)); },
                       [this](std::uint64_t peer) { return mesh_->queued_bytes(peer); });
    schedule_ready();
    tick_timer_.expires_after(std::chrono::milliseconds(config_.raft.tick_ms));
    tick_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) on_tick();
    });
}

void Node::schedule_ready() {
    if (ready_scheduled_ || stopped_) return;
    ready_scheduled_ = true;
    // After the frames already read are handled, so that they share one Ready.
    asio::post(io_, [this] {
        ready_scheduled_ = false;
        process_ready();
    });
}

void Node::process_ready() {
    if (stopped_ || inflight_ || !raft_->has_ready()) return;
    inflight_ = raft_->ready();
    raft::Ready& rd = *inflight_;
    storage::LogWrite w;
    w.entries = rd.entries;
    w.hard_state = rd.hard_state;
    w.sync = rd.must_sync;
    for (const auto& m : rd.messages_before_persist)
        send_message(m);
    if (rd.snapshot) {
        install_snapshot(*rd.snapshot);  // carries the hard state
        w.hard_state.reset();
        if (!w.entries.empty()) inflight_ticket_ = writer_->submit(std::move(w));
        return;
    }
    if (rd.entries.empty() && !w.sync) {
        // Nothing here needs to be durable before it takes effect (at most the commit
        // index moved): write it behind, and go on without waiting for the disk.
        if (rd.hard_state) writer_->submit(std::move(w));
        inflight_ticket_ = 0;
        return finish_ready();
    }
    inflight_ticket_ = writer_->submit(std::move(w));
}

void Node::on_persisted(std::uint64_t ticket) {
    if (stopped_ || !inflight_ || inflight_ticket_ == 0 || ticket < inflight_ticket_) return;
    finish_ready();
}

void Node::finish_ready() {
    raft::Ready rd = std::move(*inflight_);
    inflight_.reset();
    inflight_ticket_ = 0;
    // What was just made durable becomes visible to the core (storage.h).
    if (!rd.entries.empty() && !log_.append(rd.entries).is_ok())
        return fail_stop("the log mirror refused entries from index " +
                         std::to_string(rd.entries.front().index));
    if (rd.hard_state) log_.set_hard_state(*rd.hard_state);
    for (const auto& m : rd.messages)
        send_message(m);
    bool wrote = false;
    for (const auto& e : rd.committed_entries) {
        apply_entry(e);
        wrote = wrote || e.type == raft::EntryType::normal;
    }
    if (!rd.committed_entries.empty()) persist_applied();
    if (replay_until_ != 0 && applied_.index >= replay_until_) {
        spdlog::info("replayed the log tail after restart: applied index {}", applied_.index);
        replay_until_ = 0;
    }
    if (rd.snapshot_wanted) take_checkpoint();
    raft_->advance(rd);
    if (wrote || rd.role != raft::Role::leader) {
        for (const auto& queue : waiters_.queues()) wake_waiters(queue);
    }
    arm_timer();
    process_ready();
}

void Node::send_message(const raft::Message& m) {
    if (!mesh_) return;
    if (m.type == raft::MessageType::snapshot) {
        if (checkpoint_ && m.snapshot && m.snapshot->meta == checkpoint_->meta())
            transfer_.start_send(m, checkpoint_);
        return;
    }
    std::string payload(1, kRaftKind);
    payload += raft::encode_message(m);
    mesh_->send(m.to, std::move(payload));
}

void Node::on_peer_frame(std::uint64_t from, std::string_view payload) {
    if (stopped_ || payload.empty()) return;
    if (payload[0] == SnapshotTransfer::kKind) {
        std::string problem;
        if (auto m = transfer_.receive(from, raft_id_, payload, problem)) {
            // Every record is checked before the core hears of the snapshot: once it has
            // accepted one, there is no going back to the old state.
            received_store_ = store_from(*transfer_.received());
            if (!received_store_) {
                transfer_.discard_received();
                return drop_peer_input(from, "snapshot stream with a corrupt record");
            }
            raft_->step(*m);
            schedule_ready();
        } else if (!problem.empty()) {
            drop_peer_input(from, "snapshot stream: " + problem);
        }
        return;
    }
    if (payload[0] != kRaftKind) return drop_peer_input(from, "unknown peer frame kind");
    auto m = raft::decode_message(payload.substr(1));
    if (!m) return drop_peer_input(from, "undecodable raft message");
    if (auto problem = raft::message_problem(m.value(), from, raft_id_); !problem.empty())
        return drop_peer_input(from, problem);
    const raft::NodeId old_leader = raft_->leader();
    const raft::Role old_role = raft_->role();
    raft_->step(m.value());
    if (raft_->leader() != old_leader || raft_->role() != old_role)
        spdlog::info("term {}: {} (leader {})", raft_->term(), raft::to_string(raft_->role()),
                     raft_->leader());
    schedule_ready();
}

void Node::drop_peer_input(std::uint64_t from, const std::string& problem) {
    ++peer_input_dropped_;
    std::uint64_t suppressed = 0;
    if (peer_input_log_.allow(std::to_string(from), suppressed))
        spdlog::warn("peer {}: dropped {}{}", from, problem,
                     net::LogLimiter::suppressed_note(suppressed));
}

void Node::on_peer_change(std::uint64_t peer, bool connected) {
    if (stopped_) return;
    if (connected || peer != raft_->leader() || raft_->role() != raft::Role::follower) {
        if (!connected) transfer_.cancel(peer);
        return;
    }
    transfer_.cancel(peer);
    // The leader's link broke, as it does at once when its process dies. Forget it (so
    // our vote is free) and campaign soon instead of after the election timeout;
    // PreVote keeps this harmless if the leader is in fact alive and heard by others.
    // The survivors start one after another by id, so that they do not split the vote.
    raft_->forget_leader();
    std::uint64_t rank = 0;
    for (std::uint64_t id = 1; id < raft_id_; ++id)
        if (id != peer) ++rank;
    campaign_timer_.expires_after(std::chrono::milliseconds(rank * config_.raft.heartbeat_ms));
    campaign_timer_.async_wait([this](boost::system::error_code ec) {
        if (ec || stopped_) return;
        if (raft_->role() == raft::Role::follower && raft_->leader() == raft::kNoNode) {
            spdlog::info("leader link lost: campaigning now (term {})", raft_->term());
            raft_->campaign_now();
            schedule_ready();
        }
    });
}

void Node::apply_entry(const raft::Entry& e) {
    applied_ = {e.index, e.term, std::max<raft::Millis>(applied_.time, e.time)};
    const auto now = queue::Millis(applied_.time);
    auto it = proposals_.find(e.index);
    std::optional<Proposal> mine;
    if (it != proposals_.end()) {
        mine = std::move(it->second);
        proposals_.erase(it);
    }
    // Proposals below this index that never reached it were overwritten by a new leader.
    while (!proposals_.empty() && proposals_.begin()->first < e.index) {
        answer_error(proposals_.begin()->second.reply, Code::not_leader,
                     "leadership changed before this was committed; it was not applied");
        proposals_.erase(proposals_.begin());
    }
    if (e.type != raft::EntryType::normal) {
        store_->advance(now);
        // Our own term's first entry: everything before it is applied, so the replicated
        // settings are known.
        if (e.term == raft_->term() && is_leader()) propose_configured_settings();
        return;
    }
    auto cmd = queue::decode_command(e.data);
    if (!cmd) return fail_stop("log entry " + std::to_string(e.index) + " does not decode");
    queue::Result result = store_->apply(*cmd, now);
    if (e.index == advance_index_) advance_index_ = 0;
    if (!mine) return;
    if (mine->term != e.term) {
        answer_error(mine->reply, Code::not_leader,
                     "leadership changed before this was committed; it was not applied");
        return;
    }
    on_applied(*cmd, result, mine->reply);
}

void Node::persist_applied(const raft::SnapshotMeta& trim) {
    storage::AppliedState state;
    state.applied_index = applied_.index;
    state.applied_time = std::int64_t(applied_.time);
    state.trim = trim;
    store_->drain_changes(
        [&](std::string_view q, std::string_view k, const std::optional<std::string>& encoded) {
            state.changes.push_back(storage::TaskChange{std::string(q), std::string(k), encoded});
        });
    if (state.changes.empty() && applied_.index == persisted_index_ && trim.index == 0) return;
    persisted_index_ = applied_.index;
    state.store_meta = store_->encode_meta();
    writer_->submit(std::move(state));
}

void Node::request_checkpoint(const raft::SnapshotMeta& meta,
                              std::function<void(std::shared_ptr<const storage::Checkpoint>)> done) {
    checkpoint_pending_ = true;
    writer_->submit(storage::CheckpointRequest{
        meta, [this, done = std::move(done)](std::shared_ptr<const storage::Checkpoint> cp) {
            asio::post(io_, [this, done, cp = std::move(cp)]() mutable {
                checkpoint_pending_ = false;
                if (!stopped_) done(std::move(cp));
            });
        }});
}

void Node::take_checkpoint() {
    if (checkpoint_pending_) return;
    request_checkpoint(applied_, [this](std::shared_ptr<const storage::Checkpoint> cp) {
        const raft::SnapshotMeta m = cp->meta();
        if (m.index <= log_.snapshot().meta.index || !log_.create_snapshot(m.index, {}).is_ok())
            return;
        checkpoint_ = std::move(cp);
        // Keep log_keep entries behind the snapshot for followers slightly behind.
        if (m.index > config_.log_keep + log_.first_index()) {
            const raft::Index trim = m.index - config_.log_keep;
            auto entries = log_.entries(trim, trim + 1, 0);
            if (entries && !entries.value().empty()) {
                const raft::Entry& e = entries.value().front();
                log_.compact(trim);
                persist_applied({trim, e.term, e.time});
            }
        }
        spdlog::debug("snapshot at index {}; log from {}", m.index, log_.first_index());
    });
}

std::unique_ptr<queue::Store> Node::store_from(const storage::SnapshotInstall& records) {
    auto fresh = make_store();
    if (!storage::load_store_meta(*fresh, records.store_meta_sealed)) return nullptr;
    for (const auto& [k, v] : records.tasks)
        if (!storage::load_task_record(*fresh, k, v)) return nullptr;
    return fresh;
}

void Node::install_snapshot(const raft::Snapshot& snap) {
    auto records = transfer_.take_received(snap.meta);
    if (!records || !received_store_)
        return fail_stop("the core accepted a snapshot this node never received");
    auto fresh = std::move(received_store_);
    fresh->drain_changes([](auto, auto, const auto&) {});
    records->hard_state = inflight_->hard_state.value_or(log_.hard_state());
    const std::size_t tasks = records->tasks.size();
    inflight_ticket_ = writer_->submit(std::move(*records));
    // The store is replaced now; the core sees the snapshot once it is durable.
    store_ = std::move(fresh);
    log_.apply_snapshot(raft::Snapshot{snap.meta, {}});
    if (inflight_->hard_state) log_.set_hard_state(*inflight_->hard_state);
    applied_ = snap.meta;
    persisted_index_ = snap.meta.index;
    inflight_->hard_state.reset();
    request_checkpoint(snap.meta, [this](std::shared_ptr<const storage::Checkpoint> cp) {
        if (cp->meta() == log_.snapshot().meta) checkpoint_ = std::move(cp);
    });
    // A snapshot replaced the log: whether these entries are in it cannot be told here.
    for (auto& [index, p] : proposals_)
        answer_error(p.reply, Code::timeout,
                     "a snapshot replaced the log before this was seen to commit; it may or "
                     "may not be applied");
    proposals_.clear();
    spdlog::info("installed snapshot at index {} (term {}): {} tasks", snap.meta.index,
                 snap.meta.term, tasks);
}

void Node::fail_stop(const std::string& message) {
    spdlog::critical("stopping: {}", message);
    spdlog::shutdown();
    std::_Exit(70);
}

}  // namespace dueq::node
