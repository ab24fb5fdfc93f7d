#include "net/peer_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "net/buffer_view.h"
#include "net/limits.h"
#include "net/peer_handshake.h"

namespace dueq::net {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr std::size_t kInitialBuffer = 16 * 1024;

std::string endpoint_string(const tcp::endpoint& ep) {
    return ep.address().to_string() + ":" + std::to_string(ep.port());
}

}  // namespace

PeerLink::PeerLink(tcp::socket socket, bool dialed, std::weak_ptr<PeerLinkOwner> owner,
                   std::shared_ptr<const TlsContext> tls)
    : socket_(std::move(socket)),
      tls_(tls ? std::make_unique<TlsSession>(std::move(tls)) : nullptr),
      owner_(std::move(owner)),
      dialed_(dialed),
      in_(kInitialBuffer),
      frame_limit_(kMaxPeerHelloBytes),
      last_received_(Clock::now()),
      last_sent_(last_received_) {
    if (dialed_) return;
    boost::system::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    auto ep = socket_.remote_endpoint(ec);
    if (!ec) remote_ = endpoint_string(ep);
}

void PeerLink::connect(const tcp::endpoint& to) {
    remote_ = endpoint_string(to);
    socket_.async_connect(to, [self = shared_from_this()](boost::system::error_code ec) {
        if (!self->open_) return;
        if (ec) return self->close("connect: " + ec.message());
        boost::system::error_code ignored;
        self->socket_.set_option(tcp::no_delay(true), ignored);
        self->last_received_ = Clock::now();
        if (self->tls_) self->tls_->start();  // the first flight goes out with the hello
        if (auto owner = self->owner_.lock())
            owner->on_link_connected(self);
        else
            self->close("mesh gone", false);
    });
}

void PeerLink::start_reading() {
    if (tls_ && tls_in_.empty()) tls_in_.resize(kInitialBuffer * 4);
    boost::system::error_code ec;
    socket_.non_blocking(true, ec);  // read_now's reads return would_block, never wait
    if (ec) return close("non-blocking: " + ec.message());
    read_now();
}

// Reads what the socket holds, then waits for readiness: a read that leaves room has
// emptied the socket, so the next one would return EAGAIN (as net::Connection does).
void PeerLink::read_now() {
    // A peer that keeps the buffer full gets a few reads, then waits its turn behind the
    // mesh's timers and the other sockets (the wait completes at once while bytes wait).
    for (int reads = 0; reads < kReadsPerTurn && open_; ++reads) {
        // Full: every complete frame was consumed, so a frame of at most frame_limit_ is
        // still arriving. Grow towards it as its bytes come, never from its declared length.
        if (in_len_ == in_.size()) {
            const std::size_t want = std::min(in_.size() * 2, frame_limit_ + 4);
            in_.resize(want > in_.size() ? want : in_.size() * 2);
        }
        const std::size_t room = in_.size() - in_len_;
        boost::system::error_code ec;
        const auto into = tls_ ? asio::buffer(tls_in_) : asio::buffer(in_.data() + in_len_, room);
        const std::size_t n = socket_.read_some(into, ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again) break;
        if (ec) return close(ec == asio::error::eof ? "connection closed by peer" : ec.message());
        last_received_ = Clock::now();
        if (tls_) {
            if (!feed_tls(n)) return;
            if (n < tls_in_.size()) break;
            continue;
        }
        in_len_ += n;
        consume();
        if (n < room) break;
    }
    if (!open_) return;
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this()](boost::system::error_code ec) {
                           if (!self->open_) return;
                           if (ec) return self->close(ec.message());
                           self->read_now();
                       });
}

bool PeerLink::feed_tls(std::size_t n) {
    if (!tls_checked_ && n > 0) {
        tls_checked_ = true;
        if (!looks_like_tls(static_cast<unsigned char>(tls_in_[0]))) {
            close(dialed_ ? "the peer answered in plaintext, not TLS"
                          : "plaintext on a TLS peer port");
            return false;
        }
    }
    tls_->feed(tls_in_.data(), n);
    for (;;) {
        if (in_len_ == in_.size()) {
            const std::size_t want = std::min(in_.size() * 2, frame_limit_ + 4);
            in_.resize(want > in_.size() ? want : in_.size() * 2);
        }
        const long got = tls_->read(in_.data() + in_len_, in_.size() - in_len_);
        if (got < 0) {
            close("TLS: " + tls_->error());
            return false;
        }
        if (got == 0) break;
        in_len_ += std::size_t(got);
        consume();
        if (!open_) return false;
    }
    // The handshake's answers go out now, frames or not.
    if (tls_->has_output() && !writing_) write_more();
    return open_;
}

