#include "admin/http_server.h"

#include <spdlog/spdlog.h>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <chrono>
#include <list>
#include <optional>
#include <type_traits>

#include "net/asio_tls.h"
#include "net/server.h"

namespace dueq::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {
constexpr std::size_t kMaxHeaderBytes = 8192;
constexpr auto kRequestDeadline = std::chrono::seconds(10);
}  // namespace

class HttpServer::Session {
  public:
    virtual ~Session() = default;
    virtual void start() = 0;
    virtual void close() = 0;
};

namespace {

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One connection over Stream: PlainStream, or TlsStream (a handshake first).
template <class Stream>
class StreamSession : public HttpServer::Session,
                      public std::enable_shared_from_this<StreamSession<Stream>> {
  public:
    using Handler = HttpServer::Handler;
    using Respond = HttpServer::Respond;

    // `tls` holds the context a TlsStream was made with, for as long as the stream lives.
    StreamSession(tcp::socket socket, std::shared_ptr<asio::ssl::context> tls,
                  std::shared_ptr<Handler> handler, std::shared_ptr<std::size_t> live,
                  std::shared_ptr<bool> stopped)
        : tls_(std::move(tls)),
          stream_(make_stream(std::move(socket), tls_.get())),
          handler_(std::move(handler)),
          live_(std::move(live)),
          stopped_(std::move(stopped)) {
        ++*live_;
    }
    ~StreamSession() override { --*live_; }

    void start() override {
        if constexpr (std::is_same_v<Stream, TlsStream>) {
            lowest().expires_after(kRequestDeadline);
            stream_.async_handshake(asio::ssl::stream_base::server,
                                    [self = this->shared_from_this()](beast::error_code ec) {
                                        if (ec) return self->close();
                                        self->read();
                                    });
        } else {
            read();
        }
    }

    void read() {
        if (*stopped_) return close();
        parser_.emplace();
        parser_->header_limit(kMaxHeaderBytes);
        lowest().expires_after(kRequestDeadline);
        http::async_read(stream_, buffer_, *parser_,
                         [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                             self->on_read(ec);
                         });
    }
    // No TLS close_notify: the socket is shut either way, and no answer is cut short by it.
    void close() override {
        beast::error_code ignored;
        lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
        lowest().close();
    }

  private:
    static Stream make_stream(tcp::socket socket, asio::ssl::context* tls) {
        if constexpr (std::is_same_v<Stream, TlsStream>)
            return Stream(std::move(socket), *tls);
        else
            return Stream(std::move(socket));
    }
    beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

    void on_read(beast::error_code ec) {
        if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
            ec == asio::error::operation_aborted || *stopped_)
            return close();
        if (ec) {
            // A body, oversized headers or garbage: say so once, then hang up.
            return write({400, "text/plain; charset=utf-8", "bad request: " + ec.message() + "\n"},
                         false, false);
        }
        const auto& req = parser_->get();
        const bool keep_alive = req.keep_alive();
        // POST carries no body (the parser refuses one): it only names an action.
        if (req.method() != http::verb::get && req.method() != http::verb::head &&
            req.method() != http::verb::post)
            return write({405, "text/plain; charset=utf-8", "only GET, HEAD and POST\n"},
                         keep_alive, false);
        HttpRequest r;
        r.method = std::string(req.method_string());
        const std::string target(req.target());
        const auto q = target.find('?');
        r.path = target.substr(0, q);
        if (q != std::string::npos) r.query = target.substr(q + 1);
        const bool head = req.method() == http::verb::head;
        lowest().expires_never();
        (*handler_)(r, [self = this->shared_from_this(), keep_alive, head](HttpResponse res) {
            if (*self->stopped_) return self->close();
            self->write(std::move(res), keep_alive, head);
        });
    }

    void write(HttpResponse res, bool keep_alive, bool head) {
        res_ = {};
        res_.version(11);
        res_.result(res.status);
        res_.set(http::field::content_type, res.content_type);
        res_.set(http::field::cache_control, "no-store");
        res_.keep_alive(keep_alive);
        if (head) {
            res_.content_length(res.body.size());
        } else {
            res_.body() = std::move(res.body);
            res_.prepare_payload();
        }
        lowest().expires_after(kRequestDeadline);
        auto self = this->shared_from_this();
        auto done = [self, keep_alive](beast::error_code ec, std::size_t) {
            if (ec || !keep_alive) return self->close();
            self->read();
        };
        if (head) {
            serializer_.emplace(res_);
            http::async_write_header(stream_, *serializer_, std::move(done));
        } else {
            http::async_write(stream_, res_, std::move(done));
        }
    }

    std::shared_ptr<asio::ssl::context> tls_;  // before stream_, which refers to it
    Stream stream_;
    beast::flat_buffer buffer_{kMaxHeaderBytes};
    std::optional<http::request_parser<http::empty_body>> parser_;
    http::response<http::string_body> res_;
    std::optional<http::response_serializer<http::string_body>> serializer_;
    std::shared_ptr<Handler> handler_;
    std::shared_ptr<std::size_t> live_;
    std::shared_ptr<bool> stopped_;
};

}  // namespace

HttpServer::HttpServer(asio::io_context& io, const std::string& listen, Handler handler,
                       std::size_t max_connections)
    : io_(io),
      acceptor_(io),
      retry_(io),
      handler_(std::make_shared<Handler>(std::move(handler))),
      max_connections_(max_connections) {
    const auto endpoint = net::parse_endpoint(listen);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    accept();
}

HttpServer::~HttpServer() {
    stop();
}

void HttpServer::stop() {
    if (*stopped_) return;
    *stopped_ = true;
    beast::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
    for (auto& weak : sessions_)
        if (auto s = weak.lock()) s->close();
    sessions_.clear();
}

void HttpServer::set_tls(std::shared_ptr<const net::TlsContext> ctx) {
    if (!ctx) {
        tls_.reset();
        return;
    }
    tls_ = net::asio_context(*ctx);
}

void HttpServer::accept() {
    acceptor_.async_accept([this, stopped = stopped_](beast::error_code ec, tcp::socket socket) {
        if (*stopped) return;
        if (ec) {
            // Out of descriptors, say: try again soon rather than spin.
            spdlog::warn("admin: accept failed: {}; retrying in 100 ms", ec.message());
            retry_.expires_after(std::chrono::milliseconds(100));
            retry_.async_wait([this, stopped](beast::error_code e) {
                if (!e && !*stopped) accept();
            });
            return;
        }
        if (*live_ >= max_connections_) {
            beast::error_code ignored;
            socket.close(ignored);  // over the cap: a scraper retries, an attacker gets nothing
        } else {
            std::shared_ptr<Session> session;
            if (tls_)
                session = std::make_shared<StreamSession<TlsStream>>(std::move(socket), tls_,
                                                                     handler_, live_, stopped_);
            else
                session = std::make_shared<StreamSession<PlainStream>>(std::move(socket), nullptr,
                                                                       handler_, live_, stopped_);
            sessions_.remove_if([](const auto& w) { return w.expired(); });
            sessions_.push_back(session);
            session->start();
        }
        accept();
    });
}

}  // namespace dueq::admin
