// Internals of the fault proxy: one Link per directed peer link, one Session per proxied
// TCP connection, one Pump per direction of a session. Everything runs on the proxy's
// single io_context thread, so nothing here takes a lock.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

namespace dueq::faultproxy {

using Clock = std::chrono::steady_clock;

// What one direction of a link does to its bytes. delay and rate combine; blackhole
// overrides both (nothing flows).
struct DirMode {
    bool blackhole = false;
    bool delay = false;
    std::uint32_t delay_min_ms = 0, delay_max_ms = 0;
    std::uint64_t rate = 0;  // bytes per second; 0 = unlimited

    std::string describe() const;  // "pass", "blackhole", "delay 20 100 rate 5000", ...
    bool operator==(const DirMode&) const = default;
};

enum Dir : int { kUp = 0, kDown = 1 };

class Session;
struct Link;

// Copies bytes from one socket to the other, applying the direction's mode.
class Pump {
  public:
    Pump(Session& session, Dir dir, boost::asio::ip::tcp::socket& src,
         boost::asio::ip::tcp::socket& dst);
    void start() { kick(); }
    void cancel() { timer_.cancel(); }
    // The link's mode for this direction changed: resume, reschedule, refill.
    void mode_changed(const DirMode& before);
    bool finished() const { return shut_; }

    // Held bytes per connection and direction above which the pump stops reading, so a
    // slow or silent direction leaves its data in the kernel buffers, not in our memory.
    // A delayed direction must hold what is "on the wire" (delay x throughput); without a
    // delay a few chunks keep the pipe busy and the sender still feels backpressure.
    static constexpr std::size_t kMaxHeld = 8u << 20;
    static constexpr std::size_t kMaxHeldUndelayed = 256u << 10;
    static constexpr std::size_t kChunk = 64u << 10;

  private:
    struct Chunk {
        std::vector<char> data;
        std::size_t off = 0;
        Clock::time_point release;
    };
    const DirMode& mode() const;
    void kick() {
        read_more();
        write_more();
    }
    void read_more();
    void on_read(boost::system::error_code ec, std::size_t n);
    void write_more();
    void wait_until(Clock::time_point t);
    double refill(Clock::time_point now);

    Session& s_;
    Dir dir_;
    boost::asio::ip::tcp::socket& src_;
    boost::asio::ip::tcp::socket& dst_;
    boost::asio::steady_timer timer_;
    std::uint64_t timer_gen_ = 0;  // a wait whose generation is stale was superseded
    std::vector<char> rbuf_;       // one read's bytes, copied into a right-sized chunk
    std::deque<Chunk> held_;
    std::size_t held_bytes_ = 0;
    Clock::time_point last_release_{};
    double tokens_ = 0;
    Clock::time_point refilled_{};
    bool reading_ = false, writing_ = false;
    bool eof_ = false;     // the source said FIN: pass it on once the held bytes are out
    bool failed_ = false;  // the source broke while blackholed: close once the hole lifts
    bool shut_ = false;    // FIN passed on to the destination
};

class Session : public std::enable_shared_from_this<Session> {
  public:
    Session(Link& link, boost::asio::ip::tcp::socket client);
    void start();  // connects upstream, then starts both pumps
    void close();  // idempotent; both sockets, both pumps
    void mode_changed(Dir dir, const DirMode& before);
    void pump_finished();  // one direction passed its FIN on
    bool closed() const { return closed_; }
    Link& link() { return *link_; }

  private:
    friend class Pump;
    Link* link_;
    boost::asio::ip::tcp::socket client_, server_;
    std::array<Pump, 2> pumps_;
    bool started_ = false, closed_ = false;
};

struct Link : std::enable_shared_from_this<Link> {
    Link(boost::asio::io_context& io, std::string name, boost::asio::ip::tcp::endpoint listen,
         boost::asio::ip::tcp::endpoint target, std::mt19937_64& rng);
    void start_accepting();
    void stop();              // closes the listener and every connection
    std::size_t close_all();  // closes every current connection; returns how many
    void set_mode(Dir dir, const DirMode& m);

    boost::asio::io_context& io;
    std::string name;
    boost::asio::ip::tcp::endpoint target;
    boost::asio::ip::tcp::acceptor acceptor;
    boost::asio::steady_timer retry_timer;  // after accept errors such as EMFILE
    std::mt19937_64& rng;
    std::array<DirMode, 2> modes{};
    bool rejecting = false;
    bool stopped = false;
    std::unordered_set<std::shared_ptr<Session>> sessions;
    std::array<std::uint64_t, 2> bytes{};  // forwarded up / down, over all connections
    std::uint64_t accepted = 0, rejected = 0, connect_failures = 0;
};

}  // namespace dueq::faultproxy
