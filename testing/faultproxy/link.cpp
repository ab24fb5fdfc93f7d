#include "faultproxy/link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace dueq::faultproxy {

namespace asio = boost::asio;
using asio::ip::tcp;
using std::chrono::milliseconds;

std::string DirMode::describe() const {
    if (blackhole) return "blackhole";
    std::string s;
    if (delay) s = "delay " + std::to_string(delay_min_ms) + " " + std::to_string(delay_max_ms);
    if (rate) s += (s.empty() ? "" : " ") + std::string("rate ") + std::to_string(rate);
    return s.empty() ? "pass" : s;
}

namespace {
// Token bucket depth: 50 ms worth of bytes, so a capped link cannot burst far above its rate.
double bucket_depth(std::uint64_t rate) {
    return std::max(1.0, double(rate) / 20);
}
}  // namespace

// ---- Pump ----

Pump::Pump(Session& session, Dir dir, tcp::socket& src, tcp::socket& dst)
    : s_(session), dir_(dir), src_(src), dst_(dst), timer_(src.get_executor()), rbuf_(kChunk) {}

const DirMode& Pump::mode() const {
    return s_.link_->modes[dir_];
}

void Pump::read_more() {
    if (reading_ || eof_ || failed_ || s_.closed_ || !s_.started_) return;
    // Blackhole = stop reading: the bytes wait in the kernel, as they would in front of a
    // cut cable, and nothing is lost or reordered when the link comes back.
    if (mode().blackhole || held_bytes_ >= (mode().delay ? kMaxHeld : kMaxHeldUndelayed)) return;
    reading_ = true;
    src_.async_read_some(asio::buffer(rbuf_),
                         [self = s_.shared_from_this(), this](boost::system::error_code ec,
                                                              std::size_t n) { on_read(ec, n); });
}

void Pump::on_read(boost::system::error_code ec, std::size_t n) {
    reading_ = false;
    if (s_.closed_) return;
    if (ec == asio::error::eof) {
        eof_ = true;
        write_more();  // passes the FIN on once the held bytes are out
        return;
    }
    if (ec) {
        // A read already in flight when the hole opened must not leak the failure through
        // it: the far end of a cut cable learns nothing until the cable is back.
        if (mode().blackhole) {
            failed_ = true;
            return;
        }
        s_.close();
        return;
    }
    const auto now = Clock::now();
    auto release = now;
    const DirMode& m = mode();
    if (m.delay) {
        std::uniform_int_distribution<std::uint32_t> pick(m.delay_min_ms, m.delay_max_ms);
        release += milliseconds(pick(s_.link_->rng));
    }
    // Never before the previous chunk: delay reorders nothing inside a connection.
    release = std::max(release, last_release_);
    last_release_ = release;
    held_.push_back(Chunk{std::vector<char>(rbuf_.begin(), rbuf_.begin() + n), 0, release});
    held_bytes_ += n;
    kick();
}

double Pump::refill(Clock::time_point now) {
    const double depth = bucket_depth(mode().rate);
    if (refilled_ == Clock::time_point{}) {
        tokens_ = depth;  // a fresh cap starts with a full bucket
    } else {
        const double dt = std::chrono::duration<double>(now - refilled_).count();
        tokens_ = std::min(depth, tokens_ + dt * double(mode().rate));
    }
    refilled_ = now;
    return tokens_;
}

void Pump::wait_until(Clock::time_point t) {
    const auto gen = ++timer_gen_;
    timer_.expires_at(t);
    timer_.async_wait([self = s_.shared_from_this(), this, gen](boost::system::error_code) {
        if (gen != timer_gen_ || s_.closed_) return;  // superseded, or the session is gone
        write_more();
    });
}

void Pump::write_more() {
    if (writing_ || s_.closed_ || !s_.started_ || mode().blackhole) return;
    if (held_.empty()) {
        if (failed_) {
            s_.close();
        } else if (eof_ && !shut_) {
            shut_ = true;
            boost::system::error_code ec;
            dst_.shutdown(tcp::socket::shutdown_send, ec);
            s_.pump_finished();
        }
        return;
    }
    const auto now = Clock::now();
    Chunk& c = held_.front();
    if (c.release > now) {
        wait_until(c.release);
        return;
    }
    std::size_t n = c.data.size() - c.off;
    if (const auto rate = mode().rate) {
        const double need = std::min(double(n), bucket_depth(rate));
        const double have = refill(now);
        if (have < need) {
            const auto us = std::ceil((need - have) * 1e6 / double(rate)) + 1;
            wait_until(now + std::chrono::microseconds(std::int64_t(us)));
            return;
        }
        n = std::min(n, std::size_t(have));
        tokens_ -= double(n);
    }
    writing_ = true;
    asio::async_write(
        dst_, asio::buffer(c.data.data() + c.off, n),
        [self = s_.shared_from_this(), this](boost::system::error_code ec, std::size_t done) {
            writing_ = false;
            if (s_.closed_) return;
            if (ec) {
                s_.close();
                return;
            }
            s_.link_->bytes[dir_] += done;
            held_bytes_ -= done;
            Chunk& front = held_.front();
            front.off += done;
            if (front.off == front.data.size()) held_.pop_front();
            kick();
        });
}

