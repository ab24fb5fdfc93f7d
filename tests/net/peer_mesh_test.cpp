#include <catch2/catch.hpp>

#include <spdlog/spdlog.h>

#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "loopback_ports.h"
#include "net/peer_handshake.h"
#include "net/peer_mesh.h"

using namespace dueq::net;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kCluster = "test-cluster";
const std::string kSecret = "test-secret-of-16+ bytes";
constexpr std::uint64_t kFingerprint = 0xfeedface;

// Runs `io` until pred() holds or `limit` passes; returns pred().
template <typename Pred>
bool run_until(asio::io_context& io, Pred pred, std::chrono::milliseconds limit = 5s) {
    const auto end = Clock::now() + limit;
    while (!pred() && Clock::now() < end) {
        if (io.stopped()) io.restart();
        io.run_for(2ms);
    }
    return pred();
}

void run_for(asio::io_context& io, std::chrono::milliseconds d) {
    run_until(
        io, [] { return false; }, d);
}

std::string addr(std::uint16_t port) {
    return "127.0.0.1:" + std::to_string(port);
}

std::string frame(std::string_view payload) {
    const auto n = std::uint32_t(payload.size());
    std::string f{char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
    return f.append(payload);
}

std::string random_bytes(std::mt19937& rng, std::size_t n) {
    std::string s(n, '\0');
    for (auto& c : s)
        c = char(rng());
    return s;
}

// One mesh plus what its callbacks saw. Counters are atomic for the threaded test.
struct Node {
    std::uint64_t id = 0;
    std::unique_ptr<PeerMesh> mesh;
    std::map<std::uint64_t, std::vector<std::string>> received;
    std::map<std::uint64_t, std::atomic<int>> ups, downs;
    std::atomic<int> changes{0};
    bool up(std::uint64_t peer) const { return mesh->connected(peer); }
};

// Nodes 1..n on fixed loopback ports, plus `phantoms`: members nobody runs (raw sockets
// in the tests speak for them).
struct Cluster {
    std::map<std::uint64_t, std::uint16_t> ports;
    std::map<std::uint64_t, std::unique_ptr<Node>> nodes;
    MeshOptions base;

    explicit Cluster(std::vector<std::uint64_t> real, std::vector<std::uint64_t> phantoms = {}) {
        for (auto id : real)
            ports[id] = free_loopback_port();
        for (auto id : phantoms)
            ports[id] = free_loopback_port();
        base.cluster_id = kCluster;
        base.fingerprint = kFingerprint;
        base.secret = kSecret;
        base.heartbeat = 50ms;
        base.dead_after = 2s;
        base.backoff_min = 10ms;
        base.backoff_max = 100ms;
        base.connect_timeout = 500ms;
        for (auto id : real)
            nodes[id] = std::make_unique<Node>();
    }

    MeshOptions options(std::uint64_t self) const {
        MeshOptions o = base;
        o.self_id = self;
        o.listen = addr(ports.at(self));
        for (auto& [id, port] : ports)
            if (id != self) o.peers.push_back({id, addr(port)});
        return o;
    }

    // (Re)creates node `id`'s mesh on its port and starts it.
    Node& start(asio::io_context& io, std::uint64_t id) { return start(io, id, options(id)); }
    Node& start(asio::io_context& io, std::uint64_t id, MeshOptions o) {
        Node& n = *nodes.at(id);
        n.id = id;
        for (auto& [peer, port] : ports) {  // every key exists before any loop runs
            n.ups[peer];
            n.downs[peer];
        }
        n.mesh = std::make_unique<PeerMesh>(
            io, std::move(o),
            [&n](std::uint64_t from, std::string_view p) { n.received[from].emplace_back(p); },
            [&n](std::uint64_t peer, bool connected) {
                ++(connected ? n.ups : n.downs)[peer];
                ++n.changes;
            });
        n.mesh->start();
        return n;
    }

    // Connected to every peer over exactly one connection each: any duplicate from a
    // simultaneous dial is gone. Frames sent while a duplicate is being retired may be lost
    // (see peer_mesh.h); from here on, nothing is.
    bool settled() const {
        for (auto& [id, n] : nodes)
            if (n->mesh->open_connections() != nodes.size() - 1) return false;
        return all_connected();
    }

    bool all_connected() const {
        for (auto& [id, n] : nodes)
            for (auto& [other, m] : nodes)
                if (id != other && !n->up(other)) return false;
        return true;
    }
};

// Bytes of a hello frame in this cluster (every node's is the same size), and of a proof.
const std::size_t kHelloFrame = 4 + encode_hello({kCluster, kFingerprint, 1, 2, 3}).size();
const std::size_t kProofFrame = 4 + encode_proof(Proof{}).size();
// What a raw peer receives in a complete handshake: the mesh's hello and its proof.
const std::size_t kHandshakeIn = kHelloFrame + kProofFrame;

// A hand-driven peer: a plain socket speaking (or not) the mesh's protocol. It dialed
// the mesh (`dialer`) or was dialed by it, and plays that role in the handshake.
struct RawPeer {
    asio::io_context& io;
    tcp::socket sock;
    bool dialer;
    std::string in;
    bool closed = false;
    std::string secret = kSecret;

    // Takes a socket accepted from a mesh that dialed us.
    RawPeer(asio::io_context& io_, tcp::socket s) : io(io_), sock(std::move(s)), dialer(false) {
        sock.non_blocking(true);
    }
    RawPeer(asio::io_context& io_, std::uint16_t port, int rcvbuf = 0)
        : io(io_), sock(io_), dialer(true) {
        sock.open(tcp::v4());
        if (rcvbuf) sock.set_option(asio::socket_base::receive_buffer_size(rcvbuf));
        sock.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
        sock.non_blocking(true);
    }
    void write(const std::string& bytes) {
        sock.non_blocking(false);
        boost::system::error_code ec;  // the mesh may have closed on us: that is for the test
        asio::write(sock, asio::buffer(bytes), ec);
        sock.non_blocking(true);
    }
    // Our hello, then our proof once the exchange gets that far (the mesh may refuse
    // first; then this returns with the socket closed).
    void hello(std::uint64_t sender, std::uint64_t target, std::string cluster = kCluster,
               std::uint64_t fingerprint = kFingerprint, std::uint64_t incarnation = 42,
               std::uint64_t data_id = 0) {
        const auto mine = encode_hello({cluster, fingerprint, sender, target, incarnation,
                                        random_nonce(), data_id});
        write(frame(mine));
        // The dialer proves first. We dialed: wait for the mesh's hello, then prove. The
        // mesh dialed (its hello is in already): wait for its proof, then prove.
        const std::size_t wait_for = dialer ? kHelloFrame : kHelloFrame + kProofFrame;
        if (!wait_bytes(wait_for)) return;
        const std::string theirs = in.substr(4, kHelloFrame - 4);
        const auto role = dialer ? HandshakeRole::dialer : HandshakeRole::acceptor;
        write(frame(encode_proof(dialer ? handshake_proof(secret, role, mine, theirs)
                                        : handshake_proof(secret, role, theirs, mine))));
    }
    void pump() {
        char buf[4096];
        boost::system::error_code ec;
        while (!closed) {
            const auto n = sock.read_some(asio::buffer(buf), ec);
            if (ec == asio::error::would_block) return;
            if (ec) closed = true;
            in.append(buf, n);
        }
    }
    // Runs the io_context until the mesh closes this socket (EOF or reset).
    bool wait_closed(std::chrono::milliseconds limit = 3s) {
        return run_until(
            io, [&] { return pump(), closed; }, limit);
    }
    bool wait_bytes(std::size_t n, std::chrono::milliseconds limit = 3s) {
        run_until(
            io, [&] { return pump(), closed || in.size() >= n; }, limit);
        return in.size() >= n;
    }
};

// Waits for the mesh to dial a test-owned listener and returns the accepted socket.
tcp::socket accept_dial(asio::io_context& io, tcp::acceptor& listener) {
    listener.non_blocking(true);
    tcp::socket s(io);
    boost::system::error_code ec;
    run_until(io, [&] { return listener.accept(s, ec), !ec; });
    return s;
}

PeerHello hello_in(const RawPeer& raw) {
    REQUIRE(raw.in.size() >= kHelloFrame);
    auto d = decode_hello(std::string_view(raw.in).substr(4, kHelloFrame - 4));
    REQUIRE(d.hello);
    return *d.hello;
}

tcp::endpoint loopback(std::uint16_t port) {
    return {asio::ip::make_address("127.0.0.1"), port};
}

void quiet() {
    spdlog::set_level(spdlog::level::err);  // refusals are expected here; keep output short
}

}  // namespace

