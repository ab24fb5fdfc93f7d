#include "admin/http_get.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <memory>
#include <optional>

namespace dueq::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

struct Get : std::enable_shared_from_this<Get> {
    Get(asio::io_context& io, std::function<void(HttpGetResult)> d)
        : resolver(io), stream(io), done(std::move(d)) {}
    tcp::resolver resolver;
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::empty_body> req;
    std::optional<http::response_parser<http::string_body>> parser;
    std::function<void(HttpGetResult)> done;

    void fail(const std::string& what, beast::error_code ec) {
        HttpGetResult r;
        r.error = what + ": " + ec.message();
        finish(std::move(r));
    }
    void finish(HttpGetResult r) {
        beast::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        stream.close();
        if (done) std::exchange(done, nullptr)(std::move(r));
    }
};

}  // namespace

void http_get(asio::io_context& io, const std::string& address, const std::string& path,
              std::chrono::milliseconds deadline, std::function<void(HttpGetResult)> done) {
    auto g = std::make_shared<Get>(io, std::move(done));
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
    g->stream.expires_after(deadline);
    g->resolver.async_resolve(
        host, address.substr(colon + 1),
        [g](beast::error_code ec, const tcp::resolver::results_type& results) {
            if (ec) return g->fail("resolve", ec);
            g->stream.async_connect(results, [g](beast::error_code ec, const auto&) {
                if (ec) return g->fail("connect", ec);
                http::async_write(g->stream, g->req, [g](beast::error_code ec, std::size_t) {
                    if (ec) return g->fail("send", ec);
                    g->parser.emplace();
                    g->parser->body_limit(4u << 20);
                    http::async_read(g->stream, g->buffer, *g->parser,
                                     [g](beast::error_code ec, std::size_t) {
                                         if (ec) return g->fail("read", ec);
                                         auto res = g->parser->release();
                                         HttpGetResult r;
                                         if (res.result_int() != 200) {
                                             r.error = "HTTP " + std::to_string(res.result_int());
                                         } else {
                                             r.ok = true;
                                             r.body = std::move(res.body());
                                         }
                                         g->finish(std::move(r));
                                     });
                });
            });
        });
}

}  // namespace dueq::admin
