#include "node/node.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "net/frame.h"
#include "net/peer_handshake.h"
#include "node/replies.h"
#include "queue/command_codec.h"
#include "shard/shards_reply.h"

namespace dueq::node {

namespace asio = boost::asio;
using queue::Code;

namespace {
constexpr const char* kLeaderOnly = "consistency \"leader\" reads are served by the leader";
}  // namespace

Node::Node(asio::io_context& io, Config config)
    : io_(io),
      config_(std::move(config)),
      tick_timer_(io),
      timer_(io),
      stop_timer_(io),
      budget_(effective_store_budget(config_.limits.max_store_bytes,
                                     config_.limits.max_store_bytes_set, physical_memory_bytes())) {
}

Node::~Node() {
    stop();
}

std::int64_t Node::now_ms() const {
    return clock_.now_ms();
}

std::int64_t Node::store_now() const {
    return std::max(std::int64_t(shell_->applied().time), now_ms());
}

const queue::Store* Node::writable_store() const {
    if (autonomy_->serving()) return shell_->fork();
    return shell_->is_leader() ? &shell_->store() : nullptr;
}

std::string Node::refusal_to_serve(const std::string& why) const {
    const bool damaged = why.find("orrupt") != std::string::npos;
    return "refusing to serve from " + config_.data_dir + ": " + why +
           (damaged && config_.members.size() > 1
                ? ". The data dir is damaged: replace this member (dueqctl member remove " +
                      config_.node_id +
                      ", then add the machine back as a new member with an empty data dir; "
                      "docs/operations.md)"
                : "");
}

std::optional<std::string> Node::start() {
    using Clock = std::chrono::steady_clock;
    const auto began = Clock::now();
    auto ms_between = [](Clock::time_point from, Clock::time_point to) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
    };
    if (auto err = load_node_tls(config_, tls_); !err.empty()) return err;
    admin_ = std::make_unique<NodeAdmin>(*this);
    if (auto err = admin_->start()) return err;
    if (auto err = start_sharding()) return err;
    storage::Status st;
    std::error_code made;
    std::filesystem::create_directories(config_.data_dir, made);
    if (made) return "cannot create data_dir " + config_.data_dir + ": " + made.message();
    db_ = storage::Database::open(config_.data_dir, config_.fsync, st, storage_env_);
    if (!db_) return refusal_to_serve(st.message);
    if (auto err = check_member_record()) return err;
    const auto opened = Clock::now();
    // Not this node's [limits] or [queues]: every replica applies with the same bounds,
    // and queue settings arrive through the log (propose_configured_settings).
    auto store = std::make_unique<queue::Store>(queue::kApplyLimits);
    storage::Loaded loaded;
    st = db_->load(*store, loaded);
    if (!st.ok) return refusal_to_serve(st.message);
    spdlog::info(
        "loaded {} tasks at applied index {}; {} log entries after index {} (RocksDB opened "
        "in {} ms, read in {} ms: tasks {} ms, then their indexes {} ms)",
        store->task_count(), loaded.applied_index, loaded.entries.size(), loaded.base.index,
        ms_between(began, opened), ms_between(opened, Clock::now()), loaded.tasks_read_ms,
        loaded.indexes_built_ms);
    const auto replay_began = Clock::now();
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
        return "could not replay the log up to index " + std::to_string(target) + " (applied " +
               std::to_string(applied_index()) + ")";
    spdlog::info("ready to serve {} ms after start (replay {} ms)", ms_between(began, Clock::now()),
                 ms_between(replay_began, Clock::now()));

    try {
        server_ = std::make_unique<net::Server>(
            io_, config_.client_listen, config_.limits,
            [this](const auto& c, std::string_view f) { on_frame(c, f); },
            [this](const auto& c) { on_close(c); });
    } catch (const std::exception& e) {
        return "cannot listen on " + config_.client_listen + ": " + e.what();
    }
    server_->set_tls(tls_.clients);
    spdlog::info("node {} serving clients on {} ({}, fsync {})", config_.node_id,
                 config_.client_listen,
                 tls_.clients ? "TLS" + std::string(config_.tls.clients == "mutual"
                                                        ? " with client certificates"
                                                        : "")
                              : std::string("plaintext"),
                 config_.fsync ? "always" : "never");
    loading_ = false;
    arm_timer();
    return std::nullopt;
}