TEST_CASE("peer hello round-trips and rejects malformed bytes", "[peer_mesh]") {
    const PeerHello h{"c1", 0x0102030405060708, 7, 9, 0xabcdef, random_nonce(), 0x77, 0x88};
    const auto bytes = encode_hello(h);
    auto d = decode_hello(bytes);
    REQUIRE(d.hello);
    CHECK(d.hello->cluster_id == "c1");
    CHECK(d.hello->fingerprint == 0x0102030405060708);
    CHECK(d.hello->sender == 7);
    CHECK(d.hello->target == 9);
    CHECK(d.hello->incarnation == 0xabcdef);
    CHECK(d.hello->nonce == h.nonce);
    CHECK(d.hello->data_id == 0x77);
    CHECK(d.hello->target_data_id == 0x88);

    CHECK_FALSE(decode_hello(bytes.substr(0, bytes.size() - 1)).hello);  // id length mismatch
    CHECK_FALSE(decode_hello(bytes + "x").hello);
    CHECK_FALSE(decode_hello(bytes.substr(0, 10)).hello);  // too short
    CHECK_FALSE(decode_hello("").hello);
    auto bad_magic = bytes;
    bad_magic[0] ^= 1;
    CHECK(decode_hello(bad_magic).error.find("magic") != std::string::npos);
    auto bad_version = bytes;
    bad_version[5] = 9;
    CHECK(decode_hello(bad_version).error.find("version") != std::string::npos);
}

