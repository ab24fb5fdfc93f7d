// A client connection over TLS (net/tls.h): the socket carries ciphertext, the frame
// buffer `in_` and the answers stay plaintext, so framing, limits and deadlines are the
// same as without TLS.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "net/frame.h"
#include "net/server.h"

namespace dueq::net {

namespace asio = boost::asio;

namespace {
constexpr std::size_t kTlsReadBytes = 64 * 1024;
}  // namespace

std::vector<std::string> Connection::certificate_names() const {
    return tls_ ? tls_->peer_names() : std::vector<std::string>{};
}

// As read_now: a few reads per turn, each followed by handing on the frames they complete.
void Connection::read_tls() {
    if (tls_in_.empty()) tls_in_.resize(kTlsReadBytes);
    for (int reads = 0; open_ && !closing_ && !paused_; ++reads) {
        if (!drain_tls()) return;
        if (reads == kReadsPerTurn) return read_later();
        boost::system::error_code ec;
        const std::size_t n = socket_.read_some(asio::buffer(tls_in_), ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again) break;
        if (ec) return close();
        if (!tls_checked_) {
            tls_checked_ = true;
            if (!looks_like_tls(static_cast<unsigned char>(tls_in_[0]))) return refuse_plaintext();
        }
        tls_->feed(tls_in_.data(), n);
        last_activity_ = Clock::now();
        if (n < tls_in_.size()) {
            drain_tls();
            break;
        }
    }
    // The handshake's answers, and any the reads made TLS send.
    if (open_ && tls_ && tls_->has_output() && !writing_) flush_later();
}

// Moves the plaintext TLS holds into the frame buffer and hands on whole frames. False when
// the connection closed or paused.
bool Connection::drain_tls() {
    while (open_ && !closing_ && !paused_) {
        if (in_len_ == in_.size())
            in_.resize(std::min(in_.size() * 2, limits_.max_frame_bytes + 4));
        const std::size_t room = in_.size() - in_len_;
        if (room == 0) {
            consume();
            if (in_len_ == in_.size() && !paused_) return close(), false;
            continue;
        }
        const long n = tls_->read(in_.data() + in_len_, room);
        if (n < 0) {
            spdlog::debug("client {}: {}; closing", peer, tls_->error());
            close();
            return false;
        }
        if (n == 0) break;
        in_len_ += std::size_t(n);
        consume();
    }
    return open_ && !closing_ && !paused_;
}

// A plaintext client on a TLS port: told so in the clear, once, then closed.
void Connection::refuse_plaintext() {
    spdlog::debug("client {}: sent plaintext to a TLS listener; closing", peer);
    tls_.reset();
    send(error_frame(0, queue::Code::bad_request,
                     "this port takes TLS connections only (docs/security.md); closing"));
    close_after_send();
}

void Connection::encrypt_flight() {
    for (const auto& f : out_flight_)
        tls_->write(f.data(), f.size());
    tls_out_.clear();
    tls_->take_output(tls_out_);
    if (!tls_out_.empty()) out_bufs_.emplace_back(asio::buffer(tls_out_));
}

}  // namespace dueq::net
