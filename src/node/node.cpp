#include "node/node.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

#include "net/frame.h"
#include "node/replies.h"
#include "queue/command_codec.h"

namespace dueq::node {

namespace asio = boost::asio;
using net::Op;
using queue::Code;

namespace {
queue::StoreLimits store_limits(const net::Limits& l) {
    queue::StoreLimits s;
    s.max_key_bytes = l.max_key_bytes;
    s.max_payload_bytes = l.max_payload_bytes;
    s.max_take_count = l.max_take_count;
    s.max_queue_name_bytes = l.max_queue_name_bytes;
    return s;
}
}  // namespace

Node::Node(asio::io_context& io, Config config)
    : io_(io), config_(std::move(config)), store_(store_limits(config_.limits)), timer_(io) {
    store_.set_default_settings(config_.queue_defaults);
    for (const auto& [name, s] : config_.queues)
        store_.configure_queue(name, s);
}

Node::~Node() {
    stop();
}

std::int64_t Node::now_ms() const {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::int64_t Node::next_log_time() {
    last_time_ = std::max(last_time_, now_ms());
    return last_time_;
}

std::optional<std::string> Node::start() {
    storage::Status st;
    db_ = storage::Database::open(config_.data_dir, config_.fsync, st, storage_env_);
    if (!db_) return st.message;
    std::vector<storage::LogRecord> tail;
    std::int64_t applied_time = 0;
    st = db_->load(store_, applied_index_, applied_time, tail);
    if (!st.ok) return "refusing to serve from " + config_.data_dir + ": " + st.message;
    store_time_ = applied_time;
    for (const auto& r : tail) {
        auto cmd = queue::decode_command(r.command);
        if (!cmd)
            return "refusing to serve: log entry " + std::to_string(r.index) + " does not decode";
        // Each entry is applied at the time it was stamped with, as it was live.
        store_time_ = std::max(store_time_, r.time);
        store_.apply(*cmd, store_time_);
        applied_index_ = r.index;
    }
    last_time_ = store_time_;
    last_index_ = std::max(applied_index_, db_->last_log_index());
    spdlog::info("loaded {} tasks; replayed {} log entries; applied index {}", store_.task_count(),
                 tail.size(), applied_index_);

    writer_ = std::make_unique<storage::Writer>(
        *db_,
        [this](std::uint64_t index) { asio::post(io_, [this, index] { on_durable(index); }); },
        [](const std::string& message) {
            spdlog::critical("storage failed, stopping: {}", message);
            spdlog::shutdown();
            std::_Exit(70);
        });
    if (!tail.empty()) persist_applied();  // so the replayed tail can be trimmed

    next_session_ = std::uint64_t(now_ms()) << 20;
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
    timer_.cancel();
    writer_.reset();  // flushes what is queued
}

std::uint16_t Node::client_port() const {
    return server_ ? server_->port() : 0;
}

void Node::on_frame(const std::shared_ptr<net::Connection>& conn, std::string_view frame) {
    if (stopped_) return;
    if (conn->session == 0) {
        conn->session = ++next_session_;
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
                                    "this node requires hello with a token first"));
        return;
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
            return propose(queue::Declare{req.queue, req.lead_ms, req.ttr_ms, req.retention_ms,
                                          req.max_attempts ? std::optional<std::uint32_t>(
                                                                 std::uint32_t(*req.max_attempts))
                                                           : std::nullopt,
                                          req.late_share},
                           reply);
        case Op::put:
            return propose(queue::Put{req.queue, std::move(*req.key), std::move(*req.payload),
                                      req.time, req.mode.value_or(queue::PutMode::upsert)},
                           reply);
        case Op::del:
            return propose(queue::Delete{req.queue, std::move(*req.key)}, reply);
        case Op::take: {
            queue::Take take{req.queue, std::uint32_t(req.count.value_or(1)), req.ttr_ms,
                             conn->session, req.release_on_disconnect.value_or(true)};
            const std::int64_t timeout = req.timeout_ms.value_or(0);
            if (timeout > 0) {
                const std::int64_t deadline = now_ms() + timeout;
                reply.wait_until = deadline;
                if (!store_.has_due(req.queue, std::max(last_time_, now_ms())))
                    return wait_for_task(reply, std::move(take), deadline);
            }
            return propose(std::move(take), reply);
        }
        case Op::touch:
            return propose(queue::Touch{req.queue, std::move(*req.key), *req.lease, req.ttr_ms},
                           reply);
        case Op::ack:
            return propose(queue::Ack{req.queue, std::move(*req.key), *req.lease,
                                      std::move(req.payload), req.time},
                           reply);
        case Op::release:
            return propose(queue::Release{req.queue, std::move(*req.key), *req.lease,
                                          req.delay_ms.value_or(0)},
                           reply);
        case Op::bury:
            return propose(queue::Bury{req.queue, std::move(*req.key), *req.lease}, reply);
        case Op::kick:
            return propose(queue::Kick{req.queue, std::uint32_t(*req.count)}, reply);
    }
}