TEST_CASE("three meshes connect fully and deliver in order, verbatim", "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1, 2, 3});
    for (std::uint64_t id = 1; id <= 3; ++id)
        c.start(io, id);
    REQUIRE(run_until(io, [&] { return c.settled(); }));

    constexpr int kCount = 1000;
    for (auto& [from, n] : c.nodes)
        for (std::uint64_t to = 1; to <= 3; ++to)
            if (to != from)
                for (int i = 0; i < kCount; ++i)
                    REQUIRE(n->mesh->send(to, std::to_string(from) + ">" + std::to_string(to) +
                                                  "#" + std::to_string(i)));
    auto all_received = [&](std::size_t count) {
        for (auto& [id, n] : c.nodes)
            for (auto& [other, m] : c.nodes)
                if (id != other && n->received[other].size() < count) return false;
        return true;
    };
    REQUIRE(run_until(
        io, [&] { return all_received(kCount); }, 30s));
    for (auto& [to, n] : c.nodes)
        for (auto& [from, msgs] : n->received) {
            REQUIRE(msgs.size() == kCount);
            for (int i = 0; i < kCount; ++i)
                REQUIRE(msgs[std::size_t(i)] ==
                        std::to_string(from) + ">" + std::to_string(to) + "#" + std::to_string(i));
        }

    // Sizes around the buffer's growth points, up to 1 MiB, random bytes.
    std::mt19937 rng(7);
    const std::vector<std::size_t> sizes{1, 3, 4, 5, 16 * 1024, 64 * 1024 + 1, 1u << 20};
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::string>> sent;
    for (auto& [id, n] : c.nodes)
        n->received.clear();
    for (auto& [from, n] : c.nodes)
        for (std::uint64_t to = 1; to <= 3; ++to)
            if (to != from)
                for (auto size : sizes) {
                    sent[{from, to}].push_back(random_bytes(rng, size));
                    REQUIRE(n->mesh->send(to, sent[{from, to}].back()));
                }
    // Generous: megabytes through three meshes on one thread, under sanitizers, on a busy box.
    const bool arrived = run_until(
        io, [&] { return all_received(sizes.size()); }, 30s);
    std::string counts;
    for (auto& [id, n] : c.nodes)
        for (auto& [from, msgs] : n->received)
            counts += " " + std::to_string(from) + ">" + std::to_string(id) + ":" +
                      std::to_string(msgs.size());
    INFO("delivered" << counts);
    for (auto& [id, n] : c.nodes)
        CHECK(n->changes == 2);  // no connection was lost on the way
    REQUIRE(arrived);
    for (auto& [to, n] : c.nodes)
        for (auto& [from, msgs] : n->received)
            CHECK(msgs == sent[{from, to}]);

    // An empty payload would read as a keep-alive: refused rather than silently lost.
    CHECK_FALSE(c.nodes[1]->mesh->send(2, ""));
    for (auto& [id, n] : c.nodes) {
        CHECK(n->changes == 2);  // one up per peer, nothing else
        CHECK(n->mesh->open_connections() == 2);
    }
}

