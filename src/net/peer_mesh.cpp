#include "net/peer_mesh.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "net/peer_mesh_core.h"
#include "net/server.h"

namespace dueq::net {

namespace asio = boost::asio;
using asio::ip::tcp;
using std::chrono::milliseconds;
using Clock = PeerLink::Clock;
using State = PeerLink::State;

// Handshaking inbound connections allowed at once, beyond two per peer.
constexpr std::size_t kSpareInbound = 16;

// ---- lifecycle ----

void MeshCore::start() {
    if (started_ || stopped_) return;
    started_ = true;
    validate_and_index();
    listen();
    accept();
    // Dial from the loop rather than here, so that meshes started together (tests, or a
    // whole cluster in one process) are all listening before anyone dials.
    asio::post(io_, [weak = weak_from_this()] {
        auto self = weak.lock();
        if (!self || self->stopped_) return;
        for (auto& [id, peer] : self->peers_)
            if (!peer.active && !peer.dialing) self->dial(peer);
    });
    arm_tick();
    spdlog::info("peer mesh: node {} listening on port {}, {} peers", opts_.self_id, port(),
                 peers_.size());
}

void MeshCore::validate_and_index() {
    auto fail = [](const std::string& what) { throw std::runtime_error("peer mesh: " + what); };
    if (opts_.self_id == 0) fail("self_id must be nonzero");
    if (opts_.cluster_id.size() > kMaxClusterIdBytes)
        fail("cluster id is longer than " + std::to_string(kMaxClusterIdBytes) + " bytes");
    if (opts_.heartbeat.count() <= 0 || opts_.dead_after.count() <= 0 ||
        opts_.connect_timeout.count() <= 0 || opts_.backoff_min.count() <= 0 ||
        opts_.backoff_max < opts_.backoff_min)
        fail("heartbeat, dead_after, connect_timeout and backoff must be positive");
    accept_strangers_ = opts_.accept_strangers;
    for (const auto& p : opts_.peers) {
        if (!peers_.emplace(p.id, make_peer(p)).second)
            fail("peer id " + std::to_string(p.id) + " is listed twice");
    }
}

MeshCore::Peer MeshCore::make_peer(const PeerAddress& p) const {
    auto fail = [](const std::string& what) { throw std::runtime_error("peer mesh: " + what); };
    if (p.id == 0 || p.id == opts_.self_id)
        fail("peer id " + std::to_string(p.id) + " must be nonzero and not our own");
    Peer peer(io_);
    peer.id = p.id;
    peer.address = p.address;
    peer.backoff = opts_.backoff_min;
    if (p.address.empty()) return peer;  // known by id only: it dials us (a joining node)
    try {
        peer.endpoint = parse_endpoint(p.address);
    } catch (const std::exception& e) {
        fail("peer " + std::to_string(p.id) + ": " + e.what());
    }
    return peer;
}

void MeshCore::set_peers(const std::vector<PeerAddress>& peers, bool accept_strangers) {
    std::unordered_map<std::uint64_t, Peer> fresh;
    for (const auto& p : peers)
        fresh.emplace(p.id, make_peer(p));  // throws before anything changed
    accept_strangers_ = accept_strangers;
    for (auto it = peers_.begin(); it != peers_.end();) {
        auto next = fresh.find(it->first);
        // Listed without an address: keep whatever link it has.
        if (next != fresh.end() &&
            (next->second.address == it->second.address || next->second.address.empty())) {
            fresh.erase(next);
            ++it;
            continue;
        }
        forget(it->second);
        it = peers_.erase(it);
    }
    for (auto& [id, peer] : fresh) {
        spdlog::info("peer mesh: peer {} at {}", id,
                     peer.address.empty() ? "(it dials)" : peer.address);
        Peer& added = peers_.emplace(id, std::move(peer)).first->second;
        if (started_ && !stopped_ && !added.address.empty()) dial(added);
    }
}

// Closes every link of a peer about to be dropped from peers_ (its closes then find no
// peer and do nothing), and says it is down if it was up.
void MeshCore::forget(Peer& peer) {
    const bool was_up = peer.active != nullptr;
    peer.redial.cancel();
    peer.active.reset();
    peer.dialing.reset();
    const auto links = links_;
    for (const auto& l : links)
        if (l->peer_id == peer.id) l->close("no longer a member");
    spdlog::info("peer mesh: peer {} ({}) is no longer a peer", peer.id, peer.address);
    if (was_up && on_change_) on_change_(peer.id, false);
}

void MeshCore::listen() {
    tcp::endpoint ep;
    try {
        ep = parse_endpoint(opts_.listen);
    } catch (const std::exception& e) {
        throw std::runtime_error(std::string("peer mesh: listen ") + e.what());
    }
    boost::system::error_code ec;
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw std::runtime_error("peer mesh: cannot listen on " + opts_.listen + ": " +
                                 ec.message());
}

void MeshCore::stop() {
    if (stopped_) return;
    stopped_ = true;
    boost::system::error_code ec;
    acceptor_.close(ec);
    accept_retry_.cancel();
    tick_.cancel();
    for (auto& [id, peer] : peers_) {
        peer.redial.cancel();
        peer.active.reset();
        peer.dialing.reset();
    }
    auto links = std::move(links_);
    links_.clear();
    for (auto& link : links)
        link->close("mesh stopped", false);
    if (started_) spdlog::info("peer mesh: node {} stopped", opts_.self_id);
}

// ---- connections ----

void MeshCore::accept() {
    acceptor_.async_accept(
        [weak = weak_from_this()](boost::system::error_code ec, tcp::socket socket) {
            auto self = weak.lock();
            if (!self || self->stopped_ || ec == asio::error::operation_aborted) return;
            if (!ec) {
                self->on_accepted(std::move(socket));
                return self->accept();
            }
            spdlog::warn("peer mesh: accept failed: {}; retrying in 100 ms", ec.message());
            self->accept_retry_.expires_after(milliseconds(100));
            self->accept_retry_.async_wait([weak](boost::system::error_code e) {
                auto s = weak.lock();
                if (s && !e && !s->stopped_) s->accept();
            });
        });
}

void MeshCore::on_accepted(tcp::socket socket) {
    const auto pending = std::count_if(links_.begin(), links_.end(), [](const auto& l) {
        return !l->dialed() &&
               (l->state == State::handshaking || l->state == State::proving);
    });
    if (std::size_t(pending) >= 2 * peers_.size() + kSpareInbound) {
        spdlog::debug("peer mesh: too many connections still handshaking; refusing one");
        return;  // the socket closes here
    }
    auto link =
        std::make_shared<PeerLink>(std::move(socket), false, weak_from_this(), tls_accept_);
    link->state = State::handshaking;
    link->deadline = Clock::now() + opts_.connect_timeout;
    links_.push_back(link);
    link->start_reading();
}

void MeshCore::dial(Peer& peer) {
    auto link =
        std::make_shared<PeerLink>(tcp::socket(io_), true, weak_from_this(), tls_dial_);
    link->state = State::connecting;
    link->peer_id = peer.id;
    link->deadline = Clock::now() + opts_.connect_timeout;
    peer.dialing = link;
    links_.push_back(link);
    link->connect(peer.endpoint);
}

void MeshCore::schedule_redial(Peer& peer) {
    // A stranger (accept_strangers) has no address to dial: it dials us.
    if (stopped_ || peer.active || peer.dialing || peer.redial_armed || peer.address.empty())
        return;
    const auto b = peer.backoff.count();
    const milliseconds wait(b / 2 +
                            std::uniform_int_distribution<milliseconds::rep>(0, b - b / 2)(rng_));
    peer.backoff = std::min(peer.backoff * 2, opts_.backoff_max);
    peer.redial_armed = true;
    peer.redial.expires_after(wait);
    peer.redial.async_wait([weak = weak_from_this(), id = peer.id](boost::system::error_code ec) {
        auto self = weak.lock();
        if (!self || ec || self->stopped_) return;
        auto it = self->peers_.find(id);
        if (it == self->peers_.end()) return;
        Peer& p = it->second;
        p.redial_armed = false;
        if (!p.active && !p.dialing) self->dial(p);
    });
}

void MeshCore::arm_tick() {
    const auto shortest = std::min({opts_.heartbeat, opts_.dead_after, opts_.connect_timeout});
    tick_.expires_after(std::clamp(shortest / 4, milliseconds(1), milliseconds(50)));
    tick_due_ = tick_.expiry();
    tick_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
        auto self = weak.lock();
        if (!self || ec || self->stopped_) return;
        self->tick();
        if (!self->stopped_) self->arm_tick();
    });
}

