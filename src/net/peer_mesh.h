// The peer mesh: one TCP connection to every other member of the cluster, carrying
// length-prefixed frames (4-byte big-endian length, then the payload; length 0 is a
// keep-alive). Each node dials every peer and accepts from every peer; the first frame
// each way is a handshake (peer_handshake.h) that checks cluster id, membership
// fingerprint and node ids, and in which both sides prove they hold the cluster's secret.
// Refused handshakes are logged once per address per minute. Lost connections are redialed with jittered exponential backoff.
//
// Duplicates: when both nodes dial at once, two connections may survive the handshake.
// Both sides keep the one dialed by the node with the LOWER id, deciding from what each
// already knows (who dialed it), so no extra round trip is needed. The lower-id node closes
// the loser; the higher-id node only stops using it and waits for that close, so the
// lower-id node never sees its active connection close before the winner is up on its side
// (which would report the peer down and up again for nothing). Two connections from the
// same dialer, or from a restarted peer (new incarnation), resolve to the newer one.
//
// Threading: construct, call and destroy on the io_context's thread (or while it is not
// running). Every callback runs on that thread; nothing here takes a lock.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/tls.h"

namespace dueq::net {

struct PeerAddress {
    std::uint64_t id;
    std::string address;  // "host:port", see parse_endpoint in server.h
};

struct MeshOptions {
    std::string cluster_id;          // must match on both sides; at most 255 bytes
    // The cluster's shared secret: each side of a connection proves it holds it
    // (peer_handshake.h). Never logged.
    std::string secret;
    std::uint64_t fingerprint = 0;   // hash of the cluster's identity; must match too
    std::uint64_t self_id = 0;       // nonzero
    std::string listen;              // "host:port"; port 0 = ephemeral (tests)
    std::vector<PeerAddress> peers;  // every OTHER member (not self); set_peers changes it
    // A node joining a cluster knows no member yet: it accepts a connection from any node
    // id that proves the secret (the leader dials it), until set_peers names its peers.
    bool accept_strangers = false;
    // This node's data id (peer_handshake.h), and what the cluster knows of each peer's
    // (0: nothing yet). A peer whose hello names another data id than the one known for
    // it is refused: its data dir was wiped or replaced, and it would vote with a log it no
    // longer has. The refusal tells it so (it learns it from our hello); so does any hello
    // that knows this node by another data id (on_replaced).
    std::uint64_t data_id = 0;
    std::function<std::uint64_t(std::uint64_t peer)> known_data_id;
    // A link came up with a peer whose hello named `data_id` (the node records it).
    std::function<void(std::uint64_t peer, std::uint64_t data_id)> on_peer_data;
    // A peer knows this node by another data id: this node's data dir is not the one that
    // member had. Called at most once a minute per peer.
    std::function<void(std::uint64_t peer, std::uint64_t known)> on_replaced;
    // Mutual TLS on every link (docs/security.md): accepted links run `tls_accept` (a server
    // context that requires a certificate of the cluster's CA), dialed ones `tls_dial`.
    // Both null: plaintext. With TLS, a peer whose certificate does not name the member it
    // claims to be (member_name; "" when this node does not know it yet, e.g. while it
    // joins) is refused at its hello, before any other frame.
    std::shared_ptr<const TlsContext> tls_accept, tls_dial;
    std::function<std::string(std::uint64_t peer)> member_name;
    // Send an empty keep-alive frame if nothing else was queued for this long.
    std::chrono::milliseconds heartbeat{100};
    // Close a connection that received nothing for this long.
    std::chrono::milliseconds dead_after{1000};
    // Reconnect backoff: doubling from min to max, each wait jittered into [b/2, b].
    std::chrono::milliseconds backoff_min{20}, backoff_max{1000};
    // TCP connect plus handshake must complete within this, or the connection is dropped.
    std::chrono::milliseconds connect_timeout{1000};
    // A bigger incoming frame closes the connection (logged). send() refuses bigger payloads.
    std::size_t max_frame_bytes = 64u << 20;
    // Per peer: send() beyond this many unsent bytes drops the frame and returns false.
    std::size_t max_queued_bytes = 64u << 20;
};

class MeshCore;

class PeerMesh {
  public:
    using OnMessage = std::function<void(std::uint64_t from, std::string_view payload)>;
    using OnPeerChange = std::function<void(std::uint64_t peer, bool connected)>;

    // Does no I/O until start(). Callbacks may call any method here, stop() included.
    PeerMesh(boost::asio::io_context& io, MeshOptions opts, OnMessage on_message,
             OnPeerChange on_change);
    ~PeerMesh();  // stops
    PeerMesh(const PeerMesh&) = delete;
    PeerMesh& operator=(const PeerMesh&) = delete;

    // Binds and listens; dials every peer once the io_context runs. Throws
    // std::runtime_error saying what is wrong (bad options or addresses, port in use).
    // Once only.
    void start();
    // Closes every connection and the listener. No callback runs after it returns, and the
    // mesh may be destroyed at once even with handlers still pending. Final: no restart.
    void stop();
    std::uint16_t port() const;  // bound port; 0 before start()

    // Queues one payload for `to` (the mesh adds the length prefix). Returns false, and
    // drops the payload, for an unknown or disconnected peer, an empty payload (it would
    // read as a keep-alive), a payload over max_frame_bytes, or when the peer's unsent
    // bytes would exceed max_queued_bytes. Payloads sent over one connection arrive in
    // order. Some may be lost when a connection breaks, or when a duplicate is retired just
    // after a simultaneous dial (frames in flight on the loser are dropped rather than
    // risk delivering them out of order).
    bool send(std::uint64_t to, std::string payload);
    // The membership changed: peers not listed are disconnected and forgotten (on_change
    // says so if one was up), new ones are dialed, a changed address is redialed; one
    // listed with an empty address keeps its link but is not dialed. `accept_strangers`
    // replaces the option's. Throws std::runtime_error for an address that does not parse
    // (nothing changes then).
    void set_peers(const std::vector<PeerAddress>& peers, bool accept_strangers = false);
    // New TLS contexts for links made from now on (a certificate reload); open ones keep
    // theirs.
    void set_tls(std::shared_ptr<const TlsContext> accept, std::shared_ptr<const TlsContext> dial);
    bool connected(std::uint64_t peer) const;
    // Unsent bytes to that peer, length prefixes included (for pacing snapshot streams).
    std::size_t queued_bytes(std::uint64_t peer) const;
    // Open sockets of the mesh: active, handshaking or being dialed (for tests and metrics).
    std::size_t open_connections() const;

  private:
    std::shared_ptr<MeshCore> core_;
};

}  // namespace dueq::net
