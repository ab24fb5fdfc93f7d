#include "net/server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "net/buffer_view.h"
#include "net/frame.h"
#include "net/write_now.h"

namespace dueq::net {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr std::size_t kInitialBuffer = 16 * 1024;
}  // namespace

// Every open connection of a server, and how many come from each address. It owns them
// while they are open: a connection paused at its in-flight cap has no read or write
// pending that would keep it alive. Shared with the connections, which may outlive the
// server (handlers still pending).
struct ConnectionRegistry {
    std::unordered_map<Connection*, std::shared_ptr<Connection>> all;
    std::unordered_map<std::string, std::size_t> per_address;
    ReadableSet* readable = nullptr;  // the server's, until it stops

    void add(const std::shared_ptr<Connection>& c) {
        all.emplace(c.get(), c);
        ++per_address[c->address];
    }
    void remove(Connection* c) {
        auto it = per_address.find(c->address);
        if (all.erase(c) == 0) return;
        if (it != per_address.end() && --it->second == 0) per_address.erase(it);
    }
};

Connection::Connection(tcp::socket socket, const Limits& limits, FrameHandler on_frame,
                       CloseHandler on_close, std::shared_ptr<const TlsContext> tls)
    : socket_(std::move(socket)),
      tls_(tls ? std::make_unique<TlsSession>(std::move(tls)) : nullptr),
      limits_(limits),
      on_frame_(std::move(on_frame)),
      on_close_(std::move(on_close)),
      in_(kInitialBuffer) {
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    auto ep = socket_.remote_endpoint(ec);
    if (!ec) {
        address = ep.address().to_string();
        peer = address + ":" + std::to_string(ep.port());
    }
}

void Connection::start() {
    boost::system::error_code ec;
    socket_.non_blocking(true, ec);  // read_now's reads return would_block, never wait
    if (ec) return close();
    if (!registry_ || !registry_->readable ||
        !registry_->readable->add(socket_.native_handle(), this)) {
        spdlog::warn("client {}: cannot watch the socket for reading: {}; closing", peer,
                     std::strerror(errno));
        return close();
    }
    read_now();
}

template <class Body>
void Connection::post_once(bool& posted, Body body) {
    if (posted) return;
    posted = true;
    // `posted` is a member of the connection `self` keeps alive.
    asio::post(socket_.get_executor(), [self = shared_from_this(), &posted, body] {
        posted = false;
        body(*self);
    });
}

// Reads what the socket holds. A read that leaves room in the buffer has emptied the
// socket: the server's ReadableSet reports it again when more arrives. A sender that keeps
// the buffer full gets a few reads, then waits its turn behind the other sockets and
// timers.
void Connection::read_now() {
    if (tls_) return read_tls();
    for (int reads = 0; open_ && !closing_ && !paused_; ++reads) {
        if (reads == kReadsPerTurn) return read_later();
        // The buffer grows only once bytes have filled it: a declared frame length
        // reserves nothing, so memory stays within twice what the client actually sent.
        if (in_len_ == in_.size())
            in_.resize(std::min(in_.size() * 2, limits_.max_frame_bytes + 4));
        const std::size_t room = in_.size() - in_len_;
        if (room == 0) return close();  // cannot happen: a full buffer holds a whole frame
        boost::system::error_code ec;
        const std::size_t n = socket_.read_some(asio::buffer(in_.data() + in_len_, room), ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again) return;
        if (ec) return close();
        in_len_ += n;
        last_activity_ = Clock::now();
        consume();
        if (n < room) return;
    }
}

// The socket may still hold bytes, and no new arrival may come to report them.
void Connection::read_later() {
    post_once(read_posted_, [](Connection& c) { c.read_now(); });
}