void Node::stop() {
    if (stopped_) return;
    stopped_ = true;
    if (admin_) admin_->stop();
    if (server_) server_->stop();
    backups_ = Backups{};
    if (shell_) shell_->write_applied_state();  // so that a restart replays nothing
    if (raft_io_) raft_io_->stop();             // flushes what is queued
    if (db_) {
        if (auto st = db_->flush(); !st.ok) spdlog::warn("on stop: {}", st.message);
    }
    timer_.cancel();
    tick_timer_.cancel();
    router_.reset();  // its clients' calls end now, their callbacks dropped
}

std::uint16_t Node::admin_port() const {
    return admin_ ? admin_->port() : 0;
}

std::uint16_t Node::client_port() const {
    return server_ ? server_->port() : 0;
}

// Answers one request on its client connection, if the client is still there.
class Node::ConnReply final : public Replier {
  public:
    ConnReply(const ConnPtr& conn, std::uint64_t id, Node& node, std::size_t op,
              RequestMeter::Clock::time_point started)
        : conn_(conn), id_(id), node_(node), op_(op), started_(started) {}
    // Bytes the store budget counts in flight for this write, until it is answered.
    std::uint64_t budget_bytes = 0;
    void unparked() override {
        const auto now = RequestMeter::Clock::now();
        node_.metrics_.take_wait.record_us(std::uint64_t(
            std::chrono::duration_cast<std::chrono::microseconds>(now - started_).count()));
        started_ = now;
    }
    bool open() const override {
        auto c = conn_.lock();
        return c && c->open();
    }
    void answer(const shell::Outcome& o) override {
        node_.budget_.release(budget_bytes);
        budget_bytes = 0;
        node_.metrics_.requests.record(op_, o.code, started_);
        if (o.code == Code::ok && o.result && o.result->ok() &&
            std::holds_alternative<queue::Ack>(*o.command))
            node_.metrics_.refresh_margin.record_signed_us(o.result->ack_margin * 1000);
        auto c = conn_.lock();
        if (!c || !c->open()) return;
        if (o.code == Code::ok) return c->send(result_reply(id_, *o.command, *o.result));
        node_.send_error(c, id_, o.code, o.message);
    }

  private:
    std::weak_ptr<net::Connection> conn_;
    std::uint64_t id_;
    Node& node_;
    std::size_t op_;
    RequestMeter::Clock::time_point started_;
};

void Node::on_frame(const ConnPtr& conn, std::string_view frame) {
    if (stopped_) return;
    const auto started = RequestMeter::Clock::now();
    if (conn->session == 0) conn->session = writes_->sessions().open();
    auto decoded = net::decode_request(frame, config_.limits);
    if (auto* err = std::get_if<net::RequestError>(&decoded)) {
        conn->send(net::error_frame(err->id, err->code, err->message));
        metrics_.requests.record(RequestMeter::kInvalid, err->code, started);
        return;
    }
    auto& req = std::get<net::Request>(decoded);
    if (!conn->authorized && !config_.auth_token.empty() &&
        !std::holds_alternative<net::Ping>(req.body) &&
        !std::holds_alternative<net::Hello>(req.body)) {
        conn->send(net::error_frame(req.id, Code::unauthorized,
                                    "this node requires hello with a token first; closing"));
        metrics_.requests.record(RequestMeter::slot(req.op), Code::unauthorized, started);
        return conn->close_after_send();
    }
    if (route_elsewhere(conn, req, frame, started)) return;
    std::visit(
        [&](auto& body) {
            if constexpr (std::is_same_v<std::decay_t<decltype(body)>, net::Write>) {
                handle(conn, req.id, body, req.op, started);
            } else {
                metrics_.requests.record(RequestMeter::slot(req.op), handle(conn, req.id, body),
                                         started);
            }
        },
        req.body);
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::Ping&) {
    net::FrameBuilder f;
    f.begin_ok(id, 0);
    conn->send(f.finish());
    return Code::ok;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::Hello& hello) {
    if (!config_.auth_token.empty()) {
        conn->authorized = hello.token && net::same_secret(*hello.token, config_.auth_token);
        if (!conn->authorized) {
            conn->send(net::error_frame(
                id, Code::unauthorized,
                hello.token ? "wrong token; closing" : "a token is required; closing"));
            conn->close_after_send();
            return Code::unauthorized;
        }
    }
    if (hello.session && writes_->resume_session(conn->session, *hello.session, now_ms()))
        conn->session = *hello.session;
    conn->send(net::hello_frame(id, conn->session, config_.node_id, leader_client_address(),
                           to_string(autonomy_->mode())));
    return Code::ok;
}

