// Test harness for the fault proxy: FaultProxy runs on its own thread; the test plays both
// the dialer and the target with plain non-blocking sockets and poll() deadlines, so no
// check can hang.
#pragma once

#include <catch2/catch.hpp>

#include <poll.h>

#include <atomic>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "faultproxy/fault_proxy.h"
#include "loopback_ports.h"

namespace dueq::faultproxy::test {

namespace asio = boost::asio;
using asio::ip::tcp;
using dueq::faultproxy::FaultProxy;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

inline tcp::endpoint loopback(std::uint16_t port) {
    return {asio::ip::address_v4::loopback(), port};
}

// Waits for `events` on fd until the deadline; false on timeout.
inline bool wait_fd(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, int(std::max<std::int64_t>(0, left.count())));
        if (r > 0) return true;
        if (r == 0 || errno != EINTR) return false;
    }
}

struct ReadResult {
    std::string data;
    bool closed = false;  // EOF or error
};

// Reads until `n` bytes, EOF/error, or the timeout, whichever comes first.
inline ReadResult read_n(tcp::socket& s, std::size_t n, Clock::duration timeout) {
    ReadResult r;
    const auto deadline = Clock::now() + timeout;
    char buf[65536];
    while (r.data.size() < n) {
        if (!wait_fd(s.native_handle(), POLLIN, deadline)) break;
        boost::system::error_code ec;
        const auto got =
            s.read_some(asio::buffer(buf, std::min(sizeof buf, n - r.data.size())), ec);
        if (ec == asio::error::would_block) continue;
        if (ec) {
            r.closed = true;
            break;
        }
        r.data.append(buf, got);
    }
    return r;
}

inline bool write_all(tcp::socket& s, std::string_view data, Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!data.empty()) {
        if (!wait_fd(s.native_handle(), POLLOUT, deadline)) return false;
        boost::system::error_code ec;
        const auto n = s.write_some(asio::buffer(data.data(), data.size()), ec);
        if (ec == asio::error::would_block) continue;
        if (ec) return false;
        data.remove_prefix(n);
    }
    return true;
}

inline std::string pattern(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::string s(n, '\0');
    for (auto& c : s)
        c = char(rng());
    return s;
}

// A line-based control connection.
struct Control {
    tcp::socket sock;
    std::string in;

    Control(asio::io_context& io, std::uint16_t port) : sock(io) {
        sock.connect(loopback(port));
        sock.non_blocking(true);
    }
    std::string cmd(const std::string& line) {
        if (!write_all(sock, line + "\n", 2s)) return "(write failed)";
        const auto deadline = Clock::now() + 3s;
        while (in.find('\n') == std::string::npos) {
            auto r = read_n(sock, 1, deadline - Clock::now());
            if (r.data.empty()) return r.closed ? "(closed)" : "(timeout)";
            in += r.data;
        }
        const auto nl = in.find('\n');
        std::string reply = in.substr(0, nl);
        in.erase(0, nl + 1);
        return reply;
    }
};

struct Harness {
    asio::io_context io;   // the proxy's, run on `thread`
    asio::io_context tio;  // the test's sockets: blocking calls only, never run
    tcp::acceptor target{tio, loopback(0)};
    std::uint16_t dead_port = 0;  // nothing listens there
    std::unique_ptr<FaultProxy> proxy;
    std::uint16_t link_port = 0, dead_link_port = 0;
    std::atomic<bool> ran_out{false};
    std::thread thread;
    std::unique_ptr<Control> ctl;

    Harness() {
        dead_port = free_loopback_port();  // not one the proxy's listeners could be given
        target.non_blocking(true);
        proxy = std::make_unique<FaultProxy>(
            io, loopback(0),
            std::vector<dueq::faultproxy::LinkSpec>{{"n1-n2", loopback(0), target.local_endpoint()},
                                                    {"n1-n3", loopback(0), loopback(dead_port)}},
            42);
        link_port = proxy->link_port("n1-n2");
        dead_link_port = proxy->link_port("n1-n3");
        proxy->start();
        thread = std::thread([this] {
            io.run();
            ran_out = true;
        });
        ctl = std::make_unique<Control>(tio, proxy->control_port());
    }
    // Stops the proxy; true when its io_context then ran out of work by itself.
    bool shutdown() {
        if (!thread.joinable()) return true;
        asio::post(io, [this] { proxy->stop(); });
        const auto deadline = Clock::now() + 5s;
        while (!ran_out && Clock::now() < deadline)
            std::this_thread::sleep_for(5ms);
        const bool clean = ran_out;
        if (!clean) io.stop();
        thread.join();
        return clean;
    }
    ~Harness() { shutdown(); }

    std::string cmd(const std::string& line) { return ctl->cmd(line); }
    tcp::socket dial(std::uint16_t port) {
        tcp::socket s(tio);
        s.connect(loopback(port));
        s.set_option(tcp::no_delay(true));
        s.non_blocking(true);
        return s;
    }
    std::optional<tcp::socket> accept_target(Clock::duration timeout) {
        if (!wait_fd(target.native_handle(), POLLIN, Clock::now() + timeout)) return std::nullopt;
        tcp::socket s(tio);
        boost::system::error_code ec;
        target.accept(s, ec);
        if (ec) return std::nullopt;
        s.set_option(tcp::no_delay(true));
        s.non_blocking(true);
        return s;
    }
    // A dialer and the target's end of the same proxied connection.
    std::pair<tcp::socket, tcp::socket> connect_pair() {
        auto c = dial(link_port);
        auto t = accept_target(3s);
        REQUIRE(t);
        return {std::move(c), std::move(*t)};
    }
};

}  // namespace dueq::faultproxy::test
