// The socket half shared by the backends: a TCP connection with a write queue (requests
// sent while a write is under way are batched into the next one) and a read loop that
// hands the bytes received to the protocol's consume().
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dueq::net {
class TlsContext;
class TlsSession;
}  // namespace dueq::net

namespace dueq::bench {

class Stream {
  public:
    // Connects synchronously with a deadline, then, with `tls`, runs the TLS handshake
    // (net/tls.h) before anything else. Throws std::runtime_error on failure.
    Stream(boost::asio::io_context& io, const std::string& address, int timeout_ms,
           std::shared_ptr<const net::TlsContext> tls = nullptr);
    virtual ~Stream();

    // Appends bytes to the outgoing queue and writes them as soon as the socket is free.
    void send(std::string_view bytes);
    // Starts reading; call once, from a shared_ptr-owned object (the loop keeps it alive).
    void start_reading(std::shared_ptr<Stream> self);
    // Reads exactly n bytes synchronously (for greetings before the loop starts).
    std::string read_exactly(std::size_t n);
    void shutdown();
    bool stream_broken() const { return broken_; }

  protected:
    // Called with the unconsumed bytes; returns how many it consumed (whole messages).
    virtual std::size_t consume(const char* data, std::size_t size) = 0;
    // Called once when the socket fails or is shut down.
    virtual void on_broken(const std::string& why) = 0;

  private:
    void flush(std::shared_ptr<Stream> self);
    void read_more(std::shared_ptr<Stream> self);
    void fail(const std::string& why);

    void handshake(const std::string& address);
    void on_bytes(std::shared_ptr<Stream> self, const char* data, std::size_t n);

    boost::asio::ip::tcp::socket socket_;
    std::unique_ptr<net::TlsSession> tls_;
    std::vector<char> raw_;  // ciphertext read, with TLS
    std::string pending_, writing_;
    bool write_busy_ = false;
    bool reading_ = false;
    bool broken_ = false;
    std::vector<char> in_;
    std::size_t in_size_ = 0;
    std::weak_ptr<Stream> self_;
};

// "host:port" → endpoint (numeric hosts and "localhost" only: the benchmark runs on
// loopback). Throws std::runtime_error.
boost::asio::ip::tcp::endpoint parse_endpoint(const std::string& address);

}  // namespace dueq::bench