TEST_CASE("exactly one connection per pair survives when all dial at once", "[peer_mesh]") {
    quiet();
    for (int round = 0; round < 8; ++round) {
        std::map<std::uint64_t, std::unique_ptr<asio::io_context>> ios;  // outlives the meshes
        Cluster c({1, 2, 3});
        for (std::uint64_t id = 1; id <= 3; ++id) {
            ios[id] = std::make_unique<asio::io_context>();
            c.start(*ios[id], id);  // all listening and dialing before any loop runs
        }
        std::atomic<bool> done{false};
        std::vector<std::thread> threads;
        for (auto& [id, io] : ios)
            threads.emplace_back([&io = *io, &done] {
                while (!done)
                    io.run_for(5ms);
            });
        auto ups = [&] {
            int total = 0;
            for (auto& [id, n] : c.nodes)
                for (auto& [peer, k] : n->ups)
                    total += k;
            return total;
        };
        const auto end = Clock::now() + 5s;
        while (ups() < 6 && Clock::now() < end)
            std::this_thread::sleep_for(2ms);
        std::this_thread::sleep_for(300ms);  // time for duplicates to be closed (or to break)
        done = true;
        for (auto& t : threads)
            t.join();

        INFO("round " << round);
        for (auto& [id, n] : c.nodes) {
            INFO("node " << id);
            CHECK(n->mesh->open_connections() == 2);
            for (auto& [peer, m] : c.nodes)
                if (peer != id) {
                    CHECK(n->ups[peer] == 1);
                    CHECK(n->downs[peer] == 0);
                }
        }
        // The surviving connections carry messages both ways. From here on, one thread
        // drives all three loops.
        for (auto& [from, n] : c.nodes)
            for (std::uint64_t to = 1; to <= 3; ++to)
                if (to != from) CHECK(n->mesh->send(to, "after round " + std::to_string(round)));
        auto delivered = [&] {
            for (auto& [id, io] : ios) {
                io->restart();
                io->poll();
            }
            for (auto& [id, n] : c.nodes)
                if (n->received.size() != 2) return false;
            return true;
        };
        const auto end2 = Clock::now() + 3s;
        while (!delivered() && Clock::now() < end2)
            std::this_thread::sleep_for(1ms);
        CHECK(delivered());
    }
}

