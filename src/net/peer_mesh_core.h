// Internal to src/net: the state machine behind PeerMesh. peer_mesh.cpp has its lifecycle,
// dialing and timers; peer_mesh_links.cpp what happens on each link (handshake, duplicates,
// frames, closes).
#pragma once

#include "net/peer_mesh.h"

#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "net/log_limiter.h"
#include "net/peer_handshake.h"
#include "net/peer_link.h"

namespace dueq::net {

// Everything behind PeerMesh. Held by a shared_ptr so links and timers can hold it weakly:
// a handler that runs after the mesh is gone finds nothing and returns.
class MeshCore final : public PeerLinkOwner, public std::enable_shared_from_this<MeshCore> {
  public:
    MeshCore(boost::asio::io_context& io, MeshOptions opts, PeerMesh::OnMessage on_message,
             PeerMesh::OnPeerChange on_change)
        : io_(io),
          opts_(std::move(opts)),
          on_message_(std::move(on_message)),
          on_change_(std::move(on_change)),
          acceptor_(io),
          accept_retry_(io),
          tick_(io),
          rng_(std::random_device{}()),
          incarnation_(rng_() | 1),
          tls_accept_(opts_.tls_accept),
          tls_dial_(opts_.tls_dial) {}

    void start();
    void stop();
    std::uint16_t port() const {
        boost::system::error_code ec;
        auto ep = acceptor_.local_endpoint(ec);
        return ec ? 0 : ep.port();
    }
    bool send(std::uint64_t to, std::string payload);
    void set_peers(const std::vector<PeerAddress>& peers, bool accept_strangers);
    void set_tls(std::shared_ptr<const TlsContext> accept, std::shared_ptr<const TlsContext> dial) {
        tls_accept_ = std::move(accept);
        tls_dial_ = std::move(dial);
    }
    bool connected(std::uint64_t peer) const {
        auto it = peers_.find(peer);
        return it != peers_.end() && it->second.active;
    }
    std::size_t queued_bytes(std::uint64_t peer) const {
        auto it = peers_.find(peer);
        return it != peers_.end() && it->second.active ? it->second.active->queued_bytes() : 0;
    }
    std::size_t open_connections() const { return links_.size(); }

    void on_link_connected(const std::shared_ptr<PeerLink>& link) override;
    void on_link_frame(const std::shared_ptr<PeerLink>& link, std::string_view payload) override;
    void on_link_closed(const std::shared_ptr<PeerLink>& link, const std::string& reason) override;

  private:
    struct Peer {
        explicit Peer(boost::asio::io_context& io) : redial(io) {}
        std::uint64_t id = 0;
        std::string address;
        boost::asio::ip::tcp::endpoint endpoint;
        std::shared_ptr<PeerLink> active;   // handshaked; what send() uses
        std::shared_ptr<PeerLink> dialing;  // our dial in progress (connecting or handshaking)
        boost::asio::steady_timer redial;
        bool redial_armed = false;
        std::chrono::milliseconds backoff{0};
    };

    void validate_and_index();
    Peer make_peer(const PeerAddress& p) const;
    void forget(Peer& peer);
    void listen();
    void accept();
    void on_accepted(boost::asio::ip::tcp::socket socket);
    void dial(Peer& peer);
    void schedule_redial(Peer& peer);
    void arm_tick();
    void tick();
    void on_hello(const std::shared_ptr<PeerLink>& link, std::string_view payload);
    void on_proof(const std::shared_ptr<PeerLink>& link, std::string_view payload);
    void refuse(const std::shared_ptr<PeerLink>& link, const std::string& why);
    std::string refusal(const PeerHello& hello, const PeerLink& link) const;
    std::string certificate_refusal(const PeerHello& hello, const PeerLink& link) const;
    void establish(const std::shared_ptr<PeerLink>& link);
    bool prefer(const PeerLink& candidate, const PeerLink& current) const;
    void retire(const std::shared_ptr<PeerLink>& loser);
    std::string hello_for(std::uint64_t target) const;

    boost::asio::io_context& io_;
    const MeshOptions opts_;
    PeerMesh::OnMessage on_message_;
    PeerMesh::OnPeerChange on_change_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer accept_retry_;    // after a failed accept (out of descriptors)
    boost::asio::steady_timer tick_;            // heartbeats, dead_after, handshake deadlines
    PeerLink::Clock::time_point tick_due_;      // when the armed tick should run
    PeerLink::Clock::time_point loop_resumed_;  // last time a late tick showed a stuck loop
    std::mt19937_64 rng_;                       // backoff jitter
    const std::uint64_t incarnation_;
    LogLimiter refusal_log_{std::chrono::minutes(1)};
    std::unordered_map<std::uint64_t, Peer> peers_;
    std::vector<std::shared_ptr<PeerLink>> links_;  // every open link, in any state
    bool started_ = false, stopped_ = false;
    bool accept_strangers_ = false;
    std::shared_ptr<const TlsContext> tls_accept_, tls_dial_;  // opts_' until set_tls
};

}  // namespace dueq::net
