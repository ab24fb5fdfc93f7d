// The fault proxy end to end, in-process. Timing checks assert lower bounds only.
#include "faultproxy/proxy_test_harness.h"

using namespace dueq::faultproxy::test;

TEST_CASE("faultproxy: pass forwards 1 MiB both ways intact") {
    Harness h;
    auto [c, t] = h.connect_pair();
    for (int round = 0; round < 2; ++round) {
        auto& from = round == 0 ? c : t;
        auto& to = round == 0 ? t : c;
        const auto data = pattern(1 << 20, round + 1);
        std::atomic<bool> wrote{false};
        std::thread writer([&] { wrote = write_all(from, data, 20s); });
        const auto got = read_n(to, data.size(), 20s);
        writer.join();
        REQUIRE(wrote);
        REQUIRE(got.data.size() == data.size());
        REQUIRE(got.data == data);
    }
    const auto status = h.cmd("status");
    CHECK(status.find("\"bytes_up\":1048576,\"bytes_down\":1048576") != std::string::npos);
    CHECK(status.find("\"connections\":1") != std::string::npos);
    REQUIRE(h.shutdown());  // stop() leaves the io_context with nothing to do
}

TEST_CASE("faultproxy: blackhole up holds the bytes, pass delivers them in order") {
    Harness h;
    auto [c, t] = h.connect_pair();
    REQUIRE(write_all(c, "first-", 2s));
    REQUIRE(read_n(t, 6, 3s).data == "first-");

    REQUIRE(h.cmd("set n1-n2 up blackhole") == "ok");
    const auto data = pattern(100 * 1000, 7);
    std::atomic<bool> wrote{false};
    std::thread writer([&] { wrote = write_all(c, data, 20s); });
    const auto silent = read_n(t, 1, 300ms);
    CHECK(silent.data.empty());
    CHECK_FALSE(silent.closed);
    // Only one direction is cut: the connection is open and the target still gets through.
    REQUIRE(write_all(t, "pong", 2s));
    CHECK(read_n(c, 4, 3s).data == "pong");
    CHECK(h.cmd("status").find("\"up\":\"blackhole\",\"down\":\"pass\"") != std::string::npos);

    REQUIRE(h.cmd("set n1-n2 up pass") == "ok");
    const auto got = read_n(t, data.size(), 10s);
    writer.join();
    REQUIRE(wrote);
    REQUIRE(got.data == data);
}

TEST_CASE("faultproxy: blackhole down lets the target hear the dialer, not the reverse") {
    Harness h;
    // Set before the connection exists: modes apply to future connections too.
    REQUIRE(h.cmd("set n1-n2 down blackhole") == "ok");
    auto [c, t] = h.connect_pair();
    REQUIRE(write_all(c, "hello", 2s));
    CHECK(read_n(t, 5, 3s).data == "hello");
    REQUIRE(write_all(t, "world", 2s));
    const auto silent = read_n(c, 1, 300ms);
    CHECK(silent.data.empty());
    CHECK_FALSE(silent.closed);
    REQUIRE(h.cmd("heal") == "ok");
    CHECK(read_n(c, 5, 3s).data == "world");
}

TEST_CASE("faultproxy: delay slows a round trip and keeps the order") {
    Harness h;
    REQUIRE(h.cmd("set n1-n2 both delay 50 80") == "ok");
    auto [c, t] = h.connect_pair();
    const auto start = Clock::now();
    REQUIRE(write_all(c, "x", 2s));
    REQUIRE(read_n(t, 1, 3s).data == "x");
    REQUIRE(write_all(t, "y", 2s));
    REQUIRE(read_n(c, 1, 3s).data == "y");
    CHECK(Clock::now() - start >= 95ms);

    // Many small writes, each its own chunk with its own random delay: none may overtake.
    std::string sent;
    for (int i = 0; i < 200; ++i) {
        const auto msg = std::to_string(1000000 + i) + ";";
        sent += msg;
        REQUIRE(write_all(c, msg, 2s));
        if (i % 20 == 0) std::this_thread::sleep_for(3ms);
    }
    CHECK(read_n(t, sent.size(), 10s).data == sent);
}

TEST_CASE("faultproxy: rate caps the bandwidth") {
    Harness h;
    REQUIRE(h.cmd("set n1-n2 up rate 100000") == "ok");
    auto [c, t] = h.connect_pair();
    const auto data = pattern(200 * 1000, 3);
    const auto start = Clock::now();
    std::atomic<bool> wrote{false};
    std::thread writer([&] { wrote = write_all(c, data, 30s); });
    const auto got = read_n(t, data.size(), 30s);
    const auto took = Clock::now() - start;
    writer.join();
    REQUIRE(wrote);
    REQUIRE(got.data == data);
    CHECK(took >= 1500ms);
}