// Node 2 (the mesh) against node 1 (raw sockets): both dial, and the higher id must keep
// its own, losing dial open until the lower id closes it, so that node 1 never sees its
// active connection drop before the winner is up on its side.
TEST_CASE("duplicates: the higher id stops using its dial and lets the lower id close it",
          "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({2}, {1});
    tcp::acceptor listener(io, loopback(c.ports[1]));
    Node& h = c.start(io, 2);

    RawPeer dialed_by_h(io, accept_dial(io, listener));
    REQUIRE(dialed_by_h.wait_bytes(kHelloFrame));
    CHECK(hello_in(dialed_by_h).sender == 2);
    CHECK(hello_in(dialed_by_h).target == 1);
    dialed_by_h.hello(1, 2);  // node 1 answers: up on node 2
    REQUIRE(run_until(io, [&] { return h.mesh->connected(1); }));

    RawPeer dialed_by_l(io, c.ports[2]);  // node 1 dials too; this one must win
    dialed_by_l.hello(1, 2);
    REQUIRE(dialed_by_l.wait_bytes(kHandshakeIn));  // node 2's proof: it switched
    CHECK(hello_in(dialed_by_l).target == 1);

    REQUIRE(h.mesh->send(1, "via the winner"));
    REQUIRE(dialed_by_l.wait_bytes(kHandshakeIn + 4 + 14));
    CHECK(dialed_by_l.in.substr(kHandshakeIn) == frame("via the winner"));
    dialed_by_h.write(frame("late, on the loser"));  // dropped: could overtake the winner
    dialed_by_l.write(frame("on the winner"));
    REQUIRE(run_until(io, [&] { return !h.received[1].empty(); }));
    run_for(io, 100ms);
    dialed_by_h.pump();
    CHECK_FALSE(dialed_by_h.closed);  // node 2 leaves the closing to node 1
    CHECK(dialed_by_h.in.size() == kHelloFrame + kProofFrame);
    CHECK(h.received[1] == std::vector<std::string>{"on the winner"});

    dialed_by_h.sock.close();  // node 1 closes the loser: nothing to report
    run_for(io, 100ms);
    CHECK(h.ups[1] == 1);
    CHECK(h.downs[1] == 0);
    CHECK(h.mesh->open_connections() == 1);
}

// Node 1 (the mesh) against node 2 (raw sockets).
TEST_CASE("duplicates: the lower id switches to its own dial and closes the other", "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1}, {2});
    tcp::acceptor listener(io, loopback(c.ports[2]));
    Node& l = c.start(io, 1);

    RawPeer dialed_by_l(io, accept_dial(io, listener));  // node 2 holds its answer
    REQUIRE(dialed_by_l.wait_bytes(kHelloFrame));

    RawPeer dialed_by_h(io, c.ports[1]);  // nothing up on node 1 yet: accepted
    dialed_by_h.hello(2, 1);
    REQUIRE(dialed_by_h.wait_bytes(kHandshakeIn));
    REQUIRE(l.mesh->connected(2));
    REQUIRE(l.mesh->send(2, "on the first"));
    REQUIRE(dialed_by_h.wait_bytes(kHandshakeIn + 4 + 12));

    dialed_by_l.hello(2, 1);  // node 2 answers node 1's dial: it wins
    REQUIRE(dialed_by_h.wait_closed());
    CHECK(l.ups[2] == 1);
    CHECK(l.downs[2] == 0);
    REQUIRE(l.mesh->send(2, "on the winner"));
    REQUIRE(dialed_by_l.wait_bytes(kHelloFrame + kProofFrame + 4 + 13));
    CHECK(dialed_by_l.in.substr(kHelloFrame + kProofFrame) == frame("on the winner"));

    // Another dial from node 2's same process while the winner is up: dropped once it has
    // proved itself, without node 1's proof.
    RawPeer again(io, c.ports[1]);
    again.hello(2, 1);
    REQUIRE(again.wait_closed());
    CHECK(again.in.size() == kHelloFrame);
    CHECK(l.mesh->connected(2));

    // A dial from a new process of node 2 replaces the old connection at once.
    RawPeer restarted(io, c.ports[1]);
    restarted.hello(2, 1, kCluster, kFingerprint, 43);
    REQUIRE(restarted.wait_bytes(kHandshakeIn));
    REQUIRE(dialed_by_l.wait_closed());
    CHECK(l.downs[2] == 1);
    CHECK(l.ups[2] == 2);
    CHECK(l.mesh->connected(2));
    CHECK(l.mesh->open_connections() == 1);
}

