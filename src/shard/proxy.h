// dueq-proxy (docs/sharding.md): speaks the client protocol, holds one connection per
// shard (shard::Router), and sends every request where its key lives. It keeps nothing
// durable: several proxies can serve side by side, and a restarted one loses only the
// sessions of its own clients (their tasks come back when their ttr runs out).
//
// - Keyed ops (put, get, delete, touch, ack, release, bury) go to the key's shard.
// - take serves from every shard (proxy_fan_out.cpp): within a shard the shard's own take
//   order holds, and the shard asked first rotates, so none starves. A task leased on a
//   shard is handed to the client or released at once, never kept.
// - declare goes to every shard; kick and stats add up every shard's answers.
// - Sessions: takes go to the shards with release_on_disconnect false, and the proxy
//   remembers which leases each client session holds; when a client goes away and does
//   not resume its session (hello{session}) within the grace, the proxy releases them.
//
// Threads: everything runs on the io_context given.
#pragma once

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "net/limits.h"
#include "net/request.h"
#include "net/server.h"
#include "shard/request_map.h"
#include "shard/router.h"
#include "wire/protocol.h"

namespace dueq::shard {

struct ProxyOptions {
    std::string listen = "127.0.0.1:7600";
    std::string name{wire::word::proxy};  // its node_id in hello and status
    std::string map_file;              // the shard map (reloaded on SIGHUP)
    std::optional<std::string> token;  // clients must say hello with it; sent upstream
    std::chrono::milliseconds session_grace{5000};
    std::chrono::milliseconds call_timeout{4000};
    // How long a take's sweep waits for one shard before it asks the next: a shard whose
    // leader is paused or cut off must not hold up the tasks of the others.
    std::chrono::milliseconds sweep_step_timeout{1000};
    net::Limits limits;
    // TLS to the shards' client listeners (client/client.h).
    client::ClientTls upstream_tls;
    // TLS on the proxy's own listener: its certificate and key; with client_ca, clients
    // must present a certificate of that CA. No cert_file: plaintext.
    net::TlsFiles listen_tls;
};

class Proxy {
  public:
    Proxy(boost::asio::io_context& io, ProxyOptions options);
    ~Proxy();
    // Reads the map and listens. Returns a message on failure.
    std::optional<std::string> start();
    void stop();
    std::uint16_t port() const { return server_ ? server_->port() : 0; }
    // Rereads the map file; "" when the new map is in use, else why it was refused.
    std::string reload_map();
    // Rereads the listener's TLS files (SIGHUP): new connections use them. "" or why not.
    std::string reload_tls();

  private:
    using ConnPtr = std::shared_ptr<net::Connection>;
    struct Held {  // a lease a client session holds through this proxy
        std::size_t shard;
        std::string queue, key;
        std::uint64_t lease;
    };
    struct Session {
        bool attached = true;  // false while its connection is closed, waiting for a resume
        // (shard, queue, key) -> lease
        std::map<std::tuple<std::size_t, std::string, std::string>, std::uint64_t> held;
        std::unique_ptr<boost::asio::steady_timer> grace;
    };
    struct TakeJob;   // proxy_fan_out.cpp
    struct EveryJob;  // proxy_fan_out.cpp

    void on_frame(const ConnPtr& conn, std::string_view frame);
    void on_close(const ConnPtr& conn);
    void hello(const ConnPtr& conn, std::uint64_t id, const net::Hello& h);
    void status(const ConnPtr& conn, std::uint64_t id);
    void keyed(const ConnPtr& conn, const net::Request& req, std::string_view frame,
               std::string_view queue, std::string_view key);
    // Keeps the session's record of leases in step with a keyed op's success.
    void note_keyed_answer(std::uint64_t session, net::Op op, std::size_t shard,
                           std::string_view queue, std::string_view key);
    // declare, kick, stats: every shard (proxy_fan_out.cpp).
    void to_every_shard(const ConnPtr& conn, const net::Request& req, std::string_view frame);
    void every_step(const std::shared_ptr<EveryJob>& job);
    void every_answer(const std::shared_ptr<EveryJob>& job);
    // take (proxy_fan_out.cpp).
    void take(const ConnPtr& conn, const net::Request& req, const queue::Take& t,
              std::int64_t wait_ms);
    void take_sweep(const std::shared_ptr<TakeJob>& job, std::size_t asked);
    void take_wait(const std::shared_ptr<TakeJob>& job);
    void take_answer(const std::shared_ptr<TakeJob>& job);
    bool take_collect(TakeJob& job, std::size_t shard, client::Result<client::ResponseFrame>& r,
                      const std::string& name);
    // Releases a lease no client will get (a take answered after its client left, or
    // beyond what the client's take wanted).
    void release(std::size_t shard, const std::string& queue, const std::string& key,
                 std::uint64_t lease);
    void release_session(std::uint64_t session);

    boost::asio::io_context& io_;
    ProxyOptions options_;
    std::unique_ptr<Router> router_;
    std::unique_ptr<net::Server> server_;
    std::unordered_map<std::uint64_t, Session> sessions_;
    std::uint64_t next_session_ = 1;
    std::size_t take_rotation_ = 0;  // the shard a take asks first turns with every take
    bool stopped_ = false;
};

}  // namespace dueq::shard
