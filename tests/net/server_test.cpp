// The client listener reads through a ReadableSet (edge-triggered): a socket it stops
// reading before it is empty must be read again without waiting for new bytes.
#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "net/readable_set.h"
#include "net/server.h"

using namespace dueq::net;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string frame_of(const std::string& body) {
    const auto n = body.size();
    std::string f{char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
    return f + body;
}

// Runs `io` until `done` or 10 s have passed; returns `done`.
template <class Done>
bool run_until(asio::io_context& io, Done done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < until)
        io.run_for(std::chrono::milliseconds(10));
    return done();
}

// A client on its own thread: writes `frames` in one go (blocking), then reads
// `answer_bytes` back.
struct BurstClient {
    std::string received;  // read it once finish() returned
    std::atomic<bool> done{false};
    std::thread thread;
    BurstClient(std::uint16_t port, std::string bytes, std::size_t answer_bytes) {
        thread = std::thread([this, port, bytes = std::move(bytes), answer_bytes] {
            asio::io_context io;
            tcp::socket s(io);
            s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
            asio::write(s, asio::buffer(bytes));
            received.resize(answer_bytes);
            boost::system::error_code ec;
            const auto n = asio::read(s, asio::buffer(received), ec);
            received.resize(n);
            done = true;
        });
    }
    // Lets the answers go out, then joins; a server that stopped reading is closed first,
    // so that the client's read ends.
    void finish(asio::io_context& io, Server& server) {
        run_until(io, [&] { return done.load(); });
        server.stop();
        io.run_for(std::chrono::milliseconds(10));
        thread.join();
    }
    ~BurstClient() {
        if (thread.joinable()) thread.join();
    }
};

// Answers each frame with the first `echo_bytes` of its body.
struct EchoServer {
    asio::io_context io;
    Limits limits;  // the server keeps a reference
    std::size_t frames_seen = 0;
    Server server;
    explicit EchoServer(std::size_t echo_bytes)
        : server(
              io, "127.0.0.1:0", limits,
              [this, echo_bytes](const std::shared_ptr<Connection>& c, std::string_view body) {
                  ++frames_seen;
                  c->send(frame_of(std::string(body.substr(0, echo_bytes))));
              },
              nullptr) {}
};

}  // namespace

TEST_CASE("a burst larger than the reads of one turn is read to its end") {
    EchoServer echo(8);
    auto& [io, limits, frames_seen, server] = echo;
    // 4,000 frames of 1 kB: far more than kReadsPerTurn reads of the 16 kB buffer.
    constexpr std::size_t kFrames = 4000;
    std::string bytes;
    for (std::size_t i = 0; i < kFrames; ++i) {
        std::string body(1000, char('a' + i % 26));
        body.replace(0, 8, std::to_string(10'000'000 + i));
        bytes += frame_of(body);
    }
    BurstClient client(server.port(), bytes, kFrames * 12);
    const bool all_read = run_until(io, [&] { return frames_seen == kFrames; });
    client.finish(io, server);
    REQUIRE(all_read);
    REQUIRE(client.received.size() == kFrames * 12);
    // In order, each answer its own request's first 8 bytes.
    CHECK(client.received.substr(4, 8) == "10000000");
    CHECK(client.received.substr((kFrames - 1) * 12 + 4, 8) ==
          std::to_string(10'000'000 + kFrames - 1));
    server.stop();
}

TEST_CASE("a connection paused at its in-flight cap reads the rest once answers go out") {
    asio::io_context io;
    Limits limits;
    limits.max_in_flight = 4;
    std::size_t frames_seen = 0;
    Server server(
        io, "127.0.0.1:0", limits,
        [&](const std::shared_ptr<Connection>& c, std::string_view body) {
            ++frames_seen;
            // Answered later, from the loop: the cap is reached before any answer.
            asio::post(io, [c, b = std::string(body)] { c->send(frame_of(b)); });
        },
        nullptr);
    // 400 kB: the socket still holds most of it when the connection pauses.
    constexpr std::size_t kFrames = 40'000;
    std::string bytes;
    for (std::size_t i = 0; i < kFrames; ++i)
        bytes += frame_of("r" + std::to_string(100'000 + i));
    BurstClient client(server.port(), bytes, kFrames * 11);
    const bool all_read = run_until(io, [&] { return frames_seen == kFrames; });
    client.finish(io, server);
    REQUIRE(all_read);
    REQUIRE(client.received.size() == kFrames * 11);
    CHECK(client.received.substr(kFrames * 11 - 7, 7) == "r139999");
}

TEST_CASE("a readable set reports new bytes once per arrival, and nothing once removed") {
    asio::io_context io;
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    tcp::socket a_out(io), a_in(io), b_out(io), b_in(io);
    a_out.connect(acceptor.local_endpoint());
    acceptor.accept(a_in);
    b_out.connect(acceptor.local_endpoint());
    acceptor.accept(b_in);
    int a_key = 0, b_key = 0;
    std::vector<void*> reported;
    ReadableSet set(io, [&](void* key) { reported.push_back(key); });
    REQUIRE(set.add(a_in.native_handle(), &a_key));
    REQUIRE(set.add(b_in.native_handle(), &b_key));
    io.run_for(std::chrono::milliseconds(30));
    CHECK(reported.empty());

    asio::write(a_out, asio::buffer(std::string("hello")));
    REQUIRE(run_until(io, [&] { return !reported.empty(); }));
    io.run_for(std::chrono::milliseconds(30));
    // Edge-triggered: the unread bytes are not reported again, and b had none.
    REQUIRE(reported == std::vector<void*>{&a_key});

    asio::write(b_out, asio::buffer(std::string("x")));
    REQUIRE(run_until(io, [&] { return reported.size() == 2; }));
    CHECK(reported[1] == &b_key);

    set.remove(a_in.native_handle());
    asio::write(a_out, asio::buffer(std::string("more")));
    io.run_for(std::chrono::milliseconds(30));
    CHECK(reported.size() == 2);

    set.stop();
    asio::write(b_out, asio::buffer(std::string("late")));
    io.run_for(std::chrono::milliseconds(30));
    CHECK(reported.size() == 2);
    CHECK_FALSE(set.add(a_in.native_handle(), &a_key));
}

TEST_CASE("more sockets readable at once than one drain takes are all read") {
    EchoServer echo(4);
    auto& [io, limits, frames_seen, server] = echo;
    // Accepted first, then every client sends before the loop runs again: 150 sockets
    // become readable together, more than the 64 a drain takes.
    constexpr std::size_t kClients = 150;
    std::vector<tcp::socket> clients;
    for (std::size_t i = 0; i < kClients; ++i) {
        clients.emplace_back(io);
        clients.back().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()));
    }
    REQUIRE(run_until(io, [&] { return server.connections() == kClients; }));
    for (auto& c : clients)
        asio::write(c, asio::buffer(frame_of("ping")));
    REQUIRE(run_until(io, [&] { return frames_seen == kClients; }));
    // The server writes an answer on a later turn of its loop, which runs only here: wait
    // until every answer is in before the blocking reads (a read would wait forever for an
    // answer the stopped loop still holds).
    REQUIRE(run_until(io, [&] {
        for (auto& c : clients)
            if (c.available() < 8) return false;
        return true;
    }));
    for (auto& c : clients) {
        std::string answer(8, '\0');
        asio::read(c, asio::buffer(answer));
        CHECK(answer.substr(4) == "ping");
    }
    server.stop();
}
