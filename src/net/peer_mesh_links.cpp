#include "net/peer_mesh_core.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace dueq::net {

using Clock = PeerLink::Clock;
using State = PeerLink::State;

namespace {

// Cluster ids come from the network: keep control bytes out of the log.
std::string printable(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return out;
}

}  // namespace

// ---- link events ----

void MeshCore::on_link_connected(const std::shared_ptr<PeerLink>& link) {
    if (stopped_) return link->close("mesh stopped", false);
    link->state = State::handshaking;
    link->dialer_hello = hello_for(link->peer_id);
    link->send(link->dialer_hello);
    link->start_reading();
}

void MeshCore::on_link_frame(const std::shared_ptr<PeerLink>& link, std::string_view payload) {
    if (stopped_) return;
    switch (link->state) {
        case State::handshaking:
            return on_hello(link, payload);
        case State::proving:
            return on_proof(link, payload);
        case State::active:
            if (on_message_) on_message_(link->peer_id, payload);
            return;
        case State::connecting:
        case State::superseded:  // delivering these could reorder messages; drop them
            return;
    }
}

void MeshCore::on_link_closed(const std::shared_ptr<PeerLink>& link, const std::string& reason) {
    std::erase(links_, link);
    if (stopped_) return;
    // A TLS handshake that failed (a certificate of another CA, expired, or plaintext) is a
    // refusal, said once a minute per address and reason, like the handshake's own.
    if (link->tls() && (link->state == State::handshaking || link->state == State::connecting) &&
        (reason.rfind("TLS", 0) == 0 || reason.find("plaintext") != std::string::npos)) {
        const std::string address = link->remote().substr(0, link->remote().rfind(':'));
        std::uint64_t suppressed = 0;
        if (refusal_log_.allow("tls-" + address + "-" + reason, suppressed))
            spdlog::warn("peer mesh: TLS {} {} failed: {}{}", link->dialed() ? "with" : "from",
                         link->remote(), reason, LogLimiter::suppressed_note(suppressed));
    }
    auto it = peers_.find(link->peer_id);
    if (it == peers_.end()) return;  // an inbound link that never said who it was
    Peer& peer = it->second;
    if (peer.dialing == link) {
        peer.dialing.reset();
        spdlog::debug("peer mesh: dial to peer {} at {} failed: {}", peer.id, peer.address, reason);
        return schedule_redial(peer);
    }
    if (peer.active != link) return;
    peer.active.reset();
    // A superseded link waits for the other side to close it; no use keeping it now.
    const auto links = links_;
    for (const auto& l : links)
        if (l->peer_id == peer.id && l->state == State::superseded) l->close("peer down");
    spdlog::info("peer mesh: peer {} down: {}", peer.id, reason);
    schedule_redial(peer);
    if (on_change_) on_change_(peer.id, false);
}

// ---- handshake ----

std::string MeshCore::hello_for(std::uint64_t target) const {
    const std::uint64_t known = opts_.known_data_id ? opts_.known_data_id(target) : 0;
    return encode_hello(PeerHello{opts_.cluster_id, opts_.fingerprint, opts_.self_id, target,
                                  incarnation_, random_nonce(), opts_.data_id, known});
}

void MeshCore::refuse(const std::shared_ptr<PeerLink>& link, const std::string& why) {
    // Per address, not per connection: a stranger redialing must not flood the log.
    std::string address = link->remote().substr(0, link->remote().rfind(':'));
    std::uint64_t suppressed = 0;
    if (refusal_log_.allow(address, suppressed))
        spdlog::warn("peer mesh: refused handshake {} {}: {}{}", link->dialed() ? "with" : "from",
                     link->remote(), why, LogLimiter::suppressed_note(suppressed));
    link->close_when_sent("handshake refused");
}

