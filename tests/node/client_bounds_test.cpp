// What hostile or careless clients can cost a real dueqd: frame headers that declare
// 16 MiB and send nothing more, more connections than the caps, connections that go
// silent, and a pipeline deeper than the in-flight cap. Each bound is seen from outside
// (memory in /proc, connections closed, answers), the way an operator would see it.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <boost/asio.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "node/process.h"
#include "node/support.h"

using namespace dueq::test;
using namespace std::chrono;
namespace asio = boost::asio;

namespace {

// Resident memory of a process, in KiB (VmRSS in /proc/PID/status).
long rss_kib(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

struct Node {
    std::filesystem::path dir;
    std::unique_ptr<DueqdProcess> process;
};

Node start_with_limits(const std::string& name, const std::string& limits) {
    Node n{fresh_dir(name), nullptr};
    const auto config = n.dir / "dueqd.toml";
    std::ofstream(config) << "[node]\nclient_listen = \"127.0.0.1:0\"\ndata_dir = \""
                          << (n.dir / "data").string() << "\"\n\n[limits]\n"
                          << limits << "\n";
    n.process = std::make_unique<DueqdProcess>(
        DUEQD_BINARY, std::vector<std::string>{"--config", config.string()},
        (n.dir / "dueqd.log").string());
    return n;
}

// A plain socket that can be left half-written.
struct Socket {
    asio::io_context io;
    asio::ip::tcp::socket s{io};
    explicit Socket(std::uint16_t port) {
        s.connect({asio::ip::make_address("127.0.0.1"), port});
    }
    void write(const std::string& bytes) { asio::write(s, asio::buffer(bytes)); }
    // True once the node closed the connection (EOF or reset) within `limit`; any bytes
    // it sent first are in `got`.
    bool closed_within(milliseconds limit) {
        timeval tv{0, 50'000};
        ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        const auto end = steady_clock::now() + limit;
        char buf[4096];
        while (steady_clock::now() < end) {
            const auto n = ::recv(s.native_handle(), buf, sizeof buf, 0);
            if (n == 0) return true;
            if (n > 0) got.append(buf, std::size_t(n));
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
        }
        return false;
    }
    std::string got;
};

}  // namespace

TEST_CASE("frame headers declaring 16 MiB cost a bounded amount and are closed by the deadline") {
    auto node = start_with_limits("declared-flood", "frame_timeout_ms = 1500");
    const pid_t pid = node.process->pid();
    const long before = rss_kib(pid);
    REQUIRE(before > 0);
    constexpr int kConnections = 200;
    std::vector<std::unique_ptr<Socket>> flood;
    for (int i = 0; i < kConnections; ++i) {
        flood.push_back(std::make_unique<Socket>(node.process->port()));
        flood.back()->write(std::string("\x01\x00\x00\x00", 4) + "\x85");  // 16 MiB declared
    }
    std::this_thread::sleep_for(500ms);
    const long during = rss_kib(pid);
    WARN("RSS before " << before << " KiB, with " << kConnections
                       << " frames declared: " << during << " KiB");
    // 200 x 16 MiB would be over 3 GiB; a few KiB each is what is allowed.
    CHECK(during - before < 64 * 1024);
    const auto t0 = steady_clock::now();
    for (auto& s : flood)
        CHECK(s->closed_within(5s));
    const auto took = duration_cast<milliseconds>(steady_clock::now() - t0).count();
    CHECK(took < 4000);
    // They are told why before the close.
    CHECK(flood.front()->got.find("frame_timeout_ms") != std::string::npos);
    // A well-behaved client was never in trouble.
    RawClient c(node.process->port());
    CHECK(c.call("ping", 1).ok());
}

TEST_CASE("connection caps: over the cap a client is told unavailable and closed") {
    auto node = start_with_limits("conn-caps", "max_connections_per_address = 5");
    std::vector<std::unique_ptr<RawClient>> open;
    for (int i = 0; i < 5; ++i) {
        open.push_back(std::make_unique<RawClient>(node.process->port()));
        REQUIRE(open.back()->call("ping", 1).ok());
    }
    Socket sixth(node.process->port());
    REQUIRE(sixth.closed_within(3s));
    CHECK(sixth.got.find("unavailable") != std::string::npos);
    CHECK(sixth.got.find("max_connections_per_address") != std::string::npos);
    // One closes: there is room again.
    open.pop_back();
    std::this_thread::sleep_for(200ms);
    RawClient again(node.process->port());
    CHECK(again.call("ping", 2).ok());
}

TEST_CASE("an idle connection is closed; one waiting on a blocking take is not") {
    auto node = start_with_limits("idle", "idle_timeout_ms = 400");
    Socket idle(node.process->port());
    RawClient waiting(node.process->port());
    waiting.send("take", 1, {{"queue", waiting.str("q")}, {"timeout_ms", waiting.obj(1500)}});
    const auto t0 = steady_clock::now();
    REQUIRE(idle.closed_within(3s));
    const auto took = duration_cast<milliseconds>(steady_clock::now() - t0).count();
    CHECK(took >= 300);
    // The take's connection had something in flight: it gets its (empty) answer.
    auto r = waiting.read(3s);
    REQUIRE(r);
    CHECK(r->ok());
    CHECK(r->id() == 1);
}

TEST_CASE("at the in-flight cap the node stops reading a connection until it answers") {
    auto node = start_with_limits("in-flight", "max_in_flight = 2");
    RawClient c(node.process->port());
    c.send("take", 1, {{"queue", c.str("q")}, {"timeout_ms", c.obj(60'000)}});
    c.send("take", 2, {{"queue", c.str("q")}, {"timeout_ms", c.obj(60'000)}});
    c.send("ping", 3);
    CHECK_FALSE(c.read(500ms));  // two takes wait: the ping is not even read
    RawClient other(node.process->port());
    REQUIRE(other.call("put", 1, {{"queue", other.str("q")}, {"key", other.str("k")},
                                  {"payload", other.obj(1)}})
                .ok());
    std::set<std::uint64_t> answered;
    for (int i = 0; i < 2; ++i) {
        auto r = c.read(3s);
        REQUIRE(r);
        answered.insert(r->id());
    }
    CHECK(answered.count(3) == 1);  // the ping, read once a take was answered
    // 3000 pipelined requests on one connection still all get answered.
    RawClient many(node.process->port());
    for (std::uint64_t i = 0; i < 3000; ++i)
        many.send("ping", 100 + i);
    int ok = 0;
    while (auto r = many.read(2s)) {
        ok += r->ok() ? 1 : 0;
        if (ok == 3000) break;
    }
    CHECK(ok == 3000);
}

// The same findings as in test_protocol, against the real process.
TEST_CASE("dueqd: 20,000 parked takes keep the loop responsive; one put wakes one") {
    auto node = start_with_limits("parked-takes", "max_in_flight = 30000");
    RawClient c(node.process->port());
    RawClient probe(node.process->port());
    auto applied = [&](std::uint64_t id) { return probe.call("status", id).u("applied_index"); };
    constexpr std::uint64_t kParked = 20'000;
    for (std::uint64_t i = 0; i < kParked; ++i)
        c.send("take", 100 + i, {{"queue", c.str("jobs")}, {"timeout_ms", c.obj(120'000)}});
    // A ping on another connection while the takes park, and once they have: the loop
    // answers in milliseconds, not after a walk over every waiter.
    std::int64_t worst_ms = 0;
    for (int i = 0; i < 50; ++i) {
        const auto t0 = steady_clock::now();
        REQUIRE(probe.call("ping", 1000 + std::uint64_t(i)).ok());
        worst_ms = std::max<std::int64_t>(
            worst_ms, duration_cast<milliseconds>(steady_clock::now() - t0).count());
    }
    WARN("worst ping while 20,000 takes parked: " << worst_ms << " ms");
    const auto before = applied(1);
    c.send("put", 2, {{"queue", c.str("jobs")}, {"key", c.str("k")}, {"payload", c.str("v")}});
    std::size_t handed_out = 0;
    bool put_ok = false;
    while (!put_ok || handed_out == 0) {
        auto r = c.read();
        REQUIRE(r);
        if (r->id() == 2) {
            put_ok = r->ok();
            continue;
        }
        REQUIRE(r->ok());
        handed_out += r->find("tasks")->via.array.size;
    }
    CHECK(handed_out == 1);
    const auto after = applied(3);
    CHECK(after - before <= 3);  // the put and the one take it woke (an Advance at most)
    const auto t0 = steady_clock::now();
    CHECK(probe.call("ping", 4).ok());
    CHECK(duration_cast<milliseconds>(steady_clock::now() - t0).count() < 1000);
}

TEST_CASE("dueqd: a key that is not UTF-8 comes back as bin, a UTF-8 one as str") {
    auto node = start_with_limits("key-types", "");
    RawClient c(node.process->port());
    auto bin = [&](const std::string& bytes) { return c.bin(bytes); };
    const std::string raw = "tok-\xff\xfe";
    REQUIRE(c.call("put", 1, {{"key", bin(raw)}, {"payload", c.str("v")}}).ok());
    REQUIRE(c.call("put", 2, {{"key", bin("plain")}, {"payload", c.str("w")}}).ok());
    auto key_type = [&](const std::string& key, std::uint64_t id) {
        auto got = c.call("get", id, {{"key", bin(key)}});
        REQUIRE(got.ok());
        std::map<std::string, msgpack::object> fields;
        got.find("task")->convert(fields);
        return fields.at("key").type;
    };
    CHECK(key_type(raw, 3) == msgpack::type::BIN);
    CHECK(key_type("plain", 4) == msgpack::type::STR);
}