void Pump::mode_changed(const DirMode& before) {
    const DirMode& m = mode();
    if (!m.delay) {
        // Healed from a delay: what is held goes out now, still in order.
        const auto now = Clock::now();
        for (auto& c : held_)
            c.release = std::min(c.release, now);
        last_release_ = std::min(last_release_, now);
    }
    if (m.rate != before.rate) refilled_ = {};
    ++timer_gen_;  // the next write_more decides afresh whether and how long to wait
    timer_.cancel();
    kick();
}

// ---- Session ----

Session::Session(Link& link, tcp::socket client)
    : link_(&link),
      client_(std::move(client)),
      server_(link.io),
      pumps_{Pump(*this, kUp, client_, server_), Pump(*this, kDown, server_, client_)} {}

void Session::start() {
    server_.async_connect(link_->target, [self = shared_from_this()](boost::system::error_code ec) {
        if (self->closed_) return;
        if (ec) {
            ++self->link_->connect_failures;
            spdlog::debug("link {}: connect to target failed: {}", self->link_->name, ec.message());
            self->close();
            return;
        }
        boost::system::error_code ignored;
        self->client_.set_option(tcp::no_delay(true), ignored);
        self->server_.set_option(tcp::no_delay(true), ignored);
        self->started_ = true;
        for (auto& p : self->pumps_)
            p.start();
    });
}

void Session::close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ec;
    for (auto* sock : {&client_, &server_}) {
        sock->shutdown(tcp::socket::shutdown_both, ec);
        sock->close(ec);
    }
    for (auto& p : pumps_)
        p.cancel();
    link_->sessions.erase(shared_from_this());
}

void Session::mode_changed(Dir dir, const DirMode& before) {
    if (!closed_ && started_) pumps_[dir].mode_changed(before);
}

void Session::pump_finished() {
    // Both FINs passed on: nothing more can flow either way.
    if (pumps_[kUp].finished() && pumps_[kDown].finished()) close();
}

// ---- Link ----

Link::Link(asio::io_context& io_, std::string name_, tcp::endpoint listen, tcp::endpoint target_,
           std::mt19937_64& rng_)
    : io(io_),
      name(std::move(name_)),
      target(target_),
      acceptor(io_, listen),  // reuse_address: a restarted proxy can take its ports back
      retry_timer(io_),
      rng(rng_) {}

void Link::start_accepting() {
    acceptor.async_accept(
        [self = shared_from_this()](boost::system::error_code ec, tcp::socket sock) {
            if (self->stopped) return;
            if (ec) {
                // EMFILE and friends: try again shortly rather than spin or give up.
                spdlog::warn("link {}: accept failed: {}", self->name, ec.message());
                self->retry_timer.expires_after(milliseconds(100));
                self->retry_timer.async_wait([self](boost::system::error_code e) {
                    if (!e && !self->stopped) self->start_accepting();
                });
                return;
            }
            if (self->rejecting) {
                ++self->rejected;
                boost::system::error_code ignored;
                sock.close(ignored);
            } else {
                ++self->accepted;
                auto s = std::make_shared<Session>(*self, std::move(sock));
                self->sessions.insert(s);
                s->start();
            }
            self->start_accepting();
        });
}

std::size_t Link::close_all() {
    // Copied first: each close removes its session from the set.
    const std::vector<std::shared_ptr<Session>> all(sessions.begin(), sessions.end());
    for (const auto& s : all)
        s->close();
    return all.size();
}

void Link::set_mode(Dir dir, const DirMode& m) {
    const DirMode before = modes[dir];
    modes[dir] = m;
    const std::vector<std::shared_ptr<Session>> all(sessions.begin(), sessions.end());
    for (const auto& s : all)
        s->mode_changed(dir, before);
}

void Link::stop() {
    stopped = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    retry_timer.cancel();
    close_all();
}

}  // namespace dueq::faultproxy