void MeshCore::tick() {
    const auto now = Clock::now();
    // Running a heartbeat late means this loop was stuck (a long handler, a paused
    // process): peers could not be heard meanwhile, so their silence counts from now.
    if (now - tick_due_ > opts_.heartbeat) loop_resumed_ = now;
    const auto links = links_;  // closing a link changes links_
    for (const auto& link : links) {
        if (stopped_) return;
        if (!link->open()) continue;
        switch (link->state) {
            case State::connecting:
            case State::handshaking:
            case State::proving:
                if (now >= link->deadline) link->close("no handshake within connect_timeout");
                break;
            case State::superseded:
                if (now >= link->deadline) link->close("superseded");
                break;
            case State::active:
                if (now - std::max(link->last_received(), loop_resumed_) >= opts_.dead_after)
                    link->close("nothing received for " + std::to_string(opts_.dead_after.count()) +
                                " ms");
                else if (now - link->last_sent() >= opts_.heartbeat && link->queued_bytes() == 0)
                    link->send({});
                break;
        }
    }
}

bool MeshCore::send(std::uint64_t to, std::string payload) {
    auto it = peers_.find(to);
    if (stopped_ || it == peers_.end() || !it->second.active) return false;
    PeerLink& link = *it->second.active;
    // An empty payload would read as a keep-alive on the other side.
    if (payload.empty() || payload.size() > opts_.max_frame_bytes) return false;
    if (link.queued_bytes() + 4 + payload.size() > opts_.max_queued_bytes) return false;
    link.send(std::move(payload));
    return true;
}

