// A small HTTP/1.1 server (Boost.Beast) for the admin endpoints of a node.
//
// It runs on the io_context it is given (the node's event loop), so a handler reads the
// node's state without a lock. It only does GET and HEAD; a request with a body, a header
// block over 8 KiB or one not complete within 10 s is refused or dropped, and connections
// beyond `max_connections` are closed at once, so no client can make it grow. With a TLS
// context (set_tls) it serves HTTPS; a connection that does not finish its handshake within
// the same 10 s is dropped.
//
// Thread-safety: the io_context's thread only.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "net/tls.h"

namespace boost::asio::ssl {
class context;
}

namespace dueq::admin {

struct HttpRequest {
    std::string method;  // "GET", "HEAD" or "POST"
    std::string path;    // the target without its query string
    std::string query;   // after '?', or empty
};

struct HttpResponse {
    unsigned status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
};

class HttpServer {
  public:
    using Respond = std::function<void(HttpResponse)>;
    // Gets each request and a callback that answers it, now or later (at most once).
    using Handler = std::function<void(const HttpRequest&, Respond)>;

    // Listens on host:port (port 0: any); throws std::exception if it cannot.
    HttpServer(boost::asio::io_context& io, const std::string& listen, Handler handler,
               std::size_t max_connections = 64);
    ~HttpServer();
    std::uint16_t port() const { return port_; }
    // Stops accepting and closes every connection.
    void stop();
    std::size_t connections() const { return *live_; }
    // HTTPS from now on with this context (server role; its files and client-certificate
    // rule); null: plain HTTP. Open connections keep what they started with.
    void set_tls(std::shared_ptr<const net::TlsContext> ctx);

    class Session;  // one connection, plain or TLS (http_server.cpp)

  private:
    void accept();

    boost::asio::io_context& io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer retry_;
    std::shared_ptr<Handler> handler_;  // shared with the sessions, which may outlive a stop
    std::list<std::weak_ptr<Session>> sessions_;  // to close them on stop
    std::shared_ptr<boost::asio::ssl::context> tls_;  // null: plain HTTP
    std::size_t max_connections_;
    std::uint16_t port_ = 0;
    // Shared with the sessions, which count themselves in and out.
    std::shared_ptr<std::size_t> live_ = std::make_shared<std::size_t>(0);
    std::shared_ptr<bool> stopped_ = std::make_shared<bool>(false);
};

}  // namespace dueq::admin