void Node::handle(const ConnPtr& conn, std::uint64_t id, net::Write& write, net::Op op,
                  RequestMeter::Clock::time_point started) {
    auto reply = std::make_shared<ConnReply>(conn, id, *this, RequestMeter::slot(op), started);
    if (auto* take = std::get_if<queue::Take>(&write.command)) take->session = conn->session;
    // The node's clock counts whole milliseconds, so a deadline of now + wait could pass up
    // to 1 ms before the wait has: one more keeps a blocking take from answering early.
    const std::int64_t wait_ms = write.wait_ms > 0 ? write.wait_ms + 1 : 0;
    if (const queue::Store* store = writable_store()) {
        auto admitted = budget_.admit(*store, write.command);
        if (auto* refusal = std::get_if<std::string>(&admitted)) {
            shell::Outcome o{Code::store_full, std::move(*refusal), nullptr, nullptr, 0, 0};
            return reply->answer(o);
        }
        reply->budget_bytes = std::get<std::uint64_t>(admitted);
    }
    if (autonomy_->serving()) {
        if (autonomy_->submit(std::move(write.command), wait_ms, std::move(reply), now_ms()))
            arm_timer();
        return;
    }
    if (writes_->submit(std::move(write.command), wait_ms, std::move(reply), now_ms()))
        arm_timer();  // a parked take has a deadline
}

void Node::send_error(const ConnPtr& conn, std::uint64_t id, queue::Code code,
                      const std::string& message) const {
    // Every refusal that sends the client elsewhere names the leader this node knows of
    // (none while an election runs, nor on a leader cut off from the others).
    std::string leader;
    if ((code == Code::not_leader || code == Code::no_quorum) && !(shell_ && shell_->is_leader()))
        leader = leader_client_address();
    conn->send(net::error_frame(
        id, code, message, leader.empty() ? std::nullopt : std::optional<std::string>(leader)));
}

void Node::on_close(const ConnPtr& conn) {
    if (stopped_ || conn->session == 0) return;
    backups_.end_owner(conn->session);
    writes_->sessions().close(conn->session, now_ms());
    arm_timer();
}

// ---- reads: answered from this node's own state, without the log

template <class Read>
Code Node::read(const ConnPtr& conn, std::uint64_t id, Read& req, Serve<Read> serve) {
    if (!req.leader_only) return (this->*serve)(conn, id, req);
    if (!is_leader()) {
        send_error(conn, id, Code::not_leader, kLeaderOnly);
        return Code::not_leader;
    }
    if (planted_.node == NodeDefect::leader_reads_unconfirmed) return (this->*serve)(conn, id, req);
    leader_reads_->read(
        [this, conn, id, serve, req = std::move(req)](Code code, const char* why) {
            if (code == Code::ok) (this->*serve)(conn, id, req);
            else send_error(conn, id, code, why);
        },
        now_ms());
    return Code::ok;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::GetTask& get) {
    return read(conn, id, get, &Node::serve_get);
}

Code Node::serve_get(const ConnPtr& conn, std::uint64_t id, const net::GetTask& get) {
    if (!shell_->store().key_readable(get.queue, get.key)) {
        conn->send(net::error_frame(id, Code::moving,
                                    "this key's bucket is moving between shards; try again"));
        return Code::moving;
    }
    auto task = shell_->store().get(get.queue, get.key);
    if (!task) {
        conn->send(net::error_frame(id, Code::not_found, "no such task"));
        return Code::not_found;
    }
    conn->send(get_reply(id, *task));
    return Code::ok;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::GetStats& stats) {
    return read(conn, id, stats, &Node::serve_stats);
}

Code Node::serve_stats(const ConnPtr& conn, std::uint64_t id, const net::GetStats& stats) {
    conn->send(
        stats_reply(id, shell_->store(), stats.queue ? &*stats.queue : nullptr, store_now()));
    return Code::ok;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::ListTasks& list) {
    return read(conn, id, list, &Node::serve_list);
}

