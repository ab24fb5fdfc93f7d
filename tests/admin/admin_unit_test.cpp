// The pieces of the HTTP admin without a node: the Prometheus writer, the histogram, the
// JSON log line, and the HTTP server against well-formed and hostile clients.
#include <spdlog/details/log_msg.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "admin/http_server.h"
#include "admin/prometheus.h"
#include "common/histogram.h"
#include "node/json_log.h"

namespace asio = boost::asio;
using asio::ip::tcp;
using dueq::Histogram;
using dueq::admin::HttpRequest;
using dueq::admin::HttpResponse;
using dueq::admin::HttpServer;
using dueq::admin::PromText;

TEST_CASE("a histogram's buckets are cumulative and its count is the +Inf bucket") {
    Histogram h;
    h.record_us(40);          // <= 50 µs
    h.record_us(1000);        // <= 1 ms (a bound is inclusive)
    h.record_us(1001);        // <= 2.5 ms
    h.record_us(60'000'000);  // a minute: only +Inf
    CHECK(h.cumulative(0) == 1);
    CHECK(h.cumulative(4) == 2);  // kBounds[4] = 1 ms
    CHECK(h.cumulative(5) == 3);
    CHECK(h.cumulative(Histogram::kBounds.size() - 1) == 3);
    CHECK(h.cumulative(Histogram::kBounds.size()) == 4);
    CHECK(h.count() == 4);
    CHECK(h.sum_seconds() == Approx(60.002041));
}

TEST_CASE("a histogram with bounds of its own takes negative values (the refresh margin)") {
    static constexpr std::array<double, 3> bounds{-60, 0, 60};
    Histogram h(bounds);
    h.record_signed_us(-120'000'000);  // two minutes late: <= -60
    h.record_signed_us(-5'000'000);    // <= 0
    h.record_signed_us(30'000'000);    // <= 60
    h.record_signed_us(600'000'000);   // +Inf only
    CHECK(h.bounds().size() == 3);
    CHECK(h.cumulative(0) == 1);
    CHECK(h.cumulative(1) == 2);
    CHECK(h.cumulative(2) == 3);
    CHECK(h.count() == 4);
    CHECK(h.sum_seconds() == Approx(505.0));
    PromText m;
    m.family("dueq_m_seconds", "histogram", "Margins.");
    m.histogram("dueq_m_seconds", {}, h);
    CHECK(m.text().find("dueq_m_seconds_bucket{le=\"-60\"} 1\n") != std::string::npos);
    CHECK(m.text().find("dueq_m_seconds_sum 505\n") != std::string::npos);
}

TEST_CASE("the Prometheus writer escapes label values and writes histograms whole") {
    PromText m;
    m.family("dueq_x_total", "counter", "Help with a \\ and a\nnewline.");
    m.sample("dueq_x_total", {{"queue", "a\"b\\c\nd"}}, std::uint64_t(3));
    Histogram h;
    h.record_us(100);
    m.family("dueq_t_seconds", "histogram", "Times.");
    m.histogram("dueq_t_seconds", {{"op", "put"}}, h);
    const std::string& t = m.text();
    CHECK(t.find("# HELP dueq_x_total Help with a \\\\ and a\\nnewline.\n") != std::string::npos);
    CHECK(t.find("# TYPE dueq_x_total counter\n") != std::string::npos);
    CHECK(t.find("dueq_x_total{queue=\"a\\\"b\\\\c\\nd\"} 3\n") != std::string::npos);
    CHECK(t.find("dueq_t_seconds_bucket{op=\"put\",le=\"5e-05\"} 0\n") != std::string::npos);
    CHECK(t.find("dueq_t_seconds_bucket{op=\"put\",le=\"0.0001\"} 1\n") != std::string::npos);
    CHECK(t.find("dueq_t_seconds_bucket{op=\"put\",le=\"+Inf\"} 1\n") != std::string::npos);
    CHECK(t.find("dueq_t_seconds_sum{op=\"put\"} 0.0001\n") != std::string::npos);
    CHECK(t.find("dueq_t_seconds_count{op=\"put\"} 1\n") != std::string::npos);
}