TEST_CASE("a stopped peer is reported down at once and reconnects when restarted", "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1, 2, 3});
    for (std::uint64_t id = 1; id <= 3; ++id)
        c.start(io, id);
    REQUIRE(run_until(io, [&] { return c.settled(); }));

    const auto t0 = Clock::now();
    c.nodes[3]->mesh->stop();
    c.nodes[3]->mesh.reset();  // destroyed with its handlers still pending
    REQUIRE(run_until(io, [&] { return c.nodes[1]->downs[3] == 1 && c.nodes[2]->downs[3] == 1; }));
    const auto took = Clock::now() - t0;
    CHECK(took < 300ms);  // dead_after is 2 s: this is the EOF, not the silence
    CHECK_FALSE(c.nodes[1]->mesh->send(3, "x"));
    CHECK(c.nodes[1]->mesh->connected(2));

    run_for(io, 150ms);  // a few refused redials
    c.nodes[3]->ups.clear();
    c.start(io, 3);
    REQUIRE(run_until(io, [&] { return c.settled(); }));
    CHECK(c.nodes[1]->ups[3] == 2);
    CHECK(c.nodes[2]->ups[3] == 2);
    CHECK(c.nodes[1]->downs[2] == 0);
    REQUIRE(c.nodes[3]->mesh->send(1, "back"));
    REQUIRE(c.nodes[1]->mesh->send(3, "welcome"));
    REQUIRE(run_until(
        io, [&] { return !c.nodes[1]->received[3].empty() && !c.nodes[3]->received[1].empty(); }));
    CHECK(c.nodes[1]->received[3].back() == "back");
    CHECK(c.nodes[3]->received[1].back() == "welcome");
}

TEST_CASE("meshes of another cluster or membership never connect", "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1, 2});
    auto o2 = c.options(2);
    SECTION("cluster id") {
        o2.cluster_id = "other-cluster";
    }
    SECTION("fingerprint") {
        o2.fingerprint = kFingerprint + 1;
    }
    c.start(io, 1);
    c.start(io, 2, o2);
    run_for(io, 400ms);
    for (auto& [id, n] : c.nodes) {
        CHECK(n->changes == 0);
        CHECK_FALSE(n->mesh->send(3 - id, "x"));
        CHECK(n->received.empty());
    }
}

TEST_CASE("a member back with another data dir is refused, and told the one it is known by",
          "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1}, {2});
    auto o1 = c.options(1);
    o1.data_id = 0x1111;
    o1.known_data_id = [](std::uint64_t peer) { return peer == 2 ? std::uint64_t(0xaaaa) : 0; };
    std::uint64_t seen = 0;
    o1.on_peer_data = [&](std::uint64_t peer, std::uint64_t data) { seen = peer == 2 ? data : 0; };
    Node& n = c.start(io, 1, o1);
    RawPeer wiped(io, c.ports[1]);
    wiped.hello(2, 1, kCluster, kFingerprint, 42, 0xbbbb);
    REQUIRE(wiped.wait_closed());
    REQUIRE(wiped.in.size() >= kHelloFrame);  // the refusal says why: our hello first
    CHECK(hello_in(wiped).target_data_id == 0xaaaa);
    CHECK(n.changes == 0);
    CHECK(seen == 0);
    RawPeer same(io, c.ports[1]);
    same.hello(2, 1, kCluster, kFingerprint, 43, 0xaaaa);
    REQUIRE(run_until(io, [&] { return n.changes > 0; }));
    CHECK(seen == 0xaaaa);
}

TEST_CASE("bad handshakes from a raw socket are refused without an answer", "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1}, {2});
    Node& n = c.start(io, 1);
    RawPeer raw(io, c.ports[1]);
    bool silent = false;
    SECTION("wrong cluster id") {
        raw.hello(2, 1, "other");
    }
    SECTION("wrong fingerprint") {
        raw.hello(2, 1, kCluster, kFingerprint ^ 1);
    }
    SECTION("unknown sender") {
        raw.hello(9, 1);
    }
    SECTION("sender is the node itself") {
        raw.hello(1, 1);
    }
    SECTION("addressed to another node") {
        raw.hello(2, 5);
    }
    SECTION("not a hello") {
        raw.write(frame("hello there"));
    }
    SECTION("no hello within connect_timeout") {
        silent = true;
    }
    if (!silent) raw.write(frame("a message that must not be delivered"));
    const auto t0 = Clock::now();
    REQUIRE(raw.wait_closed());
    if (silent) CHECK(Clock::now() - t0 >= 400ms);  // connect_timeout is 500 ms
    CHECK(raw.in.empty());                          // the mesh only answers a valid hello
    CHECK(n.changes == 0);
    CHECK(n.received.empty());
    CHECK(n.mesh->open_connections() <= 1);  // only its dial to the absent peer 2
}

