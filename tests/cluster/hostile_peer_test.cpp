// Hostile bytes on the peer port of real dueqd processes. An outsider who knows the
// cluster id and the member list (both public) but not the secret must not get a single
// frame past the handshake; and a member that does hold the secret but sends nonsense
// (a bug, a corrupted stream) must not be able to stop a node or make replicas disagree.
#include <catch2/catch.hpp>

#include <poll.h>

#include <boost/asio.hpp>

#include <fstream>
#include <thread>

#include "cluster/cluster.h"
#include "net/peer_handshake.h"
#include "node/config.h"
#include "raft/message_codec.h"
#include "storage/database.h"

using namespace dueq;
using namespace dueq::test;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string frame(std::string_view payload) {
    const auto n = std::uint32_t(payload.size());
    std::string f{char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
    return f.append(payload);
}

// One peer connection driven by hand, speaking as member `self` to member `target`.
class ForgedPeer {
  public:
    ForgedPeer(std::uint16_t port, node::Config cluster) : sock_(io_), cfg_(std::move(cluster)) {
        sock_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    }
    void write(const std::string& bytes) {
        boost::system::error_code ec;  // the node may have closed on us: the test decides
        asio::write(sock_, asio::buffer(bytes), ec);
    }
    // One frame's payload, keep-alives skipped; nullopt on close or after `limit`.
    std::optional<std::string> read_frame(std::chrono::milliseconds limit = 2s) {
        const auto end = std::chrono::steady_clock::now() + limit;
        for (;;) {
            while (in_.size() >= 4) {
                const auto* p = reinterpret_cast<const unsigned char*>(in_.data());
                const std::size_t n = (std::size_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
                if (in_.size() < 4 + n) break;
                std::string payload = in_.substr(4, n);
                in_.erase(0, 4 + n);
                if (n > 0) return payload;
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                end - std::chrono::steady_clock::now());
            if (closed_ || left.count() <= 0) return std::nullopt;
            pollfd pfd{sock_.native_handle(), POLLIN, 0};
            if (::poll(&pfd, 1, int(left.count())) <= 0) continue;
            char buf[65536];
            boost::system::error_code ec;
            const auto got = sock_.read_some(asio::buffer(buf), ec);
            if (ec) closed_ = true;
            in_.append(buf, got);
        }
    }
    // True once the node has closed the connection (within `limit`).
    bool closed_by_node(std::chrono::milliseconds limit = 3s) {
        while (read_frame(limit)) {
        }
        return closed_;
    }
    // The handshake as a dialer: true when the node proved itself back.
    bool handshake(std::uint64_t self, std::uint64_t target, const std::string& secret) {
        const auto mine = net::encode_hello({cfg_.cluster_id, node::cluster_fingerprint(cfg_), self,
                                             target, 77, net::random_nonce()});
        write(frame(mine));
        const auto theirs = read_frame();
        if (!theirs) return false;
        write(frame(net::encode_proof(
            net::handshake_proof(secret, net::HandshakeRole::dialer, mine, *theirs))));
        const auto proof = read_frame();
        return proof && net::decode_proof(*proof) &&
               net::same_proof(*net::decode_proof(*proof),
                               net::handshake_proof(secret, net::HandshakeRole::acceptor, mine,
                                                    *theirs));
    }
    void send_raft(const raft::Message& m) { write(frame("R" + raft::encode_message(m))); }

  private:
    asio::io_context io_;
    tcp::socket sock_;
    node::Config cfg_;
    std::string in_;
    bool closed_ = false;
};

node::Config config_of(const Cluster& c, int i) {
    return node::load_config_file((c.dir() / (c.node_id(i) + ".toml")).string());
}

std::size_t count_lines(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t at = text.find(needle); at != std::string::npos;
         at = text.find(needle, at + 1))
        ++n;
    return n;
}

std::string be(std::uint64_t v, int bytes) {
    std::string out;
    for (int i = bytes - 1; i >= 0; --i)
        out.push_back(char(v >> (8 * i)));
    return out;
}

// A snapshot stream chunk as node/snapshot_transfer.h lays it out.
std::string chunk(raft::Term term, raft::SnapshotMeta meta, std::uint32_t seq, bool last,
                  const std::string& body) {
    return "S" + be(term, 8) + be(meta.index, 8) + be(meta.term, 8) + be(meta.time, 8) +
           be(seq, 4) + std::string(1, last ? 1 : 0) + body;
}

}  // namespace

TEST_CASE("a dial without the cluster secret is refused, and logged once a minute") {
    Cluster cluster("hostile-secret");
    cluster.start_all();
    REQUIRE(cluster.wait_for_leader(10s) >= 0);
    const auto cfg = config_of(cluster, 0);
    REQUIRE_FALSE(cfg.cluster_secret.empty());

    // Everything right but the secret, claiming to be node 3, twenty times.
    for (int attempt = 0; attempt < 20; ++attempt) {
        ForgedPeer forged(cluster.peer_port(0), cfg);
        CHECK_FALSE(forged.handshake(3, 1, "a guess at the secret, 16+ bytes"));
        forged.send_raft({.type = raft::MessageType::heartbeat, .from = 3, .to = 1, .term = 1000});
        CHECK(forged.closed_by_node());
    }
    // The handshake of an older version (no nonce, no proof) is refused too.
    {
        ForgedPeer old(cluster.peer_port(0), cfg);
        old.write(frame(be(net::kPeerHelloMagic, 4) + be(1, 2) + std::string(40, '\0')));
        CHECK(old.closed_by_node());
    }
    // The real node 3 was never displaced and the forged heartbeat's term never landed.
    const auto st = cluster.status(0);
    REQUIRE(st);
    CHECK(st->term < 1000);
    for (const auto& p : st->peers)
        CHECK(p.connected);
    auto c = cluster.client();
    CHECK(c->put({.queue = "q", .key = "after", .payload = string_payload("v")}).code() ==
          client::Code::ok);
    CHECK(count_lines(cluster.log_text(0), "refused handshake from 127.0.0.1") == 1);
}