TEST_CASE("faultproxy: drop closes the link's connections and nothing else") {
    Harness h;
    auto [c, t] = h.connect_pair();
    REQUIRE(write_all(c, "a", 2s));
    REQUIRE(read_n(t, 1, 3s).data == "a");
    REQUIRE(h.cmd("drop n1-n2") == "ok dropped 1");
    CHECK(read_n(c, 1, 3s).closed);
    CHECK(read_n(t, 1, 3s).closed);
    CHECK(h.cmd("status").find("\"connections\":0") != std::string::npos);
    auto [c2, t2] = h.connect_pair();  // still accepting, still passing
    REQUIRE(write_all(c2, "b", 2s));
    CHECK(read_n(t2, 1, 3s).data == "b");
}

TEST_CASE("faultproxy: reject closes existing and new connections until accept") {
    Harness h;
    auto [c, t] = h.connect_pair();
    REQUIRE(h.cmd("reject n1-n2") == "ok");
    CHECK(read_n(c, 1, 3s).closed);
    auto c2 = h.dial(h.link_port);  // the listener still accepts, then closes at once
    CHECK(read_n(c2, 1, 3s).closed);
    CHECK_FALSE(h.accept_target(200ms));  // and never dials the target
    REQUIRE(h.cmd("accept n1-n2") == "ok");
    auto [c3, t3] = h.connect_pair();
    REQUIRE(write_all(c3, "c", 2s));
    CHECK(read_n(t3, 1, 3s).data == "c");
}

TEST_CASE("faultproxy: a failed upstream connect closes the dialer's connection") {
    Harness h;
    auto c = h.dial(h.dead_link_port);
    CHECK(read_n(c, 1, 3s).closed);
    CHECK(h.cmd("status").find("\"connect_failures\":1") != std::string::npos);
}

TEST_CASE("faultproxy: a half close is passed on after the delayed bytes") {
    Harness h;
    REQUIRE(h.cmd("set n1-n2 up delay 30 30") == "ok");
    auto [c, t] = h.connect_pair();
    REQUIRE(write_all(c, "bye", 2s));
    c.shutdown(tcp::socket::shutdown_send);
    const auto got = read_n(t, 4, 3s);
    CHECK(got.data == "bye");
    CHECK(got.closed);
    REQUIRE(write_all(t, "late reply", 2s));  // the other direction still flows
    CHECK(read_n(c, 10, 3s).data == "late reply");
    t.shutdown(tcp::socket::shutdown_send);
    CHECK(read_n(c, 1, 3s).closed);
}

TEST_CASE("faultproxy: the control protocol refuses garbage and changes nothing") {
    Harness h;
    const auto before = h.cmd("status");
    REQUIRE(before.rfind("ok {\"links\":{\"n1-n2\":", 0) == 0);
    for (const char* bad : {"bogus",
                            "set",
                            "set n1-n2",
                            "set n1-n2 up",
                            "set nope up pass",
                            "set n1-n2 sideways pass",
                            "set n1-n2 up warp",
                            "set n1-n2 up pass extra",
                            "set n1-n2 up blackhole 5",
                            "set n1-n2 up delay 80 50",
                            "set n1-n2 up delay 5",
                            "set n1-n2 up delay -1 5",
                            "set * up delay 10 20 delay 10 20",
                            "set n1-n2 up rate 0",
                            "set n1-n2 up rate 12x",
                            "set n1-n2 both delay 10 20 rate",
                            "drop",
                            "drop nope",
                            "reject nope",
                            "accept",
                            "accept n1-n2 n1-n3",
                            "ping extra",
                            "heal now",
                            "status x",
                            "\x01\xff garbage"}) {
        INFO(bad);
        CHECK(h.cmd(bad).rfind("error ", 0) == 0);
    }
    CHECK(h.cmd("status") == before);

    Control second(h.tio, h.proxy->control_port());  // several control connections at once
    CHECK(second.cmd("ping") == "ok pong");
    REQUIRE(h.cmd("set * both delay 20 100 rate 100000") == "ok");
    CHECK(second.cmd("status").find("\"down\":\"delay 20 100 rate 100000\"") != std::string::npos);
    REQUIRE(second.cmd("heal") == "ok");
    CHECK(h.cmd("status") == before);

    // An overlong line closes that control connection only.
    REQUIRE(write_all(second.sock, std::string(5000, 'a'), 2s));
    CHECK(read_n(second.sock, 1, 3s).closed);
    CHECK(h.cmd("ping") == "ok pong");
}

TEST_CASE("faultproxy: link specs parse strictly") {
    const auto spec = dueq::faultproxy::parse_link_spec("n1-n2=127.0.0.1:0@127.0.0.1:7802");
    CHECK(spec.name == "n1-n2");
    CHECK(spec.listen.port() == 0);
    CHECK(spec.target.port() == 7802);
    for (const char* bad : {"n1-n2", "=127.0.0.1:0@127.0.0.1:1", "a*=127.0.0.1:0@127.0.0.1:1",
                            "a=127.0.0.1@127.0.0.1:1", "a=127.0.0.1:0@127.0.0.1:70000",
                            "a=127.0.0.1:0@host.example:1"}) {
        INFO(bad);
        CHECK_THROWS_AS(dueq::faultproxy::parse_link_spec(bad), std::invalid_argument);
    }
}