void Connection::consume() {
    std::size_t pos = 0;
    auto self = shared_from_this();
    while (open_ && !closing_ && in_len_ - pos >= 4) {
        if (unsent_bytes_ > kMaxUnsentBytes || in_flight_ >= limits_.max_in_flight) {
            paused_ = true;  // an answer going out resumes (on_written, send)
            break;
        }
        const auto* p = reinterpret_cast<const unsigned char*>(in_.data() + pos);
        const std::size_t len = (std::size_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
        if (len > limits_.max_frame_bytes) {
            send(error_frame(0, queue::Code::too_large,
                             "frame of " + std::to_string(len) + " bytes exceeds max_frame_bytes " +
                                 std::to_string(limits_.max_frame_bytes) + "; closing"));
            close_after_send();
            return;
        }
        if (in_len_ - pos < 4 + len) break;
        ++in_flight_;
        on_frame_(self, std::string_view(in_.data() + pos + 4, len));
        pos += 4 + len;
    }
    if (!open_) return;
    if (pos > 0) {
        std::memmove(in_.data(), in_.data() + pos, in_len_ - pos);
        in_len_ -= pos;
    }
    // The frame deadline runs while bytes wait and no frame completes.
    if (in_len_ == 0)
        partial_since_ = {};
    else if (pos > 0 || partial_since_ == Clock::time_point{})
        partial_since_ = last_activity_;
    // A large frame grew the buffer; give the memory back once it is consumed.
    if (in_len_ < kInitialBuffer && in_.size() > 1024 * 1024) {
        in_.resize(kInitialBuffer);
        in_.shrink_to_fit();
    }
}

// Resumes reading from the event loop, not from inside a frame handler (which runs
// within consume()).
void Connection::resume_later() {
    post_once(resume_posted_, [](Connection& c) {
        if (!c.open_ || !c.paused_ || c.in_flight_ >= c.limits_.max_in_flight ||
            c.unsent_bytes_ > kMaxUnsentBytes / 2)
            return;
        c.paused_ = false;
        if (c.in_len_ > 0) c.partial_since_ = Clock::now();
        c.consume();
        c.read_now();
    });
}

void Connection::send(std::string frame) {
    if (!open_) return;
    if (in_flight_ > 0) --in_flight_;
    unsent_bytes_ += frame.size();
    out_queue_.push_back(std::move(frame));
    if (!writing_) {
        // The client's turn starts with the first answer after a quiet spell: a request
        // held longer than idle_timeout_ms (a blocking take) is not time the client left
        // its answers unread. Without this, a deadline check that lands before the write
        // is done closes the connection with the answer in it.
        if (!flush_posted_) last_activity_ = Clock::now();
        flush_later();
    }
    if (paused_) resume_later();
}

// Answers come in bursts: one applied batch answers many requests of a pipelining
// client. Writing once the burst is over sends them in one system call, not one each.
void Connection::flush_later() {
    post_once(flush_posted_, [](Connection& c) {
        if (c.open_ && !c.writing_) c.write_more();
    });
}

void Connection::write_more() {
    if (out_queue_.empty() && !(tls_ && tls_->has_output())) {
        writing_ = false;
        if (closing_) close();
        return;
    }
    writing_ = true;
    out_flight_.swap(out_queue_);
    out_queue_.clear();
    out_bufs_.clear();  // its capacity stays: no allocation per write
    if (tls_) {
        encrypt_flight();
    } else {
        for (const auto& f : out_flight_)
            out_bufs_.emplace_back(asio::buffer(f));
    }
    boost::system::error_code ec;
    if (!write_now(socket_, out_bufs_, ec) || out_bufs_.empty()) return on_written(ec);
    asio::async_write(socket_, BufferView{&out_bufs_},
                      [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                          self->on_written(ec);
                      });
}

void Connection::on_written(boost::system::error_code ec) {
    for (const auto& f : out_flight_)
        unsent_bytes_ -= f.size();
    out_flight_.clear();
    if (ec) {
        close();
        return;
    }
    last_activity_ = Clock::now();
    if (paused_) resume_later();
    write_more();
}

void Connection::check_deadlines(Clock::time_point now) {
    if (!open_ || closing_) return;
    if (!paused_ && partial_since_ != Clock::time_point{} &&
        now - partial_since_ > std::chrono::milliseconds(limits_.frame_timeout_ms)) {
        spdlog::debug("client {}: frame not complete within {} ms; closing", peer,
                      limits_.frame_timeout_ms);
        send(error_frame(0, queue::Code::timeout,
                         "frame not complete within frame_timeout_ms " +
                             std::to_string(limits_.frame_timeout_ms) + "; closing"));
        return close_after_send();
    }
    // Idle: nothing in flight and nothing received; or answers the client never reads.
    const bool waiting_on_client = in_flight_ == 0 || writing_;
    if (waiting_on_client &&
        now - last_activity_ > std::chrono::milliseconds(limits_.idle_timeout_ms)) {
        spdlog::debug("client {}: idle for {} ms; closing", peer, limits_.idle_timeout_ms);
        close();
    }
}

// Closes from the event loop, not from inside a frame handler: write_more may finish
// the write, and with it the connection, before it returns.
void Connection::close_after_send() {
    closing_ = true;
    if (!writing_) flush_later();  // closes once the queue is written, or then if it is empty
}

void Connection::close() {
    if (!open_) return;
    auto self = shared_from_this();  // the registry may hold the last reference
    open_ = false;
    if (registry_ && registry_->readable) registry_->readable->remove(socket_.native_handle());
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    out_queue_.clear();
    unsent_bytes_ = 0;
    if (registry_) registry_->remove(this);
    if (on_close_) on_close_(self);
}

tcp::endpoint parse_endpoint(const std::string& host_port) {
    auto colon = host_port.rfind(':');
    if (colon == std::string::npos)
        throw std::invalid_argument("address '" + host_port + "' is not host:port");
    std::string host = host_port.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    int port = 0;
    try {
        port = std::stoi(host_port.substr(colon + 1));
    } catch (...) {
        port = -1;
    }
    if (port < 0 || port > 65535)
        throw std::invalid_argument("address '" + host_port + "' has no valid port");
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
    if (ec)
        throw std::invalid_argument("address '" + host_port + "': '" + host +
                                    "' is not an IP address");
    return tcp::endpoint(addr, std::uint16_t(port));
}

Server::Server(asio::io_context& io, const std::string& listen, const Limits& limits,
               Connection::FrameHandler on_frame, Connection::CloseHandler on_close)
    : io_(io),
      acceptor_(io),
      retry_(io),
      sweep_(io),
      limits_(limits),
      on_frame_(std::move(on_frame)),
      on_close_(std::move(on_close)),
      registry_(std::make_shared<ConnectionRegistry>()),
      readable_(io, [this](void* key) { on_readable(static_cast<Connection*>(key)); }) {
    registry_->readable = &readable_;
    auto ep = parse_endpoint(listen);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    accept();
    arm_sweep();
}

Server::~Server() {
    stop();
}

std::size_t Server::connections() const {
    return registry_->all.size();
}

// A socket reported readable: it may have closed since, within the same drain.
void Server::on_readable(Connection* key) {
    auto it = registry_->all.find(key);
    if (it == registry_->all.end()) return;
    const std::shared_ptr<Connection> conn = it->second;  // reading may close it
    conn->read_now();
}

void Server::accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || stopped_) return;
        if (!ec) {
            boost::system::error_code e;
            const auto ep = socket.remote_endpoint(e);
            const std::string address = e ? std::string() : ep.address().to_string();
            auto at = registry_->per_address.find(address);
            const std::size_t from_address = at == registry_->per_address.end() ? 0 : at->second;
            if (registry_->all.size() >= limits_.max_connections) {
                refuse(socket, address,
                       "the node has max_connections " + std::to_string(limits_.max_connections) +
                           " open");
            } else if (from_address >= limits_.max_connections_per_address) {
                refuse(socket, address,
                       "this address has max_connections_per_address " +
                           std::to_string(limits_.max_connections_per_address) + " open");
            } else {
                auto conn = std::make_shared<Connection>(std::move(socket), limits_, on_frame_,
                                                         on_close_, tls_);
                conn->registry_ = registry_;
                registry_->add(conn);
                conn->start();
            }
            return accept();
        }
        // Out of descriptors, most likely: accepting again at once would fail at once.
        spdlog::warn("accept failed: {}; retrying in 100 ms", ec.message());
        retry_.expires_after(std::chrono::milliseconds(100));
        retry_.async_wait([this](boost::system::error_code e) {
            if (!e) accept();
        });
    });
}

