// The client listener: accepts TCP connections and cuts their byte streams into
// frames. Runs on the io_context it is given; every callback runs on that context's
// thread (the node's event loop), so the node needs no locks.
//
// What one client can cost is bounded (net/limits.h): the receive buffer grows only as
// bytes arrive (a declared length reserves nothing), connections are capped in total and
// per address, requests in flight per connection are capped (reading pauses at the cap),
// a started frame must finish within frame_timeout_ms, and a connection with nothing in
// flight is closed after idle_timeout_ms of silence.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "net/limits.h"
#include "net/log_limiter.h"
#include "net/readable_set.h"
#include "net/tls.h"

namespace dueq::net {

struct ConnectionRegistry;

class Connection : public std::enable_shared_from_this<Connection> {
  public:
    using Clock = std::chrono::steady_clock;
    using FrameHandler = std::function<void(const std::shared_ptr<Connection>&, std::string_view)>;
    using CloseHandler = std::function<void(const std::shared_ptr<Connection>&)>;

    // `tls`: the server's TLS context (null: plaintext); the connection keeps it.
    Connection(boost::asio::ip::tcp::socket socket, const Limits& limits, FrameHandler on_frame,
               CloseHandler on_close, std::shared_ptr<const TlsContext> tls = nullptr);
    void start();
    // Queues one complete frame (length prefix included). Every frame sent answers one
    // request read from this connection. Frames queued while a write is in flight go out
    // together in the next write. No-op once closed.
    void send(std::string frame);
    // Sends what is queued, then closes.
    void close_after_send();
    void close();
    bool open() const { return open_; }
    // Closes the connection if a frame is overdue or it has been idle too long.
    void check_deadlines(Clock::time_point now);
    std::size_t buffer_bytes() const { return in_.size(); }

    std::uint64_t session = 0;  // owned by the node
    bool authorized = false;    // said hello with the right token (when one is configured)
    std::string peer;           // "ip:port", for logs
    std::string address;        // the peer's IP address, for the per-address cap
    // The names in the client's verified TLS certificate (none without one).
    std::vector<std::string> certificate_names() const;

  private:
    friend class Server;
    // Runs body(*this) once from the event loop, however often asked while `posted`.
    template <class Body>
    void post_once(bool& posted, Body body);
    void read_now();
    void read_later();
    void consume();
    void resume_later();
    void flush_later();
    void write_more();
    void on_written(boost::system::error_code ec);
    // TLS (server_tls.cpp): reads ciphertext, hands on the plaintext frames; encrypts the
    // flight about to be written.
    void read_tls();
    bool drain_tls();
    void refuse_plaintext();
    void encrypt_flight();

    boost::asio::ip::tcp::socket socket_;
    std::unique_ptr<TlsSession> tls_;
    std::vector<char> tls_in_;  // ciphertext read from the socket
    std::string tls_out_;       // ciphertext being written
    bool tls_checked_ = false;  // the first byte was looked at
    const Limits& limits_;
    FrameHandler on_frame_;
    CloseHandler on_close_;
    std::shared_ptr<ConnectionRegistry> registry_;  // set by the server
    std::vector<char> in_;
    std::size_t in_len_ = 0;
    std::vector<std::string> out_queue_, out_flight_;
    std::vector<boost::asio::const_buffer> out_bufs_;  // out_flight_'s, while it is written
    // Bytes of replies not yet written. Above kMaxUnsentBytes the connection stops
    // reading and answering, so a client that never reads cannot grow the node's memory.
    std::size_t unsent_bytes_ = 0;
    std::size_t in_flight_ = 0;  // requests handed on, not answered yet
    bool paused_ = false, resume_posted_ = false, read_posted_ = false;
    static constexpr std::size_t kMaxUnsentBytes = 32u << 20;
    bool writing_ = false, flush_posted_ = false, open_ = true, closing_ = false;
    Clock::time_point last_activity_ = Clock::now();  // bytes read or an answer written
    Clock::time_point partial_since_{};  // when an incomplete frame began; {} = none
};

class Server {
  public:
    Server(boost::asio::io_context& io, const std::string& listen, const Limits& limits,
           Connection::FrameHandler on_frame, Connection::CloseHandler on_close);
    ~Server();
    std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
    // Stops accepting and closes every connection (the close handler runs for each).
    void stop();
    std::size_t connections() const;
    // TLS for connections accepted from now on (null: plaintext). Open ones keep theirs.
    void set_tls(std::shared_ptr<const TlsContext> tls) { tls_ = std::move(tls); }
    const std::shared_ptr<const TlsContext>& tls() const { return tls_; }

  private:
    void accept();
    void on_readable(Connection* key);
    void refuse(boost::asio::ip::tcp::socket& socket, const std::string& address,
                const std::string& why);
    void arm_sweep();
    boost::asio::io_context& io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer retry_;  // after a failed accept (out of descriptors)
    boost::asio::steady_timer sweep_;  // frame and idle deadlines
    const Limits& limits_;
    Connection::FrameHandler on_frame_;
    Connection::CloseHandler on_close_;
    std::shared_ptr<ConnectionRegistry> registry_;
    ReadableSet readable_;
    std::shared_ptr<const TlsContext> tls_;
    LogLimiter refusal_log_{std::chrono::minutes(1)};
    bool stopped_ = false;
};

// "host:port" -> endpoint; throws std::invalid_argument with a clear message.
boost::asio::ip::tcp::endpoint parse_endpoint(const std::string& host_port);

}  // namespace dueq::net
