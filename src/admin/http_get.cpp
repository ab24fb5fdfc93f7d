#include "admin/http_get.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <memory>
#include <optional>
#include <type_traits>

#include "net/asio_tls.h"

namespace dueq::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

template <class Stream>
struct Get : std::enable_shared_from_this<Get<Stream>> {
    Get(asio::io_context& io, std::shared_ptr<asio::ssl::context> t,
        std::function<void(HttpGetResult)> d)
        : tls(std::move(t)), resolver(io), stream(make_stream(io, tls.get())), done(std::move(d)) {}
    std::shared_ptr<asio::ssl::context> tls;  // before stream, which refers to it
    tcp::resolver resolver;
    Stream stream;
    beast::flat_buffer buffer;
    http::request<http::empty_body> req;
    std::optional<http::response_parser<http::string_body>> parser;
    std::function<void(HttpGetResult)> done;

    static Stream make_stream(asio::io_context& io, asio::ssl::context* tls) {
        if constexpr (std::is_same_v<Stream, TlsStream>)
            return Stream(io, *tls);
        else
            return Stream(io);
    }
    beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream); }

    void fail(const std::string& what, beast::error_code ec) {
        HttpGetResult r;
        r.error = what + ": " + ec.message();
        finish(std::move(r));
    }
    void finish(HttpGetResult r) {
        beast::error_code ignored;
        lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
        lowest().close();
        if (done) std::exchange(done, nullptr)(std::move(r));
    }

    void run(const std::string& host, const std::string& port, std::chrono::milliseconds deadline) {
        lowest().expires_after(deadline);
        resolver.async_resolve(host, port,
                               [g = this->shared_from_this()](
                                   beast::error_code ec, const tcp::resolver::results_type& found) {
                                   if (ec) return g->fail("resolve", ec);
                                   g->connect(found);
                               });
    }
    void connect(const tcp::resolver::results_type& found) {
        lowest().async_connect(
            found, [g = this->shared_from_this()](beast::error_code ec, const auto&) {
                if (ec) return g->fail("connect", ec);
                if constexpr (std::is_same_v<Stream, TlsStream>) {
                    g->stream.async_handshake(asio::ssl::stream_base::client,
                                              [g](beast::error_code ec) {
                                                  if (ec) return g->fail("TLS handshake", ec);
                                                  g->send();
                                              });
                } else {
                    g->send();
                }
            });
    }
    void send() {
        http::async_write(
            stream, req, [g = this->shared_from_this()](beast::error_code ec, std::size_t) {
                if (ec) return g->fail("send", ec);
                g->parser.emplace();
                g->parser->body_limit(4u << 20);
                http::async_read(g->stream, g->buffer, *g->parser,
                                 [g](beast::error_code ec, std::size_t) { g->on_answer(ec); });
            });
    }
    void on_answer(beast::error_code ec) {
        if (ec) return fail("read", ec);
        auto res = parser->release();
        HttpGetResult r;
        if (res.result_int() != 200) {
            r.error = "HTTP " + std::to_string(res.result_int());
        } else {
            r.ok = true;
            r.body = std::move(res.body());
        }
        finish(std::move(r));
    }
};

template <class Stream>
void start_get(asio::io_context& io, std::shared_ptr<Get<Stream>> g, const std::string& address,
               const std::string& path, std::chrono::milliseconds deadline) {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0) {
        return asio::post(io, [g, address] {
            HttpGetResult r;
            r.error = "not host:port: " + address;
            g->finish(std::move(r));
        });
    }
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    g->req = {http::verb::get, path, 11};
    g->req.set(http::field::host, address);
    g->req.set(http::field::user_agent, "dueqd");
    g->run(host, address.substr(colon + 1), deadline);
}

}  // namespace

void http_get(asio::io_context& io, const std::string& address, const std::string& path,
              std::chrono::milliseconds deadline, std::function<void(HttpGetResult)> done,
              std::shared_ptr<const net::TlsContext> tls) {
    if (!tls)
        return start_get(io, std::make_shared<Get<PlainStream>>(io, nullptr, std::move(done)),
                         address, path, deadline);
    start_get(io, std::make_shared<Get<TlsStream>>(io, net::asio_context(*tls), std::move(done)),
              address, path, deadline);
}

}  // namespace dueq::admin
