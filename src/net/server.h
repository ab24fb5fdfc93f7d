// The client listener: accepts TCP connections and cuts their byte streams into
// frames. Runs on the io_context it is given; every callback runs on that context's
// thread (the node's event loop), so the node needs no locks.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/limits.h"

namespace dueq::net {

class Connection : public std::enable_shared_from_this<Connection> {
  public:
    using FrameHandler = std::function<void(const std::shared_ptr<Connection>&, std::string_view)>;
    using CloseHandler = std::function<void(const std::shared_ptr<Connection>&)>;

    Connection(boost::asio::ip::tcp::socket socket, const Limits& limits, FrameHandler on_frame,
               CloseHandler on_close);
    void start();
    // Queues one complete frame (length prefix included). Frames queued while a write is
    // in flight go out together in the next write. No-op once closed.
    void send(std::string frame);
    // Sends what is queued, then closes.
    void close_after_send();
    void close();
    bool open() const { return open_; }

    std::uint64_t session = 0;  // owned by the node
    bool authorized = false;    // said hello with the right token (when one is configured)
    std::string peer;           // "ip:port", for logs

  private:
    void read_more();
    void consume();
    void write_more();
    void on_written(boost::system::error_code ec);

    boost::asio::ip::tcp::socket socket_;
    const Limits& limits_;
    FrameHandler on_frame_;
    CloseHandler on_close_;
    std::vector<char> in_;
    std::size_t in_len_ = 0;
    std::vector<std::string> out_queue_, out_flight_;
    // Bytes of replies not yet written. Above kMaxUnsentBytes the connection stops
    // reading and answering, so a client that never reads cannot grow the node's memory.
    std::size_t unsent_bytes_ = 0;
    bool paused_ = false;
    static constexpr std::size_t kMaxUnsentBytes = 32u << 20;
    bool writing_ = false, open_ = true, closing_ = false;
};

class Server {
  public:
    Server(boost::asio::io_context& io, const std::string& listen, const Limits& limits,
           Connection::FrameHandler on_frame, Connection::CloseHandler on_close);
    std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
    void stop();

  private:
    void accept();
    boost::asio::io_context& io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer retry_;  // after a failed accept (out of descriptors)
    const Limits& limits_;
    Connection::FrameHandler on_frame_;
    Connection::CloseHandler on_close_;
};

// "host:port" -> endpoint; throws std::invalid_argument with a clear message.
boost::asio::ip::tcp::endpoint parse_endpoint(const std::string& host_port);

}  // namespace dueq::net
