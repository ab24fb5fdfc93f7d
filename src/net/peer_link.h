// One TCP connection of the peer mesh. It cuts the byte stream into frames (4-byte
// big-endian length, then the payload; length 0 is a keep-alive and is never passed on)
// and writes queued frames in batches, several per async_write. It knows nothing about
// handshakes or membership: its owner, PeerMesh, decides what frames mean and when the
// link closes. Single-threaded: everything runs on the io_context's thread.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/tls.h"

namespace dueq::net {

class PeerLink;

// What a link tells its owner, always on the io_context's thread. The link holds its owner
// weakly, so pending handlers may outlive the owner; they then do nothing.
class PeerLinkOwner {
  public:
    virtual ~PeerLinkOwner() = default;
    // A dialed link's TCP connect succeeded.
    virtual void on_link_connected(const std::shared_ptr<PeerLink>& link) = 0;
    // One frame, keep-alives left out. `payload` is valid until the call returns.
    virtual void on_link_frame(const std::shared_ptr<PeerLink>& link, std::string_view payload) = 0;
    // The link closed by itself (I/O error, EOF, oversized frame) or through close().
    virtual void on_link_closed(const std::shared_ptr<PeerLink>& link,
                                const std::string& reason) = 0;
};

class PeerLink : public std::enable_shared_from_this<PeerLink> {
  public:
    using Clock = std::chrono::steady_clock;
    // Owned by PeerMesh; the link itself only reads and writes.
    enum class State {
        connecting,   // dialed, TCP connect in progress
        handshaking,  // waiting for the other side's hello
        proving,      // hellos exchanged; waiting for the other side's proof
        active,       // the one connection to its peer that send() uses
        superseded,   // lost the duplicate race; waiting for the other side to close it
    };

    // `dialed`: the socket is fresh and connect() follows; otherwise it was accepted.
    // `tls`: the link runs TLS with this context (a client context when dialed, a server
    // one when accepted); frames go through it both ways. Null: plaintext.
    PeerLink(boost::asio::ip::tcp::socket socket, bool dialed, std::weak_ptr<PeerLinkOwner> owner,
             std::shared_ptr<const TlsContext> tls = nullptr);

    void connect(const boost::asio::ip::tcp::endpoint& to);
    void start_reading();
    // Incoming frames longer than this close the link (logged as a warning).
    void set_frame_limit(std::size_t bytes) { frame_limit_ = bytes; }
    // Queues one frame; the link adds the length prefix. Empty = keep-alive. No-op once closed.
    void send(std::string payload);
    // Hands over the payloads not yet given to the socket (keep-alives left out).
    std::vector<std::string> take_unsent();
    // Closes the socket and drops what is queued. Tells the owner (on_link_closed) unless
    // `notify` is false. Idempotent.
    void close(const std::string& reason, bool notify = true);
    // Closes once what is queued has been written (a refusal that explains itself).
    void close_when_sent(const std::string& reason);

    bool open() const { return open_; }
    bool dialed() const { return dialed_; }
    std::size_t queued_bytes() const { return queued_bytes_; }  // length prefixes included
    Clock::time_point last_received() const { return last_received_; }
    Clock::time_point last_sent() const { return last_sent_; }  // last frame queued
    const std::string& remote() const { return remote_; }       // "ip:port", for logs
    bool tls() const { return tls_ != nullptr; }
    // The names in the other side's verified certificate (none without TLS).
    std::vector<std::string> certificate_names() const;

    // Owned by PeerMesh:
    State state = State::handshaking;
    std::uint64_t peer_id = 0;  // dialed: whom we dialed; accepted: the sender, once verified
    std::uint64_t peer_incarnation = 0;
    std::uint64_t peer_data_id = 0;  // the data id its hello named
    Clock::time_point deadline;  // handshaking: give up then; superseded: close then
    std::string dialer_hello, acceptor_hello;  // the handshake's transcript, as sent
    std::uint64_t claimed_id = 0;  // accepted: the sender its hello names, until proved

  private:
    struct OutFrame {
        std::array<unsigned char, 4> prefix;
        std::string payload;
    };
    void read_now();
    // TLS: ciphertext from the socket into the session, plaintext out of it into in_.
    bool feed_tls(std::size_t n);
    void consume();
    void write_more();
    void on_written(boost::system::error_code ec);

    boost::asio::ip::tcp::socket socket_;
    std::unique_ptr<TlsSession> tls_;
    std::vector<char> tls_in_;
    std::string tls_out_;  // ciphertext being written
    bool tls_checked_ = false;  // the first byte read was looked at
    std::weak_ptr<PeerLinkOwner> owner_;
    bool dialed_;
    std::string remote_;
    std::vector<char> in_;
    std::size_t in_len_ = 0;
    std::size_t frame_limit_;
    // Frames waiting, and frames handed to the async_write in flight (kept alive until it
    // completes: the socket reads their bytes).
    std::vector<OutFrame> out_queue_, out_flight_;
    std::vector<boost::asio::const_buffer> out_bufs_;  // out_flight_'s, while it is written
    std::size_t queued_bytes_ = 0;  // both vectors
    bool writing_ = false, open_ = true;
    std::string close_when_sent_;  // set: close with this reason once the queue is written
    Clock::time_point last_received_, last_sent_;
};

}  // namespace dueq::net