// With TLS, the certificate must name the member the link is with: the one dialed, or the
// one an accepted hello claims to be. The CA check already ran in the TLS handshake.
std::string MeshCore::certificate_refusal(const PeerHello& h, const PeerLink& link) const {
    if (!link.tls()) return "";
    const std::uint64_t id = link.dialed() ? link.peer_id : h.sender;
    const std::string name = opts_.member_name ? opts_.member_name(id) : "";
    if (name.empty()) return "";  // not known here yet (joining): the CA and the secret decide
    const auto names = link.certificate_names();
    if (std::find(names.begin(), names.end(), name) != names.end()) return "";
    std::string listed;
    for (const auto& n : names)
        listed += (listed.empty() ? "" : ", ") + printable(n);
    return fmt::format("node {} is member '{}', but its certificate names {}", id, printable(name),
                       listed.empty() ? std::string("nothing") : listed);
}

void MeshCore::on_hello(const std::shared_ptr<PeerLink>& link, std::string_view payload) {
    const auto decoded = decode_hello(payload);
    if (!decoded.hello) return refuse(link, decoded.error);
    const PeerHello& h = *decoded.hello;
    if (h.target_data_id != 0 && opts_.data_id != 0 && h.target_data_id != opts_.data_id &&
        h.cluster_id == opts_.cluster_id) {
        std::uint64_t suppressed = 0;
        if (opts_.on_replaced && refusal_log_.allow("replaced-" + std::to_string(h.sender), suppressed))
            opts_.on_replaced(h.sender, h.target_data_id);
        return refuse(link, fmt::format("node {} knows this node by data id {:#x}, ours is {:#x}",
                                        h.sender, h.target_data_id, opts_.data_id));
    }
    const std::uint64_t known = opts_.known_data_id ? opts_.known_data_id(h.sender) : 0;
    // A safety check against a wiped disk, not an authentication (the secret is that): a
    // hello that names no data id is not checked.
    if (known != 0 && h.data_id != 0 && h.data_id != known && h.cluster_id == opts_.cluster_id) {
        // Tell it why before closing: our hello names the data id we know it by.
        if (!link->dialed()) {
            link->send(hello_for(h.sender));
            link->state = State::superseded;  // reads nothing more; closed once it is sent
        }
        return refuse(link, fmt::format(
                                "node {} presents data id {:#x}, but the cluster knows that member "
                                "by {:#x}: its data dir was wiped or replaced, and it must not vote "
                                "with a log it no longer has; remove it (dueqctl member remove) and "
                                "add that machine as a new member (docs/operations.md)",
                                h.sender, h.data_id, known));
    }
    if (auto why = certificate_refusal(h, *link); !why.empty()) return refuse(link, why);
    if (auto why = refusal(h, *link); !why.empty()) {
        return refuse(link, fmt::format("node {} to node {}, cluster '{}', fingerprint {:#x}; we "
                                        "are node {} of cluster '{}', fingerprint {:#x}: {}",
                                        h.sender, h.target, printable(h.cluster_id),
                                        h.fingerprint, opts_.self_id, printable(opts_.cluster_id),
                                        opts_.fingerprint, why));
    }
    link->peer_incarnation = h.incarnation;
    link->peer_data_id = h.data_id;
    link->state = State::proving;
    if (link->dialed()) {
        link->acceptor_hello = std::string(payload);
        link->send(encode_proof(handshake_proof(opts_.secret, HandshakeRole::dialer,
                                                link->dialer_hello, link->acceptor_hello)));
        return;
    }
    // Accepted: who the sender claims to be counts only once it has proved it.
    link->dialer_hello = std::string(payload);
    link->acceptor_hello = hello_for(h.sender);
    link->send(link->acceptor_hello);
    link->claimed_id = h.sender;
}

void MeshCore::on_proof(const std::shared_ptr<PeerLink>& link, std::string_view payload) {
    const auto proof = decode_proof(payload);
    const auto role = link->dialed() ? HandshakeRole::acceptor : HandshakeRole::dialer;
    if (!proof ||
        !same_proof(*proof, handshake_proof(opts_.secret, role, link->dialer_hello,
                                            link->acceptor_hello)))
        return refuse(link, "it does not hold the cluster secret (proof does not match)");
    if (!link->dialed()) link->peer_id = link->claimed_id;
    establish(link);
    link->dialer_hello.clear();
    link->acceptor_hello.clear();
}