TEST_CASE("a JSON log line escapes the message and names the node") {
    auto f = dueq::node::json_log_formatter("n\"1");
    spdlog::details::log_msg msg("dueqd", spdlog::level::warn, "peer \"x\" said \\ and\nthen \x01");
    spdlog::memory_buf_t out;
    f->format(msg, out);
    const std::string line(out.data(), out.size());
    CHECK(line.find(R"("level":"warning")") != std::string::npos);
    CHECK(line.find(R"("node":"n\"1")") != std::string::npos);
    CHECK(line.find(R"("msg":"peer \"x\" said \\ and\nthen \u0001"})") != std::string::npos);
    CHECK(line.back() == '\n');
    CHECK(line.find('\n') == line.size() - 1);  // one line per event, whatever the message
}

namespace {

// An HttpServer on its own loop thread that answers "hello <path>".
struct ServerFixture {
    asio::io_context io;
    std::unique_ptr<HttpServer> server;
    std::thread thread;
    explicit ServerFixture(std::size_t max_connections = 64) {
        server = std::make_unique<HttpServer>(
            io, "127.0.0.1:0",
            [](const HttpRequest& r, HttpServer::Respond respond) {
                respond(HttpResponse{200, "text/plain", "hello " + r.path + "\n"});
            },
            max_connections);
        thread = std::thread([this] {
            auto guard = asio::make_work_guard(io);
            io.run();
        });
    }
    ~ServerFixture() {
        asio::post(io, [this] {
            server->stop();
            io.stop();
        });
        thread.join();
    }
    std::size_t connections() {
        std::promise<std::size_t> p;
        asio::post(io, [&] { p.set_value(server->connections()); });
        return p.get_future().get();
    }
};

// Sends `bytes` on a fresh connection and reads until the server closes it (or 3 s).
std::string http_exchange(std::uint16_t port, const std::string& bytes, bool shut_write = false) {
    asio::io_context io;
    tcp::socket s(io);
    s.connect({asio::ip::make_address("127.0.0.1"), port});
    asio::write(s, asio::buffer(bytes));
    if (shut_write) s.shutdown(tcp::socket::shutdown_send);
    struct timeval tv {
        3, 0
    };
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string out;
    char buf[4096];
    boost::system::error_code ec;
    for (;;) {
        const std::size_t n = s.read_some(asio::buffer(buf), ec);
        if (ec) break;
        out.append(buf, n);
    }
    return out;
}

}  // namespace

TEST_CASE("the admin HTTP server answers GET and HEAD, and refuses the rest without harm") {
    ServerFixture f;
    const auto port = f.server->port();

    SECTION("a GET, and two requests on one kept-alive connection") {
        const auto one =
            http_exchange(port, "GET /status?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        CHECK(one.rfind("HTTP/1.1 200", 0) == 0);
        CHECK(one.find("hello /status\n") != std::string::npos);
        const auto two = http_exchange(port,
                                       "GET /a HTTP/1.1\r\nHost: a\r\n\r\n"
                                       "GET /b HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        CHECK(two.find("hello /a\n") != std::string::npos);
        CHECK(two.find("hello /b\n") != std::string::npos);
    }
    SECTION("HEAD gets the headers and no body") {
        const auto r =
            http_exchange(port, "HEAD /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        CHECK(r.rfind("HTTP/1.1 200", 0) == 0);
        CHECK(r.find("Content-Length: 9") != std::string::npos);
        CHECK(r.find("hello") == std::string::npos);
    }
    SECTION("another method is 405") {
        const auto r =
            http_exchange(port, "DELETE /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        CHECK(r.rfind("HTTP/1.1 405", 0) == 0);
    }
    SECTION("a body, oversized headers or garbage get 400 and a closed connection") {
        CHECK(http_exchange(port, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
                  .rfind("HTTP/1.1 400", 0) == 0);
        const std::string big = "GET / HTTP/1.1\r\nX: " + std::string(20'000, 'a') + "\r\n\r\n";
        CHECK(http_exchange(port, big).rfind("HTTP/1.1 400", 0) == 0);
        static constexpr char kGarbage[] = "\x00\x01\x02 garbage\r\n\r\n";
        CHECK(http_exchange(port, std::string(kGarbage, sizeof kGarbage - 1))
                  .rfind("HTTP/1.1 400", 0) == 0);
        // The server still serves after all of that.
        CHECK(http_exchange(port, "GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n")
                  .find("hello /ok") != std::string::npos);
    }
    SECTION("a client that hangs up mid-request leaves nothing behind") {
        http_exchange(port, "GET /x HTTP/1.1\r\nHo", true);
        for (int i = 0; i < 100 && f.connections() != 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        CHECK(f.connections() == 0);
    }
}

TEST_CASE("connections over the admin server's cap are closed at once") {
    ServerFixture f(2);
    const auto port = f.server->port();
    asio::io_context io;
    tcp::socket a(io), b(io);
    a.connect({asio::ip::make_address("127.0.0.1"), port});
    b.connect({asio::ip::make_address("127.0.0.1"), port});
    for (int i = 0; i < 100 && f.connections() < 2; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(f.connections() == 2);
    // The third gets no answer: it is closed before a byte is read.
    CHECK(http_exchange(port, "GET /x HTTP/1.1\r\nConnection: close\r\n\r\n").empty());
    a.close();
    for (int i = 0; i < 100 && f.connections() > 1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(http_exchange(port, "GET /x HTTP/1.1\r\nConnection: close\r\n\r\n").find("hello /x") !=
          std::string::npos);
}
