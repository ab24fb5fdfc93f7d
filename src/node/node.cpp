#include "node/node.h"

#include <limits>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

#include "net/frame.h"
#include "net/peer_handshake.h"
#include "node/replies.h"
#include "queue/command_codec.h"

namespace dueq::node {

namespace asio = boost::asio;
using net::Op;
using queue::Code;

Node::Node(asio::io_context& io, Config config)
    : io_(io),
      config_(std::move(config)),
      tick_timer_(io),
      waiters_(config_.limits.max_waiting_takes),
      timer_(io) {}

Node::~Node() {
    stop();
}

std::int64_t Node::now_ms() const {
    return clock_.now_ms();
}

std::int64_t Node::store_now() const {
    return std::max(std::int64_t(shell_->applied().time), now_ms());
}

std::optional<std::string> Node::start() {
    storage::Status st;
    db_ = storage::Database::open(config_.data_dir, config_.fsync, st, storage_env_);
    if (!db_) return st.message;
    // Not this node's [limits] or [queues]: every replica applies with the same bounds,
    // and queue settings arrive through the log (propose_configured_settings).
    auto store = std::make_unique<queue::Store>(queue::kApplyLimits);
    storage::Loaded loaded;
    st = db_->load(*store, loaded);
    if (!st.ok) return "refusing to serve from " + config_.data_dir + ": " + st.message;
    spdlog::info("loaded {} tasks at applied index {}; {} log entries after index {}",
                 store->task_count(), loaded.applied_index, loaded.entries.size(),
                 loaded.base.index);
    if (auto err = start_shell(loaded, std::move(store))) return err;
    // Serve clients only once what is known to be committed is applied, so that a restart
    // never answers from an older state than the one it acknowledged. Alone, everything
    // durable is committed (a majority of one); in a cluster, up to the stored commit.
    const raft::Index durable = loaded.base.index + loaded.entries.size();
    const raft::Index target =
        config_.members.size() > 1 ? std::min(loaded.hard_state.commit, durable) : durable;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (applied_index() < target && !stopped_ && std::chrono::steady_clock::now() < give_up)
        io_.run_one_for(std::chrono::milliseconds(100));
    if (applied_index() < target)
        return "could not replay the log up to index " + std::to_string(target) +
               " (applied " + std::to_string(applied_index()) + ")";

    next_session_ = std::uint64_t(now_ms()) << 12;
    try {
        server_ = std::make_unique<net::Server>(
            io_, config_.client_listen, config_.limits,
            [this](const auto& c, std::string_view f) { on_frame(c, f); },
            [this](const auto& c) { on_close(c); });
    } catch (const std::exception& e) {
        return "cannot listen on " + config_.client_listen + ": " + e.what();
    }
    spdlog::info("node {} serving clients on {} (fsync {})", config_.node_id, config_.client_listen,
                 config_.fsync ? "always" : "never");
    arm_timer();
    return std::nullopt;
}

void Node::stop() {
    if (stopped_) return;
    stopped_ = true;
    if (server_) server_->stop();
    if (raft_io_) raft_io_->stop();  // flushes what is queued
    timer_.cancel();
    tick_timer_.cancel();
}

std::uint16_t Node::client_port() const {
    return server_ ? server_->port() : 0;
}

void Node::on_frame(const std::shared_ptr<net::Connection>& conn, std::string_view frame) {
    if (stopped_) return;
    if (conn->session == 0) {
        // Unique across the cluster: the low bits say which node made it.
        conn->session = (++next_session_ << 4) | (raft_id_ & 15);
        sessions_[conn->session].connections = 1;
    }
    auto decoded = net::decode_request(frame, config_.limits);
    if (auto* err = std::get_if<net::RequestError>(&decoded)) {
        conn->send(net::error_frame(err->id, err->code, err->message));
        return;
    }
    auto& req = std::get<net::Request>(decoded);
    if (!conn->authorized && !config_.auth_token.empty() && req.op != Op::ping &&
        req.op != Op::hello) {
        conn->send(net::error_frame(req.id, Code::unauthorized,
                                    "this node requires hello with a token first; closing"));
        return conn->close_after_send();
    }
    handle(conn, std::move(req));
}

void Node::handle(const std::shared_ptr<net::Connection>& conn, net::Request&& req) {
    Reply reply{conn, req.id, req.op, std::nullopt};
    switch (req.op) {
        case Op::ping: {
            net::FrameBuilder f;
            f.begin_ok(req.id, 0);
            conn->send(f.finish());
            return;
        }
        case Op::hello:
            return handle_hello(conn, req);
        case Op::get:
        case Op::stats:
        case Op::status:
            return handle_read(conn, req);
        case Op::declare:
            return submit(queue::Declare{req.queue, req.lead_ms, req.ttr_ms, req.retention_ms,
                                          req.max_attempts ? std::optional<std::uint32_t>(
                                                                 std::uint32_t(*req.max_attempts))
                                                           : std::nullopt,
                                          req.late_share},
                           reply);
        case Op::put:
            return submit(queue::Put{req.queue, std::move(*req.key), std::move(*req.payload),
                                      req.time, req.mode.value_or(queue::PutMode::upsert)},
                           reply);
        case Op::del:
            return submit(queue::Delete{req.queue, std::move(*req.key)}, reply);
        case Op::take: {
            queue::Take take{req.queue, std::uint32_t(req.count.value_or(1)), req.ttr_ms,
                             conn->session, req.release_on_disconnect.value_or(true)};
            const std::int64_t timeout = req.timeout_ms.value_or(0);
            if (timeout > 0) {
                const std::int64_t deadline = now_ms() + timeout;
                reply.wait_until = deadline;
                if (is_leader() && !shell_->store().has_due(req.queue, store_now()))
                    return wait_for_task(reply, std::move(take), deadline);
            }
            return submit(std::move(take), reply);
        }
        case Op::touch:
            return submit(queue::Touch{req.queue, std::move(*req.key), *req.lease, req.ttr_ms},
                           reply);
        case Op::ack:
            return submit(queue::Ack{req.queue, std::move(*req.key), *req.lease,
                                      std::move(req.payload), req.time},
                           reply);
        case Op::release:
            return submit(queue::Release{req.queue, std::move(*req.key), *req.lease,
                                          req.delay_ms.value_or(0)},
                           reply);
        case Op::bury:
            return submit(queue::Bury{req.queue, std::move(*req.key), *req.lease}, reply);
        case Op::kick:
            return submit(queue::Kick{req.queue, std::uint32_t(*req.count)}, reply);
    }
}

void Node::handle_hello(const std::shared_ptr<net::Connection>& conn, const net::Request& req) {
    if (!config_.auth_token.empty()) {
        conn->authorized = req.token && net::same_secret(*req.token, config_.auth_token);
        if (!conn->authorized) {
            conn->send(net::error_frame(req.id, Code::unauthorized,
                                        req.token ? "wrong token; closing"
                                                  : "a token is required; closing"));
            return conn->close_after_send();
        }
    }
    if (req.session && *req.session != conn->session) {
        auto it = sessions_.find(*req.session);
        if (it != sessions_.end()) {
            // Resume: this connection now speaks for the old session, whose tasks stay taken.
            detach_session(conn->session);
            conn->session = *req.session;
            it->second.connections++;
            it->second.grace.reset();
        }
    }
    conn->send(hello_reply(req.id, conn->session, config_.node_id, leader_client_address()));
}

void Node::handle_read(const std::shared_ptr<net::Connection>& conn, const net::Request& req) {
    const std::int64_t now = store_now();
    const queue::Store& store = shell_->store();
    const raft::Raft& raft = shell_->raft();
    if (req.op != Op::status && req.consistency_leader && !is_leader())
        return answer_error(Reply{conn, req.id, req.op, std::nullopt}, Code::not_leader,
                            "consistency \"leader\" reads are served by the leader");
    switch (req.op) {
        case Op::get: {
            auto task = store.get(req.queue, *req.key);
            if (!task) return conn->send(net::error_frame(req.id, Code::not_found, "no such task"));
            return conn->send(get_reply(req.id, *task));
        }
        case Op::stats:
            return conn->send(
                stats_reply(req.id, store, req.queue_given ? &req.queue : nullptr, now));
        default: {
            StatusInfo s;
            s.node_id = config_.node_id;
            s.role = config_.members.size() > 1 || !is_leader()
                         ? std::string(raft::to_string(raft.role()))
                         : "standalone";
            s.term = raft.term();
            s.leader = leader_client_address();
            if (raft.leader() != raft::kNoNode)
                s.leader_id = config_.members.empty() ? config_.node_id
                                                      : config_.members[raft.leader() - 1].id;
            s.commit_index = raft.log().committed();
            s.last_index = raft.log().last_index();
            s.applied_index = applied_index();
            s.tasks = store.task_count();
            s.pending = shell_->pending_proposals();
            s.peer_input_dropped = raft_io_->dropped();
            for (std::size_t i = 0; i < config_.members.size(); ++i) {
                if (i + 1 == raft_id_) continue;
                PeerStatus p{config_.members[i].id, config_.members[i].peer,
                             raft_io_->has_mesh() && raft_io_->connected(i + 1)};
                if (const auto* pr = raft.progress(i + 1)) {
                    p.match = pr->match;
                    p.lag = s.last_index > pr->match ? s.last_index - pr->match : 0;
                }
                s.peers.push_back(std::move(p));
            }
            return conn->send(status_reply(req.id, s));
        }
    }
}

void Node::on_applied(queue::Command& cmd, const queue::Result& result, Reply& reply) {
    if (auto* take = std::get_if<queue::Take>(&cmd)) {
        if (result.ok() && result.tasks.empty() && reply.wait_until &&
            *reply.wait_until > now_ms()) {
            if (auto c = reply.conn.lock(); c && c->open())
                return wait_for_task(std::move(reply), std::move(*take), *reply.wait_until);
            return;
        }
        if (!result.tasks.empty() && take->release_on_disconnect) {
            auto [it, fresh] = sessions_.try_emplace(take->session);
            it->second.took_tasks = true;
            // The taker closed before its take was applied and its session is gone: give
            // the tasks the same grace period as any disconnect.
            if (fresh) start_grace(take->session);
        }
    }
    answer(reply, result);
}

void Node::answer(const Reply& reply, const queue::Result& result) {
    auto conn = reply.conn.lock();
    if (!conn || !conn->open()) return;
    conn->send(result_reply(reply.id, reply.op, result));
}

void Node::answer_error(const Reply& reply, queue::Code code, const std::string& message) {
    auto conn = reply.conn.lock();
    if (!conn || !conn->open()) return;
    const std::string leader = leader_client_address();
    conn->send(net::error_frame(
        reply.id, code, message,
        code == Code::not_leader && !leader.empty() ? std::optional<std::string>(leader)
                                                    : std::nullopt));
}

void Node::wait_for_task(Reply reply, queue::Take take, std::int64_t deadline) {
    if (waiters_.full()) {
        answer_error(reply, Code::unavailable,
                     "too many blocking takes are waiting on this node ([limits] "
                     "max_waiting_takes); not applied, retry later");
        return;
    }
    waiters_.park({std::move(reply), std::move(take), deadline});
    arm_timer();
}

void Node::wake_waiters(const std::string& queue) {
    // A follower holds no waiters: they were the leader's, and learn where it went.
    std::uint64_t tasks = std::numeric_limits<std::uint64_t>::max();
    if (is_leader()) {
        auto& claims = wake_claims_[queue];
        claims.erase(claims.begin(), claims.upper_bound(applied_index()));
        std::uint64_t claimed = 0;
        for (const auto& [index, count] : claims) claimed += count;
        const auto due =
            shell_->store().count_due(queue, store_now(), claimed + config_.limits.max_take_count);
        if (claims.empty()) wake_claims_.erase(queue);
        if (due <= claimed) return;
        tasks = due - claimed;
    }
    for (auto& w : waiters_.pop(queue, tasks)) {
        auto c = w.reply.conn.lock();
        if (!c || !c->open()) continue;
        const auto count = w.take.count;
        const raft::Index index = propose(std::move(w.take), std::move(w.reply));
        if (index != 0 && is_leader()) wake_claims_[queue][index] = count;
    }
}

void Node::on_timer() {
    timer_at_ = 0;
    if (stopped_) return;
    const std::int64_t now = now_ms();
    events_seen_until_ = now;
    // Leases and delays that ran out change the state on every replica at once: the
    // leader logs an Advance, which applies at its log time everywhere. Every take
    // advances the store itself, so this only keeps reads and retention current; once
    // per kAdvanceEveryMs is plenty.
    if (is_leader() && advance_index_ == 0 && now - last_advance_ms_ >= kAdvanceEveryMs) {
        auto at = shell_->store().next_event_any(queue::Millis(shell_->applied().time));
        if (at && std::int64_t(*at) <= now) {
            last_advance_ms_ = now;
            propose(queue::Advance{}, Reply{});
        }
    }
    for (auto& w : waiters_.expire(now)) answer(w.reply, queue::Result{});
    for (const auto& queue : waiters_.queues()) wake_waiters(queue);
    arm_timer();
}

void Node::arm_timer() {
    if (stopped_) return;
    std::optional<std::int64_t> at;
    auto earliest = [&](std::int64_t t) { at = at ? std::min(*at, t) : t; };
    // Only the leader acts on the store's events (followers follow its log). Events the
    // timer already saw are not looked at again until an entry moves the store's time.
    if (is_leader()) {
        const queue::Store& store = shell_->store();
        const auto applied = queue::Millis(shell_->applied().time);
        const auto seen = std::max<queue::Millis>(applied, queue::Millis(events_seen_until_));
        if (auto e = store.next_event_any(seen)) earliest(std::int64_t(*e));
        if (advance_index_ == 0 && seen > applied) {
            auto pending = store.next_event_any(applied);
            if (pending && *pending <= seen) earliest(last_advance_ms_ + kAdvanceEveryMs);
        }
    }
    if (auto d = waiters_.earliest_deadline()) earliest(*d);
    if (!at) return;
    const std::int64_t now = now_ms();
    if (timer_at_ != 0 && timer_at_ <= *at) return;
    timer_at_ = *at;
    // A task due in 300 years would overflow the timer's nanoseconds; waking once an hour
    // to look again costs nothing.
    const std::int64_t delay = std::clamp<std::int64_t>(*at - now, 0, 3'600'000);
    timer_.expires_after(std::chrono::milliseconds(delay));
    timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) on_timer();
    });
}

void Node::on_close(const std::shared_ptr<net::Connection>& conn) {
    if (stopped_ || conn->session == 0) return;
    detach_session(conn->session);
}

void Node::detach_session(std::uint64_t id) {
    auto it = sessions_.find(id);
    if (it == sessions_.end() || --it->second.connections > 0) return;
    if (!it->second.took_tasks) {
        sessions_.erase(it);
        return;
    }
    start_grace(id);
}

void Node::start_grace(std::uint64_t id) {
    // Its tasks stay taken for the grace period, in case the client resumes the session.
    if (config_.session_grace_ms == 0) return end_session(id);
    auto& grace = sessions_[id].grace;
    grace = std::make_unique<asio::steady_timer>(io_);
    grace->expires_after(std::chrono::milliseconds(config_.session_grace_ms));
    grace->async_wait([this, id](boost::system::error_code ec) {
        if (!ec) end_session(id);
    });
}

void Node::end_session(std::uint64_t session) {
    auto it = sessions_.find(session);
    if (it == sessions_.end() || it->second.connections > 0) return;
    sessions_.erase(it);
    propose(queue::ReleaseSession{session}, Reply{});
}

}  // namespace dueq::node
