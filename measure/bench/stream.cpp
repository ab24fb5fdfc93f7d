#include "stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <cstring>
#include <stdexcept>

#include "net/tls.h"

namespace dueq::bench {

namespace asio = boost::asio;
using asio::ip::tcp;

tcp::endpoint parse_endpoint(const std::string& address) {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0)
        throw std::runtime_error("address \"" + address + "\" is not host:port");
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    if (host == "localhost") host = "127.0.0.1";
    boost::system::error_code ec;
    const auto ip = asio::ip::make_address(host, ec);
    if (ec) throw std::runtime_error("address \"" + address + "\": host must be numeric");
    int port = 0;
    try {
        port = std::stoi(address.substr(colon + 1));
    } catch (const std::exception&) {
        port = -1;
    }
    if (port <= 0 || port > 65535)
        throw std::runtime_error("address \"" + address + "\": bad port");
    return {ip, static_cast<unsigned short>(port)};
}

Stream::Stream(asio::io_context& io, const std::string& address, int timeout_ms,
               std::shared_ptr<const net::TlsContext> tls)
    : socket_(io), in_(64 * 1024) {
    const auto ep = parse_endpoint(address);
    socket_.open(ep.protocol());
    socket_.native_non_blocking(true);
    boost::system::error_code ec;
    socket_.connect(ep, ec);
    if (ec == asio::error::would_block || ec == asio::error::in_progress) {
        pollfd p{socket_.native_handle(), POLLOUT, 0};
        if (::poll(&p, 1, timeout_ms) <= 0)
            throw std::runtime_error("cannot connect to " + address + ": timed out");
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err)
            throw std::runtime_error("cannot connect to " + address + ": " + std::strerror(err));
    } else if (ec) {
        throw std::runtime_error("cannot connect to " + address + ": " + ec.message());
    }
    socket_.native_non_blocking(false);
    socket_.set_option(tcp::no_delay(true));
    if (tls) {
        tls_ = std::make_unique<net::TlsSession>(std::move(tls));
        handshake(address);
    }
}

Stream::~Stream() = default;

// Synchronously, before the loop starts: the benchmark measures requests, not handshakes.
void Stream::handshake(const std::string& address) {
    tls_->start();
    std::vector<char> buf(16 * 1024);
    while (!tls_->established()) {
        std::string out;
        tls_->take_output(out);
        if (!out.empty()) asio::write(socket_, asio::buffer(out));
        boost::system::error_code ec;
        const std::size_t n = socket_.read_some(asio::buffer(buf), ec);
        if (ec) throw std::runtime_error("TLS handshake with " + address + ": " + ec.message());
        tls_->feed(buf.data(), n);
        char none[1];
        if (tls_->read(none, 0) < 0)
            throw std::runtime_error("TLS handshake with " + address + ": " + tls_->error());
    }
    std::string out;
    tls_->take_output(out);
    if (!out.empty()) asio::write(socket_, asio::buffer(out));
    raw_.resize(64 * 1024);
}

std::string Stream::read_exactly(std::size_t n) {
    std::string out(n, '\0');
    boost::system::error_code ec;
    asio::read(socket_, asio::buffer(out), ec);
    if (ec) throw std::runtime_error("reading the server's greeting: " + ec.message());
    return out;
}

void Stream::send(std::string_view bytes) {
    if (broken_) return;
    pending_.append(bytes);
    if (!write_busy_) {
        if (auto self = self_.lock()) flush(std::move(self));
    }
}

void Stream::flush(std::shared_ptr<Stream> self) {
    writing_.clear();
    if (tls_) {
        tls_->write(pending_.data(), pending_.size());
        pending_.clear();
        tls_->take_output(writing_);
    } else {
        writing_.swap(pending_);
    }
    write_busy_ = true;
    asio::async_write(socket_, asio::buffer(writing_),
                      [this, self](boost::system::error_code ec, std::size_t) {
                          write_busy_ = false;
                          if (ec) return fail("write: " + ec.message());
                          if (!pending_.empty() && !broken_) flush(self);
                      });
}

void Stream::start_reading(std::shared_ptr<Stream> self) {
    self_ = self;
    if (reading_) return;
    reading_ = true;
    if (!pending_.empty() && !write_busy_) flush(self);
    read_more(std::move(self));
}

void Stream::read_more(std::shared_ptr<Stream> self) {
    if (broken_) return;
    if (tls_) {
        socket_.async_read_some(asio::buffer(raw_), [this, self](boost::system::error_code ec,
                                                                 std::size_t n) {
            if (ec) return fail(ec == asio::error::eof ? "closed by the server" : ec.message());
            on_bytes(self, raw_.data(), n);
            if (!broken_) read_more(self);
        });
        return;
    }
    if (in_size_ == in_.size()) in_.resize(in_.size() * 2);
    socket_.async_read_some(
        asio::buffer(in_.data() + in_size_, in_.size() - in_size_),
        [this, self](boost::system::error_code ec, std::size_t n) {
            if (ec) return fail(ec == asio::error::eof ? "closed by the server" : ec.message());
            in_size_ += n;
            const std::size_t used = consume(in_.data(), in_size_);
            if (used > 0) {
                std::memmove(in_.data(), in_.data() + used, in_size_ - used);
                in_size_ -= used;
            }
            // Give back the memory of an occasional large reply.
            if (in_size_ < 64 * 1024 && in_.size() > 1024 * 1024) in_.resize(64 * 1024);
            read_more(self);
        });
}

// TLS: the plaintext in `data` goes through the session into in_, then to consume().
void Stream::on_bytes(std::shared_ptr<Stream> self, const char* data, std::size_t n) {
    tls_->feed(data, n);
    for (;;) {
        if (in_size_ == in_.size()) in_.resize(in_.size() * 2);
        const long got = tls_->read(in_.data() + in_size_, in_.size() - in_size_);
        if (got < 0) return fail("TLS: " + tls_->error());
        if (got == 0) break;
        in_size_ += std::size_t(got);
        const std::size_t used = consume(in_.data(), in_size_);
        if (used > 0) {
            std::memmove(in_.data(), in_.data() + used, in_size_ - used);
            in_size_ -= used;
        }
    }
    if (tls_->has_output() && !write_busy_) flush(std::move(self));
}

void Stream::fail(const std::string& why) {
    if (broken_) return;
    broken_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);
    on_broken(why);
}

void Stream::shutdown() {
    fail("closed by the benchmark");
}

}  // namespace dueq::bench