void Node::handle_hello(const std::shared_ptr<net::Connection>& conn, const net::Request& req) {
    if (!config_.auth_token.empty()) {
        conn->authorized = req.token && *req.token == config_.auth_token;
        if (!conn->authorized)
            return conn->send(net::error_frame(req.id, Code::unauthorized,
                                               req.token ? "wrong token" : "a token is required"));
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
    conn->send(hello_reply(req.id, conn->session, config_.node_id, config_.client_advertise));
}

void Node::handle_read(const std::shared_ptr<net::Connection>& conn, const net::Request& req) {
    const std::int64_t now = std::max(last_time_, now_ms());
    switch (req.op) {
        case Op::get: {
            auto task = store_.get(req.queue, *req.key);
            if (!task) return conn->send(net::error_frame(req.id, Code::not_found, "no such task"));
            return conn->send(get_reply(req.id, *task));
        }
        case Op::stats:
            return conn->send(
                stats_reply(req.id, store_, req.queue_given ? &req.queue : nullptr, now));
        default: {
            StatusInfo s{config_.node_id, config_.client_advertise, last_index_,
                         applied_index_,  store_.task_count(),      pending_.size()};
            return conn->send(status_reply(req.id, s));
        }
    }
}

void Node::propose(queue::Command cmd, Reply reply) {
    Pending p{++last_index_, next_log_time(), std::move(cmd), std::move(reply)};
    writer_->append(storage::LogRecord{p.index, p.time, queue::encode_command(p.command)});
    pending_.push_back(std::move(p));
}

void Node::on_durable(std::uint64_t index) {
    if (stopped_) return;
    bool wrote = false;
    while (!pending_.empty() && pending_.front().index <= index) {
        Pending p = std::move(pending_.front());
        pending_.pop_front();
        apply_one(p);
        wrote = wrote || !std::holds_alternative<queue::Take>(p.command);
    }
    persist_applied();
    // Takes only remove tasks; anything else may have made one due for a waiter.
    if (wrote)
        for (auto& [queue, list] : waiters_)
            if (!list.empty()) wake_waiters(queue);
    arm_timer();
}

void Node::apply_one(Pending& p) {
    store_time_ = std::max(store_time_, p.time);
    queue::Result result = store_.apply(p.command, store_time_);
    applied_index_ = p.index;
    if (auto* take = std::get_if<queue::Take>(&p.command)) {
        if (result.ok() && result.tasks.empty() && p.reply.wait_until &&
            *p.reply.wait_until > now_ms()) {
            if (auto c = p.reply.conn.lock(); c && c->open())
                return wait_for_task(p.reply, std::move(*take), *p.reply.wait_until);
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
    answer(p.reply, result);
}

void Node::answer(const Reply& reply, const queue::Result& result) {
    auto conn = reply.conn.lock();
    if (!conn || !conn->open()) return;
    conn->send(result_reply(reply.id, reply.op, result));
}

void Node::persist_applied() {
    storage::AppliedState state;
    state.applied_index = applied_index_;
    state.applied_time = store_time_;
    store_.drain_changes(
        [&](std::string_view q, std::string_view k, const std::optional<std::string>& encoded) {
            state.changes.push_back(storage::TaskChange{std::string(q), std::string(k), encoded});
        });
    // Timers fire often (each time a task comes due); write only what changed.
    if (state.changes.empty() && applied_index_ == persisted_index_) return;
    persisted_index_ = applied_index_;
    state.store_meta = store_.encode_meta();
    if (applied_index_ > config_.log_keep) state.trim_through = applied_index_ - config_.log_keep;
    writer_->apply(std::move(state));
}

void Node::wait_for_task(Reply reply, queue::Take take, std::int64_t deadline) {
    waiters_[take.queue].push_back(Waiter{std::move(reply), std::move(take), deadline});
    arm_timer();
}

void Node::wake_waiters(const std::string& queue) {
    auto& list = waiters_[queue];
    if (list.empty() || !store_.has_due(queue, std::max(last_time_, now_ms()))) return;
    // Every waiter proposes its take; those that come back empty wait again.
    std::deque<Waiter> woken;
    woken.swap(list);
    for (auto& w : woken) {
        auto c = w.reply.conn.lock();
        if (!c || !c->open()) continue;
        propose(std::move(w.take), std::move(w.reply));
    }
}

void Node::on_timer() {
    timer_at_ = 0;
    if (stopped_) return;
    const std::int64_t now = now_ms();
    // Advancing ahead of commands not yet applied would apply them in the past; they
    // advance the store themselves when they apply.
    if (pending_.empty()) {
        last_time_ = std::max(last_time_, now);
        store_time_ = last_time_;
        store_.advance(store_time_);
        persist_applied();
    }
    for (auto it = waiters_.begin(); it != waiters_.end();) {
        auto& [queue, list] = *it;
        std::deque<Waiter> keep;
        for (auto& w : list) {
            auto c = w.reply.conn.lock();
            if (!c || !c->open()) continue;
            if (w.deadline <= now)
                answer(w.reply, queue::Result{});
            else
                keep.push_back(std::move(w));
        }
        list.swap(keep);
        wake_waiters(queue);
        it = list.empty() ? waiters_.erase(it) : std::next(it);
    }
    arm_timer();
}

void Node::arm_timer() {
    if (stopped_) return;
    // Events are looked up from the store's own time: whatever came due since it last
    // advanced must wake the timer too.
    std::optional<std::int64_t> at = store_.next_event_any(store_time_);
    for (const auto& [queue, list] : waiters_)
        for (const auto& w : list)
            at = at ? std::min(*at, w.deadline) : w.deadline;
    if (!at) return;
    const std::int64_t now = now_ms();
    // While commands are in flight the store cannot advance (on_timer); look again soon.
    if (!pending_.empty()) at = std::max(*at, now + 2);
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