// ---- PeerMesh ----

PeerMesh::PeerMesh(asio::io_context& io, MeshOptions opts, OnMessage on_message,
                   OnPeerChange on_change)
    : core_(std::make_shared<MeshCore>(io, std::move(opts), std::move(on_message),
                                       std::move(on_change))) {}

PeerMesh::~PeerMesh() {
    core_->stop();
}

void PeerMesh::start() {
    core_->start();
}
void PeerMesh::stop() {
    core_->stop();
}
std::uint16_t PeerMesh::port() const {
    return core_->port();
}
bool PeerMesh::send(std::uint64_t to, std::string payload) {
    return core_->send(to, std::move(payload));
}
void PeerMesh::set_tls(std::shared_ptr<const TlsContext> accept,
                       std::shared_ptr<const TlsContext> dial) {
    core_->set_tls(std::move(accept), std::move(dial));
}

void PeerMesh::set_peers(const std::vector<PeerAddress>& peers, bool accept_strangers) {
    core_->set_peers(peers, accept_strangers);
}
bool PeerMesh::connected(std::uint64_t peer) const {
    return core_->connected(peer);
}
std::size_t PeerMesh::queued_bytes(std::uint64_t peer) const {
    return core_->queued_bytes(peer);
}
std::size_t PeerMesh::open_connections() const {
    return core_->open_connections();
}

}  // namespace dueq::net