void Server::refuse(tcp::socket& socket, const std::string& address, const std::string& why) {
    std::uint64_t suppressed = 0;
    if (refusal_log_.allow(address, suppressed))
        spdlog::warn("refused a client connection from {}: {}{}", address, why,
                     LogLimiter::suppressed_note(suppressed));
    // Best effort, without waiting: the client learns why instead of seeing a bare close.
    const auto frame = error_frame(0, queue::Code::unavailable, "connection refused: " + why);
    boost::system::error_code ec;
    socket.non_blocking(true, ec);
    socket.write_some(asio::buffer(frame), ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
}

void Server::arm_sweep() {
    const auto every = std::clamp<std::uint32_t>(
        std::min(limits_.frame_timeout_ms, limits_.idle_timeout_ms) / 4, 20, 1000);
    sweep_.expires_after(std::chrono::milliseconds(every));
    sweep_.async_wait([this](boost::system::error_code ec) {
        if (ec || stopped_) return;
        const auto now = Connection::Clock::now();
        std::vector<std::shared_ptr<Connection>> conns;  // checking may close (and unregister)
        conns.reserve(registry_->all.size());
        for (const auto& [ptr, c] : registry_->all)
            conns.push_back(c);
        for (const auto& c : conns)
            c->check_deadlines(now);
        arm_sweep();
    });
}

void Server::stop() {
    stopped_ = true;
    boost::system::error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
    sweep_.cancel();
    // Connections and the registry point at each other; closing them breaks the cycle.
    std::vector<std::shared_ptr<Connection>> conns;
    for (const auto& [ptr, c] : registry_->all)
        conns.push_back(c);
    for (const auto& c : conns)
        c->close();
    registry_->readable = nullptr;
    readable_.stop();
}

}  // namespace dueq::net
