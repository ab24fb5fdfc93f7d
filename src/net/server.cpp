#include "net/server.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <stdexcept>

#include "net/frame.h"

namespace dueq::net {

namespace asio = boost::asio;
using asio::ip::tcp;

Connection::Connection(tcp::socket socket, const Limits& limits, FrameHandler on_frame,
                       CloseHandler on_close)
    : socket_(std::move(socket)),
      limits_(limits),
      on_frame_(std::move(on_frame)),
      on_close_(std::move(on_close)),
      in_(64 * 1024) {
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    auto ep = socket_.remote_endpoint(ec);
    if (!ec) peer = ep.address().to_string() + ":" + std::to_string(ep.port());
}

void Connection::start() {
    read_more();
}

void Connection::read_more() {
    if (!open_ || closing_ || paused_) return;
    if (in_len_ == in_.size()) in_.resize(in_.size() * 2);
    socket_.async_read_some(
        asio::buffer(in_.data() + in_len_, in_.size() - in_len_),
        [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
            if (ec) {
                self->close();
                return;
            }
            self->in_len_ += n;
            self->consume();
            self->read_more();
        });
}

void Connection::consume() {
    std::size_t pos = 0;
    auto self = shared_from_this();
    while (open_ && !closing_ && in_len_ - pos >= 4) {
        if (unsent_bytes_ > kMaxUnsentBytes) {
            paused_ = true;  // on_written resumes once the client has read
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
        if (in_len_ - pos < 4 + len) {
            // Make room for the whole frame; its size is capped above.
            if (in_.size() < 4 + len) in_.resize(4 + len);
            break;
        }
        on_frame_(self, std::string_view(in_.data() + pos + 4, len));
        pos += 4 + len;
    }
    if (pos > 0) {
        std::memmove(in_.data(), in_.data() + pos, in_len_ - pos);
        in_len_ -= pos;
    }
    // A large frame grew the buffer; give the memory back once it is consumed.
    if (in_len_ < 64 * 1024 && in_.size() > 1024 * 1024) in_.resize(64 * 1024);
}

void Connection::send(std::string frame) {
    if (!open_) return;
    unsent_bytes_ += frame.size();
    out_queue_.push_back(std::move(frame));
    if (!writing_) write_more();
}

void Connection::write_more() {
    if (out_queue_.empty()) {
        writing_ = false;
        if (closing_) close();
        return;
    }
    writing_ = true;
    out_flight_.swap(out_queue_);
    out_queue_.clear();
    std::vector<asio::const_buffer> bufs;
    bufs.reserve(out_flight_.size());
    for (const auto& f : out_flight_)
        bufs.emplace_back(asio::buffer(f));
    asio::async_write(socket_, bufs,
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
    if (paused_ && unsent_bytes_ <= kMaxUnsentBytes / 2) {
        paused_ = false;
        consume();
        read_more();
    }
    write_more();
}

void Connection::close_after_send() {
    closing_ = true;
    if (!writing_) close();
}

void Connection::close() {
    if (!open_) return;
    open_ = false;
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    out_queue_.clear();
    unsent_bytes_ = 0;
    if (on_close_) on_close_(shared_from_this());
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
      limits_(limits),
      on_frame_(std::move(on_frame)),
      on_close_(std::move(on_close)) {
    auto ep = parse_endpoint(listen);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    accept();
}

void Server::accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted) return;
        if (!ec) {
            std::make_shared<Connection>(std::move(socket), limits_, on_frame_, on_close_)->start();
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

void Server::stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
}

}  // namespace dueq::net