TEST_CASE("a peer that does not hold the cluster secret is refused, dialing or dialed",
          "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1}, {2});
    tcp::acceptor listener(io, loopback(c.ports[2]));
    Node& n = c.start(io, 1);
    SECTION("it dials: it gets our hello but never our proof") {
        RawPeer raw(io, c.ports[1]);
        raw.secret = "not the secret, but long enough";
        raw.hello(2, 1);
        raw.write(frame("a message that must not be delivered"));
        REQUIRE(raw.wait_closed());
        CHECK(raw.in.size() == kHelloFrame);
    }
    SECTION("we dial it: its proof does not match") {
        RawPeer raw(io, accept_dial(io, listener));
        REQUIRE(raw.wait_bytes(kHelloFrame));
        raw.secret = "not the secret, but long enough";
        raw.hello(2, 1);
        raw.write(frame("a message that must not be delivered"));
        REQUIRE(raw.wait_closed());
        CHECK(raw.in.size() == kHelloFrame + kProofFrame);  // its hello and its proof
    }
    SECTION("it knows everything but the secret and replays an old proof") {
        RawPeer first(io, c.ports[1]);
        first.hello(2, 1);
        REQUIRE(run_until(io, [&] { return n.mesh->connected(2); }));
        first.sock.close();
        REQUIRE(run_until(io, [&] { return !n.mesh->connected(2); }));
        // A new connection gets a new nonce: the proof a recording holds is worthless.
        RawPeer replay(io, c.ports[1]);
        replay.write(frame(encode_hello({kCluster, kFingerprint, 2, 1, 42, random_nonce()})));
        REQUIRE(replay.wait_bytes(kHelloFrame));
        replay.write(frame(encode_proof(Proof{})));
        REQUIRE(replay.wait_closed());
        CHECK(n.ups[2] == 1);
    }
    run_for(io, 50ms);
    CHECK(n.received.empty());
    CHECK(n.ups[2] <= 1);
    CHECK_FALSE(n.mesh->connected(2));
}

TEST_CASE("two meshes with different secrets never connect", "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1, 2});
    Node& a = c.start(io, 1);
    auto o = c.options(2);
    o.secret = "another secret of 16+ bytes";
    Node& b = c.start(io, 2, o);
    run_for(io, 600ms);
    CHECK(a.changes == 0);
    CHECK(b.changes == 0);
    CHECK_FALSE(a.mesh->send(2, "x"));
}

TEST_CASE("garbage and oversized frames close that connection only", "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1, 2}, {3});
    c.base.max_frame_bytes = 1 << 20;
    for (std::uint64_t id = 1; id <= 2; ++id)
        c.start(io, id);
    REQUIRE(run_until(io, [&] { return c.all_connected(); }));
    Node& n1 = *c.nodes[1];

    RawPeer http(io, c.ports[1]);
    http.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(http.wait_closed());

    RawPeer huge_hello(io, c.ports[1]);
    huge_hello.write(std::string("\xff\xff\xff\xff", 4) + "garbage");
    CHECK(huge_hello.wait_closed());

    RawPeer over_hello_cap(io, c.ports[1]);
    over_hello_cap.write(frame(std::string(kMaxPeerHelloBytes + 1, 'x')));
    CHECK(over_hello_cap.wait_closed());

    // After a valid handshake the cap is max_frame_bytes.
    RawPeer big(io, c.ports[1]);
    big.hello(3, 1);
    REQUIRE(run_until(io, [&] { return n1.mesh->connected(3); }));
    big.write(frame("fine"));
    REQUIRE(run_until(io, [&] { return n1.received[3].size() == 1; }));
    const std::uint32_t over = (1u << 20) + 1;
    big.write(std::string{char(over >> 24), char(over >> 16), char(over >> 8), char(over)});
    CHECK(big.wait_closed());
    CHECK(run_until(io, [&] { return n1.downs[3] == 1; }));
    CHECK(n1.received[3] == std::vector<std::string>{"fine"});

    // The real peers never noticed.
    CHECK(n1.downs[2] == 0);
    CHECK(c.nodes[2]->downs[1] == 0);
    REQUIRE(n1.mesh->send(2, "still here"));
    REQUIRE(run_until(io, [&] { return c.nodes[2]->received[1].size() == 1; }));
    CHECK(c.nodes[2]->received[1][0] == "still here");
}