Code Node::serve_list(const ConnPtr& conn, std::uint64_t id, const net::ListTasks& list) {
    const queue::Store& store = shell_->store();
    const std::int64_t now = store_now();
    std::optional<std::pair<queue::Millis, std::string>> after;
    if (list.after) {
        auto at = list.after_time;
        if (!at) at = store.list_position(list.queue, list.status, *list.after, now);
        if (!at) {
            send_error(conn, id, Code::bad_request,
                       "task '" + *list.after +
                           "' is not in that status now: give 'after_time' "
                           "too (the previous page's answer has it)");
            return Code::bad_request;
        }
        after.emplace(*at, *list.after);
    }
    conn->send(list_reply(id, store.list(list.queue, list.status, after, list.count, now)));
    return Code::ok;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::GetStatus&) {
    conn->send(status_reply(id, status_info()));
    return Code::ok;
}

StatusInfo Node::status_info() const {
    const raft::Raft& raft = shell_->raft();
    StatusInfo s;
    s.node_id = config_.node_id;
    s.role = config_.members.size() > 1 || !is_leader() ? std::string(raft::to_string(raft.role()))
                                                        : "standalone";
    s.term = raft.term();
    s.leader = leader_client_address();
    s.leader_id = member_name(raft.leader());
    s.commit_index = raft.log().committed();
    s.last_index = raft.log().last_index();
    s.applied_index = applied_index();
    s.tasks = shell_->store().task_count();
    s.pending = shell_->pending_proposals();
    s.peer_input_dropped = raft_io_->dropped();
    s.mode = to_string(autonomy_->mode());
    s.mode_ms = now_ms() - autonomy_->mode_since();
    s.overlay = autonomy_->overlay_size();
    s.served_autonomous = autonomy_->totals().served;
    const auto& heal = autonomy_->last_heal();
    s.merged = heal.merged;
    s.merge_taken_over = heal.taken_over;
    s.merge_kept = heal.kept;
    s.merge_both_sides = heal.both_sides;
    for (const auto& m : members_.members) {
        if (m.raft_id == raft_id_) continue;
        PeerStatus p{m.name, m.peer, raft_io_->has_mesh() && raft_io_->connected(m.raft_id)};
        if (const auto* pr = raft.progress(m.raft_id)) {
            p.match = pr->match;
            p.lag = s.last_index > pr->match ? s.last_index - pr->match : 0;
        }
        s.peers.push_back(std::move(p));
    }
    return s;
}

// ---- keys of other shards (docs/sharding.md): forwarded to their leader or redirected

bool Node::route_elsewhere(const ConnPtr& conn, const net::Request& req, std::string_view frame,
                           RequestMeter::Clock::time_point started) {
    const auto& map = router_->map();
    if (map.shards.size() == 1 || planted_.node == NodeDefect::shard_serves_every_key) return false;
    const auto target = net::request_key(req);
    if (!target) return false;
    const std::size_t shard = map.shard_of(target->first, target->second);
    if (shard == own_shard_) return false;
    const auto slot = RequestMeter::slot(req.op);
    if (req.redirect || req.forwarded) {
        // A forwarded request is never forwarded again: two nodes whose maps disagree
        // (one reloaded, one not yet) must not pass it back and forth.
        const std::uint32_t bucket = map.bucket_of(target->first, target->second);
        const std::string why =
            "this key's bucket " + std::to_string(bucket) + " belongs to shard '" +
            map.shards[shard].name + "' (shard map version " + std::to_string(map.version) +
            (map.gen_of(bucket) ? ", moved there" : "") + ")" +
            (req.forwarded ? "; a forwarded request is not forwarded again" : "");
        conn->send(net::wrong_shard_frame(req.id, why, router_->leader_hint(shard),
                                          map.shards[shard].name, bucket, map.gen_of(bucket)));
        metrics_.requests.record(slot, Code::wrong_shard, started);
        return true;
    }
    std::weak_ptr<net::Connection> weak = conn;
    router_->relay(shard, net::to_string(req.op), frame, req.id,
                   [this, weak, slot, started](Code code, std::string answer) {
                       metrics_.requests.record(slot, code, started);
                       if (auto c = weak.lock(); c && c->open()) c->send(std::move(answer));
                   });
    return true;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::GetShards&) {
    const auto& map = router_->map();
    std::vector<std::string> leaders(map.shards.size());
    for (std::size_t i = 0; i < leaders.size(); ++i)
        leaders[i] = i == own_shard_ ? leader_client_address() : router_->known_leader(i);
    conn->send(shard::shards_reply(id, map, map.shards[own_shard_].name, leaders,
                                   &shell_->store().bucket_moves()));
    return Code::ok;
}

}  // namespace dueq::node