std::string MeshCore::refusal(const PeerHello& h, const PeerLink& link) const {
    if (h.cluster_id != opts_.cluster_id) return "wrong cluster id";
    if (h.fingerprint != opts_.fingerprint) return "membership fingerprint differs";
    if (h.sender == opts_.self_id) return "sender id is our own";
    if (h.target != opts_.self_id) return "addressed to another node";
    if (!peers_.contains(h.sender) && !(accept_strangers_ && !link.dialed()))
        return "sender is not a member";
    if (link.dialed() && h.sender != link.peer_id)
        return "we dialed node " + std::to_string(link.peer_id) + " at that address";
    return {};
}

// Both sides of a pair make the same choice: see the header.
bool MeshCore::prefer(const PeerLink& candidate, const PeerLink& current) const {
    if (candidate.peer_incarnation != current.peer_incarnation) return true;  // peer restarted
    if (candidate.dialed() == current.dialed()) return true;  // its dialer gave up the old one
    const bool self_is_lower = opts_.self_id < candidate.peer_id;
    return candidate.dialed() == self_is_lower;
}

void MeshCore::establish(const std::shared_ptr<PeerLink>& link) {
    auto found = peers_.find(link->peer_id);
    if (found == peers_.end()) {
        if (!accept_strangers_) return link->close("not a member");
        // A joining node: the member that dialed it is known by id only, until set_peers.
        found = peers_.emplace(link->peer_id, Peer(io_)).first;
        found->second.id = link->peer_id;
        found->second.backoff = opts_.backoff_min;
    }
    Peer& peer = found->second;
    const auto old = peer.active;
    if (old && !prefer(*link, *old)) return retire(link);
    if (!link->dialed()) {  // accepted: prove ourselves only on the connection we keep
        link->send(encode_proof(handshake_proof(opts_.secret, HandshakeRole::acceptor,
                                                link->dialer_hello, link->acceptor_hello)));
    }
    link->state = State::active;
    link->set_frame_limit(opts_.max_frame_bytes);
    peer.active = link;
    if (peer.dialing == link) peer.dialing.reset();
    peer.backoff = opts_.backoff_min;
    const bool restarted = old && old->peer_incarnation != link->peer_incarnation;
    if (old) {
        // Same peer process: what it has not been sent yet still goes, in order.
        if (!restarted)
            for (auto& payload : old->take_unsent())
                link->send(std::move(payload));
        retire(old);
    }
    if (old && !restarted) return;  // a swap: the peer never went away
    spdlog::info("peer mesh: peer {} up{} ({} {})", peer.id, restarted ? " again, restarted" : "",
                 link->dialed() ? "dialed" : "accepted from", link->remote());
    if (opts_.on_peer_data && link->peer_data_id != 0) opts_.on_peer_data(peer.id, link->peer_data_id);
    if (restarted && on_change_) on_change_(peer.id, false);
    if (!stopped_ && on_change_) on_change_(peer.id, true);
}

// The loser of a duplicate: closed now, unless we are the higher id and both dialed (one
// each); then the lower-id node closes it once its side has switched.
void MeshCore::retire(const std::shared_ptr<PeerLink>& loser) {
    auto found = peers_.find(loser->peer_id);
    if (found == peers_.end()) return loser->close("not a member");
    Peer& peer = found->second;
    const bool one_each = peer.active && peer.active != loser &&
                          peer.active->dialed() != loser->dialed() &&
                          peer.active->peer_incarnation == loser->peer_incarnation;
    if (opts_.self_id > peer.id && one_each && loser->dialed()) {
        if (peer.dialing == loser) peer.dialing.reset();
        loser->state = State::superseded;
        loser->deadline = Clock::now() + opts_.connect_timeout;
        return;
    }
    spdlog::debug("peer mesh: closing duplicate connection to peer {} ({})", peer.id,
                  loser->remote());
    loser->close("duplicate");
}

}  // namespace dueq::net
