#include "shard/proxy.h"

#include "common/version.h"

#include <spdlog/spdlog.h>

#include "client/codec.h"
#include "net/frame.h"
#include "net/peer_handshake.h"
#include "shard/shards_reply.h"
#include "wire/protocol.h"

namespace dueq::shard {

namespace asio = boost::asio;
using wire::Code;

Proxy::Proxy(asio::io_context& io, ProxyOptions options) : io_(io), options_(std::move(options)) {}

Proxy::~Proxy() {
    stop();
}

std::optional<std::string> Proxy::start() {
    ShardMap map;
    try {
        map = load_shard_map_file(options_.map_file);
    } catch (const std::exception& e) {
        return std::string(e.what());
    }
    spdlog::info("shard map version {}: {} shards, {} buckets", map.version, map.shards.size(),
                 map.bucket_count);
    RouterOptions ro;
    ro.token = options_.token;
    ro.call_timeout = options_.call_timeout;
    ro.tls = options_.upstream_tls;
    router_ = std::make_unique<Router>(io_, std::move(map), ro);
    router_->start_discovery(std::nullopt);
    try {
        server_ = std::make_unique<net::Server>(
            io_, options_.listen, options_.limits,
            [this](const auto& c, std::string_view f) { on_frame(c, f); },
            [this](const auto& c) { on_close(c); });
    } catch (const std::exception& e) {
        return "cannot listen on " + options_.listen + ": " + e.what();
    }
    if (!options_.listen_tls.cert_file.empty())
        if (auto err = reload_tls(); !err.empty()) return err;
    return std::nullopt;
}

std::string Proxy::reload_tls() {
    if (options_.listen_tls.cert_file.empty() || !server_) return "";
    std::string error;
    auto ctx = net::TlsContext::make(
        net::TlsRole::server, options_.listen_tls,
        options_.listen_tls.ca_file.empty() ? net::PeerCert::none : net::PeerCert::required,
        error);
    if (!ctx) {
        spdlog::warn("TLS reload refused: {}; the old certificate stays in use", error);
        return "TLS: " + error;
    }
    spdlog::info("TLS for clients: {}{}", ctx->subject(),
                 options_.listen_tls.ca_file.empty() ? "" : ", client certificates required");
    server_->set_tls(std::move(ctx));
    return "";
}

void Proxy::stop() {
    if (stopped_) return;
    stopped_ = true;
    if (server_) server_->stop();
    router_.reset();
    sessions_.clear();
}

std::string Proxy::reload_map() {
    std::string why;
    auto next = load_for_reload(options_.map_file, router_->map(), "", why);
    if (!next) {
        spdlog::warn("shard map reload refused: {}; still routing by version {}", why,
                     router_->map().version);
        return why;
    }
    const auto& old = router_->map();
    spdlog::info("shard map version {} in use (was {})", next->version, old.version);
    // Leases held by sessions name shards by index: carry them over by name.
    for (auto& [id, s] : sessions_) {
        decltype(s.held) moved;
        for (auto& [k, lease] : s.held)
            if (auto i = next->find(old.shards[std::get<0>(k)].name))
                moved[{*i, std::get<1>(k), std::get<2>(k)}] = lease;
        s.held = std::move(moved);
    }
    router_->set_map(std::move(*next));
    return "";
}

void Proxy::on_frame(const ConnPtr& conn, std::string_view frame) {
    if (stopped_) return;
    if (conn->session == 0) {
        conn->session = next_session_++;
        sessions_[conn->session];
    }
    auto decoded = net::decode_request(frame, options_.limits);
    if (auto* err = std::get_if<net::RequestError>(&decoded))
        return conn->send(net::error_frame(err->id, err->code, err->message));
    auto& req = std::get<net::Request>(decoded);
    const bool open_op =
        std::holds_alternative<net::Ping>(req.body) || std::holds_alternative<net::Hello>(req.body);
    if (options_.token && !conn->authorized && !open_op) {
        conn->send(net::error_frame(req.id, Code::unauthorized,
                                    "this proxy requires hello with a token first; closing"));
        return conn->close_after_send();
    }
    if (auto target = net::request_key(req))
        return keyed(conn, req, frame, target->first, target->second);
    if (auto* write = std::get_if<net::Write>(&req.body)) {
        if (auto* t = std::get_if<queue::Take>(&write->command))
            return take(conn, req, *t, write->wait_ms);
        return to_every_shard(conn, req, frame);  // declare, kick
    }
    if (std::holds_alternative<net::GetStats>(req.body)) return to_every_shard(conn, req, frame);
    if (auto* h = std::get_if<net::Hello>(&req.body)) return hello(conn, req.id, *h);
    if (std::holds_alternative<net::GetStatus>(req.body)) return status(conn, req.id);
    if (std::holds_alternative<net::GetMembers>(req.body) ||
        std::holds_alternative<net::ChangeMember>(req.body))
        return conn->send(net::error_frame(
            req.id, Code::bad_request,
            "membership is per shard: send member ops to a node of that shard, not the proxy"));
    if (std::holds_alternative<net::ListTasks>(req.body))
        return conn->send(net::error_frame(
            req.id, Code::bad_request,
            "list pages through one shard's tasks: send it to a node of each shard instead"));
    if (std::holds_alternative<net::BackupChunk>(req.body))
        return conn->send(net::error_frame(
            req.id, Code::bad_request,
            "a backup is of one shard: run dueqctl backup against a node of each shard"));
    if (std::holds_alternative<net::StartMove>(req.body) ||
        std::holds_alternative<net::MoveStepRequest>(req.body))
        return conn->send(net::error_frame(
            req.id, Code::bad_request,
            "a move is run by the source shard's leader: dueqctl shard move asks it directly"));
    if (std::holds_alternative<net::GetShards>(req.body)) {
        std::vector<std::string> leaders;
        for (std::size_t i = 0; i < router_->map().shards.size(); ++i)
            leaders.push_back(router_->known_leader(i));
        return conn->send(shards_reply(req.id, router_->map(), "", leaders));
    }
    net::FrameBuilder f;  // ping
    f.begin_ok(req.id, 0);
    conn->send(f.finish());
}

void Proxy::hello(const ConnPtr& conn, std::uint64_t id, const net::Hello& h) {
    if (options_.token) {
        conn->authorized = h.token && net::same_secret(*h.token, *options_.token);
        if (!conn->authorized) {
            conn->send(net::error_frame(
                id, Code::unauthorized,
                h.token ? "wrong token; closing" : "a token is required; closing"));
            return conn->close_after_send();
        }
    }
    if (h.session && *h.session != conn->session) {
        auto it = sessions_.find(*h.session);
        if (it != sessions_.end() && !it->second.attached) {
            // Take the old session over: its leases stay with this connection.
            auto mine = sessions_.find(conn->session);
            if (mine != sessions_.end()) {
                for (auto& held : mine->second.held)
                    it->second.held.insert(held);
                sessions_.erase(mine);
            }
            it->second.attached = true;
            it->second.grace.reset();
            conn->session = *h.session;
        }
    }
    conn->send(
        net::hello_frame(id, conn->session, options_.name, "", std::string(wire::word::proxy)));
}

void Proxy::status(const ConnPtr& conn, std::uint64_t id) {
    const auto& map = router_->map();
    net::FrameBuilder f;
    f.begin_ok(id, 6);
    f.key(wire::field::version), f.str(dueq::build());
    f.key(wire::field::node_id), f.str(options_.name);
    f.key(wire::field::role), f.str(wire::word::proxy);
    f.key(wire::field::leader), f.str("");
    f.key(wire::field::map_version), f.pk().pack_uint64(map.version);
    f.key(wire::field::shards), f.pk().pack_array(std::uint32_t(map.shards.size()));
    for (std::size_t i = 0; i < map.shards.size(); ++i) {
        f.pk().pack_map(2);
        f.key(wire::field::name), f.str(map.shards[i].name);
        f.key(wire::field::leader), f.str(router_->known_leader(i));
    }
    conn->send(f.finish());
}

void Proxy::keyed(const ConnPtr& conn, const net::Request& req, std::string_view frame,
                  std::string_view queue, std::string_view key) {
    const std::size_t shard = router_->map().shard_of(queue, key);
    std::weak_ptr<net::Connection> weak = conn;
    router_->relay(shard, net::to_string(req.op), frame, req.id,
                   [this, weak, op = req.op, shard, q = std::string(queue), k = std::string(key),
                    session = conn->session](Code code, std::string answer) {
                       if (code == Code::ok) note_keyed_answer(session, op, shard, q, k);
                       if (auto c = weak.lock(); c && c->open()) c->send(std::move(answer));
                   });
}

void Proxy::note_keyed_answer(std::uint64_t session, net::Op op, std::size_t shard,
                              std::string_view queue, std::string_view key) {
    // ack, release, bury and delete end a lease; a put replaces the task and voids it.
    if (op != net::Op::ack && op != net::Op::release && op != net::Op::bury && op != net::Op::del &&
        op != net::Op::put)
        return;
    auto it = sessions_.find(session);
    if (it == sessions_.end()) return;
    it->second.held.erase({shard, std::string(queue), std::string(key)});
}

void Proxy::on_close(const ConnPtr& conn) {
    auto it = sessions_.find(conn->session);
    if (it == sessions_.end() || stopped_) return;
    if (it->second.held.empty()) {
        sessions_.erase(it);
        return;
    }
    it->second.attached = false;
    auto timer = std::make_unique<asio::steady_timer>(io_, options_.session_grace);
    timer->async_wait([this, id = conn->session](boost::system::error_code ec) {
        if (!ec) release_session(id);
    });
    it->second.grace = std::move(timer);
}

void Proxy::release_session(std::uint64_t id) {
    auto it = sessions_.find(id);
    if (it == sessions_.end() || it->second.attached) return;
    for (const auto& [k, lease] : it->second.held)
        release(std::get<0>(k), std::get<1>(k), std::get<2>(k), lease);
    spdlog::debug("session {} ended: released {} leases", id, it->second.held.size());
    sessions_.erase(it);
}

void Proxy::release(std::size_t shard, const std::string& queue, const std::string& key,
                    std::uint64_t lease) {
    if (!router_ || shard >= router_->map().shards.size()) return;
    auto request = request_map(wire::op_name(wire::Op::release), 3, [&](Packer& pk) {
        pack_str(pk, wire::field::queue), pack_str(pk, queue);
        pack_str(pk, wire::field::key), pk.pack_bin(std::uint32_t(key.size())),
            pk.pack_bin_body(key.data(), std::uint32_t(key.size()));
        pack_str(pk, wire::field::lease), pk.pack_uint64(lease);
    });
    // lease_mismatch is a normal answer here (acked, expired or retaken meanwhile).
    router_->call(shard, wire::op_name(wire::Op::release), request->get(),
                  [](client::Result<client::ResponseFrame>) {});
}

}  // namespace dueq::shard