std::vector<std::string> PeerLink::certificate_names() const {
    return tls_ ? tls_->peer_names() : std::vector<std::string>{};
}

void PeerLink::consume() {
    auto owner = owner_.lock();
    if (!owner) return close("mesh gone", false);
    auto self = shared_from_this();
    std::size_t pos = 0;
    while (open_ && in_len_ - pos >= 4) {
        const auto* p = reinterpret_cast<const unsigned char*>(in_.data() + pos);
        const std::size_t len = (std::size_t(p[0]) << 24) | (std::size_t(p[1]) << 16) |
                                (std::size_t(p[2]) << 8) | std::size_t(p[3]);
        if (len > frame_limit_) {
            spdlog::warn("peer link {}: frame of {} bytes exceeds the limit of {}; closing",
                         remote_, len, frame_limit_);
            return close("frame of " + std::to_string(len) + " bytes over the limit");
        }
        // The buffer grows in read_now as bytes arrive, never from a declared length.
        if (in_len_ - pos < 4 + len) break;
        // The owner may close this link or stop the mesh here; `in_` stays intact.
        if (len > 0) owner->on_link_frame(self, std::string_view(in_.data() + pos + 4, len));
        pos += 4 + len;
    }
    if (!open_) return;
    if (pos > 0) {
        std::memmove(in_.data(), in_.data() + pos, in_len_ - pos);
        in_len_ -= pos;
    }
    // A large frame grew the buffer; give the memory back once it is consumed.
    if (in_len_ < kInitialBuffer && in_.size() > 1024 * 1024) {
        in_.resize(kInitialBuffer);
        in_.shrink_to_fit();
    }
}

void PeerLink::send(std::string payload) {
    if (!open_) return;
    const std::size_t n = payload.size();
    OutFrame f{{static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
                static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)},
               std::move(payload)};
    queued_bytes_ += 4 + n;
    out_queue_.push_back(std::move(f));
    last_sent_ = Clock::now();
    if (!writing_) write_more();
}

std::vector<std::string> PeerLink::take_unsent() {
    std::vector<std::string> payloads;
    for (auto& f : out_queue_) {
        queued_bytes_ -= 4 + f.payload.size();
        if (!f.payload.empty()) payloads.push_back(std::move(f.payload));
    }
    out_queue_.clear();
    return payloads;
}

void PeerLink::write_more() {
    if (!open_ || (out_queue_.empty() && !(tls_ && tls_->has_output()))) {
        writing_ = false;
        return;
    }
    writing_ = true;
    out_flight_.swap(out_queue_);  // out_flight_ was empty
    out_bufs_.clear();             // its capacity stays: no allocation per write
    if (tls_) {
        for (const auto& f : out_flight_) {
            tls_->write(reinterpret_cast<const char*>(f.prefix.data()), f.prefix.size());
            tls_->write(f.payload.data(), f.payload.size());
        }
        tls_out_.clear();
        tls_->take_output(tls_out_);
        out_bufs_.emplace_back(asio::buffer(tls_out_));
    } else {
        for (const auto& f : out_flight_) {
            out_bufs_.emplace_back(asio::buffer(f.prefix));
            if (!f.payload.empty()) out_bufs_.emplace_back(asio::buffer(f.payload));
        }
    }
    asio::async_write(socket_, BufferView{&out_bufs_},
                      [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                          self->on_written(ec);
                      });
}

void PeerLink::on_written(boost::system::error_code ec) {
    if (!open_) return;  // close() already dropped the counts
    for (const auto& f : out_flight_)
        queued_bytes_ -= 4 + f.payload.size();
    out_flight_.clear();
    if (ec) return close("write: " + ec.message());
    if (!close_when_sent_.empty() && out_queue_.empty()) return close(close_when_sent_);
    write_more();
}

void PeerLink::close_when_sent(const std::string& reason) {
    close_when_sent_ = reason.empty() ? "closed" : reason;
    if (!writing_) close(close_when_sent_);
}

void PeerLink::close(const std::string& reason, bool notify) {
    if (!open_) return;
    open_ = false;
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    out_queue_.clear();  // out_flight_ stays until its write completes (aborted)
    queued_bytes_ = 0;
    if (!notify) return;
    if (auto owner = owner_.lock()) owner->on_link_closed(shared_from_this(), reason);
}

}  // namespace dueq::net