TEST_CASE("heartbeats keep idle connections up; silence closes them", "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1, 2}, {3});
    c.base.heartbeat = 40ms;
    c.base.dead_after = 300ms;
    for (std::uint64_t id = 1; id <= 2; ++id)
        c.start(io, id);
    REQUIRE(run_until(io, [&] { return c.all_connected(); }));
    Node& n1 = *c.nodes[1];

    RawPeer silent(io, c.ports[1]);
    silent.hello(3, 1);
    REQUIRE(run_until(io, [&] { return n1.mesh->connected(3); }));
    const auto t0 = Clock::now();
    REQUIRE(run_until(
        io, [&] { return n1.downs[3] == 1; }, 3s));
    const auto took = Clock::now() - t0;
    CHECK(took >= 250ms);
    CHECK(took < 1000ms);
    REQUIRE(silent.wait_closed());
    // What the silent peer got: the answering hello and proof, then only keep-alives.
    REQUIRE(silent.in.size() > kHandshakeIn);
    const auto keepalives = silent.in.substr(kHandshakeIn);
    CHECK(keepalives.size() % 4 == 0);
    CHECK(keepalives.size() >= 4 * 3);
    CHECK(keepalives.find_first_not_of('\0') == std::string::npos);

    // Meanwhile the two real meshes, idle for over three times dead_after, stayed up.
    run_for(io, 700ms);
    CHECK(n1.downs[2] == 0);
    CHECK(c.nodes[2]->downs[1] == 0);
    CHECK(n1.mesh->connected(2));
}

TEST_CASE("a stalled event loop does not count its own stall as the peers' silence",
          "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1, 2});
    c.base.heartbeat = 20ms;
    c.base.dead_after = 200ms;
    for (std::uint64_t id = 1; id <= 2; ++id)
        c.start(io, id);
    REQUIRE(run_until(io, [&] { return c.settled(); }));
    for (int stall = 0; stall < 3; ++stall) {
        std::this_thread::sleep_for(600ms);  // nobody reads or sends: both loops are stuck
        run_for(io, 100ms);
    }
    CHECK(c.nodes[1]->downs[2] == 0);
    CHECK(c.nodes[2]->downs[1] == 0);
    CHECK(c.all_connected());
}

TEST_CASE("send refuses absent peers and bounds the queue of a peer that does not read",
          "[peer_mesh]") {
    quiet();
    asio::io_context io;
    Cluster c({1}, {2});
    constexpr std::size_t kMaxQueued = 1u << 20;
    auto o = c.options(1);
    o.max_queued_bytes = kMaxQueued;
    o.max_frame_bytes = 256 * 1024;
    o.dead_after = 5s;
    Node& n = c.start(io, 1, o);
    CHECK_FALSE(n.mesh->send(2, "not connected"));
    CHECK_FALSE(n.mesh->send(99, "not a member"));
    CHECK(n.mesh->queued_bytes(2) == 0);

    RawPeer sink(io, c.ports[1], 4096);  // handshakes, then never reads
    sink.hello(2, 1);
    REQUIRE(run_until(io, [&] { return n.mesh->connected(2); }));
    CHECK_FALSE(n.mesh->send(2, std::string(256 * 1024 + 1, 'x')));  // over max_frame_bytes

    const std::string chunk(64 * 1024, 'q');
    std::size_t most = 0;
    bool refused = false;
    for (int i = 0; i < 2000 && !refused; ++i) {
        refused = !n.mesh->send(2, chunk);
        most = std::max(most, n.mesh->queued_bytes(2));
        io.restart();
        io.poll();
    }
    CHECK(refused);
    CHECK(most > kMaxQueued / 2);
    CHECK(most <= kMaxQueued);
    CHECK(n.mesh->connected(2));  // dropping frames is not a reason to drop the peer
    CHECK(n.changes == 1);
}