TEST_CASE("nonsense from a member that holds the secret stops no node") {
    Cluster cluster("hostile-member");
    cluster.start_all();
    int leader = cluster.wait_for_leader(10s);
    REQUIRE(leader >= 0);
    auto c = cluster.client();
    for (int i = 0; i < 50; ++i)
        REQUIRE(c->put({.queue = "q", .key = "k" + std::to_string(i), .payload = string_payload("v")})
                    .code() == client::Code::ok);

    // Node 3's process dies; someone with its secret speaks for it to the other two.
    const int rogue = leader == 2 ? 1 : 2;
    const std::uint64_t rogue_id = std::uint64_t(rogue + 1);
    cluster.kill9(rogue);
    leader = cluster.wait_for_leader(10s);
    REQUIRE(leader >= 0);
    const auto cfg = config_of(cluster, 0);
    const raft::Term term = cluster.status(leader)->term;
    for (int target = 0; target < cluster.size(); ++target) {
        if (target == rogue) continue;
        const auto to = std::uint64_t(target + 1);
        ForgedPeer peer(cluster.peer_port(target), cfg);
        REQUIRE(peer.handshake(rogue_id, to, cfg.cluster_secret));
        // The append that used to end the process: its prev entry matches the node's
        // last one, its entries are numbered far beyond it.
        const auto target_status = cluster.status(target);
        REQUIRE(target_status);
        raft::Message absurd{.type = raft::MessageType::append, .from = rogue_id, .to = to,
                             .term = term, .index = target_status->last_index, .log_term = term};
        absurd.entries.push_back({.term = term, .index = std::uint64_t(1) << 60, .data = "x"});
        peer.send_raft(absurd);
        // Entries that skip an index, and an index near the top of the range.
        raft::Message gap = absurd;
        gap.entries = {{.term = term, .index = absurd.index + 1}, {.term = term, .index = absurd.index + 3}};
        peer.send_raft(gap);
        raft::Message top = absurd;
        top.index = ~std::uint64_t(0) - 1;
        top.entries = {{.term = term, .index = ~std::uint64_t(0)}};
        peer.send_raft(top);
        // A whole snapshot on the message path, an ack of entries nobody has, a commit
        // index beyond every log.
        raft::Message snap{.type = raft::MessageType::snapshot, .from = rogue_id, .to = to,
                           .term = term};
        snap.snapshot = raft::Snapshot{{1'000'000, term, 1}, "not a snapshot"};
        peer.send_raft(snap);
        peer.send_raft({.type = raft::MessageType::append_resp, .from = rogue_id, .to = to,
                        .term = term, .index = 1'000'000});
        peer.send_raft({.type = raft::MessageType::heartbeat, .from = rogue_id, .to = to,
                        .term = term, .commit = 1'000'000});
        // A snapshot stream whose task record is garbage, and frames that mean nothing.
        const raft::SnapshotMeta meta{1'000'000, term, 1};
        peer.write(frame(chunk(term, meta, 0, false, "garbage store record")));
        peer.write(frame(chunk(term, meta, 1, true,
                               be(5, 4) + std::string("\x00\x01qkx", 5) + be(3, 4) + "bad")));
        peer.write(frame(chunk(term, meta, 7, true, "")));
        peer.write(frame("R\xc1\xff"));
        peer.write(frame("?what"));
        std::this_thread::sleep_for(300ms);
    }

    // Every node that was running still is, and serves.
    for (int i = 0; i < cluster.size(); ++i)
        if (i != rogue) CHECK(cluster.running(i));
    leader = cluster.wait_for_leader(10s);
    REQUIRE(leader >= 0);
    auto c2 = cluster.client();
    REQUIRE(c2->put({.queue = "q", .key = "after", .payload = string_payload("v")}).code() ==
            client::Code::ok);
    // The real node 3 comes back and all three agree.
    cluster.start(rogue);
    REQUIRE(cluster.wait_for_leader(10s) >= 0);
    const auto st = cluster.status(leader);
    REQUIRE(st);
    REQUIRE(cluster.wait_applied(st->applied_index, 10s));
    std::vector<std::uint64_t> tasks;
    for (const auto& s : cluster.statuses())
        if (s) tasks.push_back(s->tasks);
    REQUIRE(tasks.size() == 3);
    CHECK(tasks[0] == 51);
    CHECK(tasks[1] == 51);
    CHECK(tasks[2] == 51);
    // Each node that was sent nonsense counted it: the absurd, gapped and top-of-range
    // appends, the snapshot message, the corrupt stream, the undecodable message and the
    // unknown kind (the impossible ack and commit index are the core's to ignore).
    for (int target = 0; target < cluster.size(); ++target) {
        if (target == rogue) continue;
        CAPTURE(target);
        const auto s = cluster.status(target);
        REQUIRE(s);
        CHECK(s->peer_input_dropped == 7);
        CHECK(count_lines(cluster.log_text(target), "dropped") >= 1);  // rate-limited
    }
}
