// The client protocol over real TCP against an in-process node (docs/protocol.md).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "node/support.h"

using namespace dueq::test;
using namespace std::chrono;

TEST_CASE("put, get and take return the payload verbatim") {
    TestNode node("verbatim");
    RawClient c(node.port());
    auto& z = c.zone;
    std::map<std::string, int> payload{{"a", 1}, {"b", 2}};
    auto put = c.call("put", 1, {{"key", c.str("k1")}, {"payload", msgpack::object(payload, z)}});
    CHECK(put.ok());
    CHECK(put.u("version") >= 1);
    auto got = c.call("get", 2, {{"key", c.str("k1")}});
    REQUIRE(got.ok());
    auto task = got.find("task");
    REQUIRE(task);
    std::map<std::string, msgpack::object> fields;
    task->convert(fields);
    CHECK(fields.at("payload").as<std::map<std::string, int>>() == payload);
    CHECK(fields.at("status").as<std::string>() == "ready");
    auto take = c.call("take", 3);
    REQUIRE(take.ok());
    auto tasks = take.find("tasks");
    REQUIRE(tasks->via.array.size == 1);
    std::map<std::string, msgpack::object> t;
    tasks->via.array.ptr[0].convert(t);
    CHECK(t.at("key").as<std::string>() == "k1");
    CHECK(t.at("payload").as<std::map<std::string, int>>() == payload);
    CHECK(t.at("lease").as<std::uint64_t>() > 0);
}

TEST_CASE("pipelined requests all get their own answer") {
    TestNode node("pipeline");
    RawClient c(node.port());
    const int n = 200;
    std::string batch;
    for (int i = 0; i < n; ++i)
        c.send("put", 1000 + i, {{"key", c.str("k" + std::to_string(i))}, {"payload", c.obj(i)}});
    std::set<std::uint64_t> ids;
    for (int i = 0; i < n; ++i) {
        auto r = c.read();
        REQUIRE(r);
        CHECK(r->ok());
        ids.insert(r->id());
    }
    CHECK(ids.size() == std::size_t(n));
    CHECK(*ids.begin() == 1000);
    CHECK(*ids.rbegin() == 1000 + n - 1);
    auto stats = c.call("stats", 1, {{"queue", c.str("default")}});
    CHECK(stats.u("ready") == std::uint64_t(n));
}

// The node reads what a socket holds and then waits for more: a request that arrives in
// pieces, with pauses between, must still be read to its end; one larger than the first
// read buffer (16 KiB) fills it, and the rest must be read without another wake-up.
TEST_CASE("requests arriving in pieces, and larger than the read buffer, are answered") {
    TestNode node("pieces");
    RawClient c(node.port());
    const std::string small = c.frame("put", 1, {{"key", c.str("a")}, {"payload", c.obj(7)}});
    for (char b : small) {
        c.send_raw(std::string(1, b));
        std::this_thread::sleep_for(2ms);
    }
    auto r = c.read(2s);
    REQUIRE(r);
    CHECK(r->ok());
    CHECK(r->id() == 1);

    const std::string big_payload(300'000, 'x');
    const std::string big =
        c.frame("put", 2, {{"key", c.str("b")}, {"payload", c.str(big_payload)}});
    const std::string ping = c.frame("ping", 3);
    c.send_raw(big.substr(0, 1000));
    std::this_thread::sleep_for(20ms);
    c.send_raw(big.substr(1000) + ping);  // one write: the ping follows in the same bytes
    std::set<std::uint64_t> ids;
    for (int i = 0; i < 2; ++i) {
        auto a = c.read(5s);
        REQUIRE(a);
        CHECK(a->ok());
        ids.insert(a->id());
    }
    CHECK(ids == std::set<std::uint64_t>{2, 3});
    auto got = c.call("get", 4, {{"key", c.str("b")}});
    REQUIRE(got.ok());
    std::map<std::string, msgpack::object> fields;
    got.find("task")->convert(fields);
    CHECK(fields.at("payload").as<std::string>() == big_payload);
}

TEST_CASE("a blocking take answers out of order and is woken by a put") {
    TestNode node("blocking");
    RawClient worker(node.port());
    RawClient producer(node.port());
    worker.send("take", 1, {{"queue", worker.str("jobs")}, {"timeout_ms", worker.obj(10000)}});
    worker.send("ping", 2);
    auto first = worker.read();
    REQUIRE(first);
    CHECK(first->id() == 2);  // the ping did not wait behind the take
    const auto put_at = steady_clock::now();
    REQUIRE(producer
                .call("put", 1,
                      {{"queue", producer.str("jobs")},
                       {"key", producer.str("j1")},
                       {"payload", producer.obj(1)}})
                .ok());
    auto taken = worker.read(seconds(12));
    const auto waited = duration_cast<milliseconds>(steady_clock::now() - put_at).count();
    REQUIRE(taken);
    CHECK(taken->id() == 1);
    CHECK(taken->find("tasks")->via.array.size == 1);
    // Woken by the put, not by its 10 s timeout.
    INFO("take woken " << waited << " ms after the put was answered");
    CHECK(waited < 5000);
    WARN("blocking take woken " << waited << " ms after the put");
}

TEST_CASE("a blocking take with nothing due answers empty at its timeout") {
    TestNode node("timeout");
    RawClient c(node.port());
    const auto t0 = steady_clock::now();
    auto r = c.call("take", 1, {{"timeout_ms", c.obj(300)}});
    const auto ms = duration_cast<milliseconds>(steady_clock::now() - t0).count();
    CHECK(r.ok());
    CHECK(r.find("tasks")->via.array.size == 0);
    CHECK(ms >= 300);
}

TEST_CASE("a blocking take is woken when a future task comes due") {
    TestNode node("comes-due");
    RawClient c(node.port());
    REQUIRE(
        c.call("put", 1,
               {{"key", c.str("soon")}, {"payload", c.obj(1)}, {"time", c.obj(wall_ms() + 300)}})
            .ok());
    CHECK(c.call("take", 2).find("tasks")->via.array.size == 0);
    auto r = c.call("take", 3, {{"timeout_ms", c.obj(5000)}});
    CHECK(r.find("tasks")->via.array.size == 1);
}

TEST_CASE("tasks of a closed connection go back to ready after the grace period") {
    TestNode node("disconnect");
    RawClient producer(node.port());
    REQUIRE(
        producer.call("put", 1, {{"key", producer.str("t")}, {"payload", producer.obj(1)}}).ok());
    {
        RawClient taker(node.port());
        auto r = taker.call("take", 1, {{"ttr_ms", taker.obj(600000)}});
        REQUIRE(r.find("tasks")->via.array.size == 1);
        taker.close();
    }
    CHECK(producer.call("take", 2).find("tasks")->via.array.size == 0);  // still held
    auto r = producer.call("take", 3, {{"timeout_ms", producer.obj(5000)}});
    CHECK(r.find("tasks")->via.array.size == 1);  // released after grace (200 ms)
}

TEST_CASE("a session resumed within the grace period keeps its tasks") {
    TestNode node("resume");
    RawClient c1(node.port());
    auto hello = c1.call("hello", 1);
    const auto session = hello.u("session");
    REQUIRE(c1.call("put", 2, {{"key", c1.str("t")}, {"payload", c1.obj(1)}}).ok());
    auto take = c1.call("take", 3, {{"ttr_ms", c1.obj(600000)}});
    REQUIRE(take.find("tasks")->via.array.size == 1);
    std::map<std::string, msgpack::object> t;
    take.find("tasks")->via.array.ptr[0].convert(t);
    const auto lease = t.at("lease").as<std::uint64_t>();
    c1.close();
    RawClient c2(node.port());
    CHECK(c2.call("hello", 1, {{"session", c2.obj(session)}}).u("session") == session);
    std::this_thread::sleep_for(milliseconds(400));  // past the grace period
    auto ack = c2.call("ack", 2, {{"key", c2.str("t")}, {"lease", c2.obj(lease)}});
    CHECK(ack.ok());
}

TEST_CASE("errors come back with their codes") {
    TestNode node("errors");
    RawClient c(node.port());
    CHECK(c.call("get", 1, {{"key", c.str("nope")}}).error_code() == "not_found");
    CHECK(c.call("delete", 2, {{"key", c.str("nope")}}).error_code() == "not_found");
    REQUIRE(
        c.call("put", 3, {{"key", c.str("k")}, {"payload", c.obj(1)}, {"mode", c.str("insert")}})
            .ok());
    CHECK(c.call("put", 4, {{"key", c.str("k")}, {"payload", c.obj(1)}, {"mode", c.str("insert")}})
              .error_code() == "exists");
    CHECK(c.call("put", 5, {{"key", c.str("x")}, {"payload", c.obj(1)}, {"mode", c.str("update")}})
              .error_code() == "not_found");
    auto take = c.call("take", 6);
    REQUIRE(take.find("tasks")->via.array.size == 1);
    std::map<std::string, msgpack::object> t;
    take.find("tasks")->via.array.ptr[0].convert(t);
    const auto lease = t.at("lease").as<std::uint64_t>();
    CHECK(c.call("ack", 7, {{"key", c.str("k")}, {"lease", c.obj(lease + 1)}}).error_code() ==
          "lease_mismatch");
    CHECK(c.call("touch", 8, {{"key", c.str("k")}, {"lease", c.obj(lease + 1)}}).error_code() ==
          "lease_mismatch");
    // A put on a taken task voids the lease: the holder's ack is now stale.
    REQUIRE(c.call("put", 9, {{"key", c.str("k")}, {"payload", c.obj(2)}}).ok());
    CHECK(c.call("ack", 10, {{"key", c.str("k")}, {"lease", c.obj(lease)}}).error_code() ==
          "lease_mismatch");
    CHECK(c.call("kick", 11, {{"count", c.obj(0)}}).error_code() == "bad_request");
    CHECK(c.call("fly", 12).error_code() == "bad_request");
}

TEST_CASE("bad input gets a clear error, and the node keeps serving") {
    dueq::node::Config cfg = TestNode::config_for("bad-input");
    cfg.limits.max_frame_bytes = 64 * 1024;
    cfg.limits.max_payload_bytes = 16 * 1024;
    cfg.limits.max_key_bytes = 64;
    TestNode node(cfg);
    RawClient bystander(node.port());
    REQUIRE(bystander.call("ping", 1).ok());

    RawClient c(node.port());
    SECTION("malformed msgpack: error, connection stays usable") {
        c.send_frame(std::string("\x82\xa2op\xc1", 5));
        auto r = c.read();
        REQUIRE(r);
        CHECK(r->error_code() == "bad_request");
        CHECK(c.call("ping", 2).ok());
    }
    SECTION("an empty frame") {
        c.send_frame("");
        CHECK(c.read()->error_code() == "bad_request");
        CHECK(c.call("ping", 2).ok());
    }
    SECTION("array32 header claiming 4 billion items") {
        c.send_frame(std::string("\xdd\xff\xff\xff\xff\x00", 6));
        auto r = c.read();
        REQUIRE(r);
        CHECK(r->error_code() == "bad_request");
        CHECK(c.call("ping", 2).ok());
    }
    SECTION("map32 header claiming 4 billion entries inside a request") {
        std::string body = "\x83\xa2op\xa3put\xa2id\x05\xa7payload";
        body += std::string("\xdf\xff\xff\xff\xff", 5);
        c.send_frame(body);
        CHECK(c.read()->error_code() == "bad_request");
    }
    SECTION("unknown op and wrong field types name the problem") {
        auto r = c.call("explode", 3);
        CHECK(r.error_code() == "bad_request");
        r = c.call("put", 4, {{"key", c.obj(12)}, {"payload", c.obj(1)}});
        CHECK(r.error_code() == "bad_request");
        r = c.call("take", 5, {{"count", c.str("many")}});
        CHECK(r.error_code() == "bad_request");
    }
    SECTION("oversized key and payload: too_large, nothing stored") {
        CHECK(c.call("put", 6, {{"key", c.str(std::string(65, 'k'))}, {"payload", c.obj(1)}})
                  .error_code() == "too_large");
        CHECK(c.call("put", 7, {{"key", c.str("k")}, {"payload", c.str(std::string(20000, 'p'))}})
                  .error_code() == "too_large");
        CHECK(c.call("stats", 8, {{"queue", c.str("default")}}).u("ready") == 0);
    }
    SECTION("oversized frame: too_large, then the connection is closed") {
        c.send_raw(std::string("\x7f\xff\xff\xff", 4) + "garbage");
        auto r = c.read();
        REQUIRE(r);
        CHECK(r->error_code() == "too_large");
        CHECK(c.closed_by_peer(milliseconds(500)));
    }
    SECTION("random garbage frames never take the node down") {
        std::mt19937 rng(7);
        for (int i = 0; i < 500; ++i) {
            std::string body(rng() % 64, '\0');
            for (auto& ch : body)
                ch = char(rng());
            c.send_frame(body);
        }
        int answered = 0;
        while (auto r = c.read(milliseconds(500)))
            answered += r->ok() ? 0 : 1;
        CHECK(answered == 500);
    }
    // Whatever happened on the other connection, this one is still served.
    CHECK(bystander.call("ping", 99).ok());
    CHECK(RawClient(node.port()).call("ping", 1).ok());
}

TEST_CASE("with auth_token set, only ping and hello work before a hello with the token") {
    auto cfg = TestNode::config_for("auth");
    cfg.auth_token = "s3cret";
    TestNode node(cfg);
    // Every failure is answered `unauthorized`, and then the connection is closed.
    msgpack::zone z;  // owns the fields' strings
    auto refused = [&](const std::string& op,
                       const std::map<std::string, msgpack::object>& fields = {}) {
        RawClient c(node.port());
        CHECK(c.call("ping", 1).ok());
        CHECK(c.call(op, 2, fields).error_code() == "unauthorized");
        return c.closed_by_peer();
    };
    CHECK(refused("put", {{"key", msgpack::object(std::string("k"), z)},
                          {"payload", msgpack::object(1)}}));
    CHECK(refused("hello"));
    CHECK(refused("hello", {{"token", msgpack::object(std::string("wrong"), z)}}));
    CHECK(refused("hello", {{"token", msgpack::object(std::string("s3cre"), z)}}));
    CHECK(refused("get", {{"key", msgpack::object(std::string("k"), z)}}));
    RawClient c(node.port());
    CHECK(c.call("hello", 6, {{"token", c.str("s3cret")}}).ok());
    CHECK(c.call("put", 7, {{"key", c.str("k")}, {"payload", c.obj(1)}}).ok());
    RawClient other(node.port());  // authorization is per connection
    CHECK(other.call("stats", 1).error_code() == "unauthorized");
}

TEST_CASE("a key comes back as str when it is valid UTF-8 and as bin otherwise") {
    TestNode node("key-types");
    RawClient c(node.port());
    auto bin = [&](const std::string& bytes) { return c.bin(bytes); };
    const std::string raw = "tok-\xff\xfe";  // not UTF-8: a strict decoder refuses it as str
    REQUIRE(c.call("put", 1, {{"key", bin(raw)}, {"payload", c.str("v")}}).ok());
    REQUIRE(c.call("put", 2, {{"key", bin("plain")}, {"payload", c.str("w")}}).ok());

    auto key_of = [](const msgpack::object& task) {
        std::map<std::string, msgpack::object> fields;
        task.convert(fields);
        return fields.at("key");
    };
    auto got = c.call("get", 3, {{"key", bin(raw)}});
    REQUIRE(got.ok());
    const auto k = key_of(*got.find("task"));
    CHECK(k.type == msgpack::type::BIN);
    CHECK(std::string(k.via.bin.ptr, k.via.bin.size) == raw);
    // Valid UTF-8 sent as bin comes back as str: the reply carries what the key is.
    auto plain = c.call("get", 4, {{"key", bin("plain")}});
    REQUIRE(plain.ok());
    CHECK(key_of(*plain.find("task")).type == msgpack::type::STR);

    auto take = c.call("take", 5, {{"count", c.obj(2)}});
    REQUIRE(take.ok());
    const auto* tasks = take.find("tasks");
    REQUIRE(tasks->via.array.size == 2);
    int bins = 0;
    for (std::uint32_t i = 0; i < 2; ++i) {
        const auto t = key_of(tasks->via.array.ptr[i]);
        if (t.type == msgpack::type::BIN) {
            ++bins;
            CHECK(std::string(t.via.bin.ptr, t.via.bin.size) == raw);
        }
    }
    CHECK(bins == 1);
}

TEST_CASE("20,000 parked takes: one put wakes one of them and adds one take to the log") {
    auto cfg = TestNode::config_for("many-waiters");
    cfg.limits.max_in_flight = 30'000;  // all on one connection
    TestNode node(cfg);
    RawClient c(node.port());
    auto applied = [&](std::uint64_t id) { return c.call("status", id).u("applied_index"); };
    constexpr std::uint64_t kParked = 20'000;
    const auto t0 = steady_clock::now();
    for (std::uint64_t i = 0; i < kParked; ++i)
        c.send("take", 100 + i, {{"queue", c.str("jobs")}, {"timeout_ms", c.obj(120'000)}});
    // Answered after every take before it was parked (one connection, in order).
    const auto before = applied(1);
    WARN("parking " << kParked << " takes and a status round trip took "
                    << duration_cast<milliseconds>(steady_clock::now() - t0).count() << " ms");
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
    // The put, and the one take it woke; every other waiter stays parked.
    const auto after = applied(3);
    CHECK(after - before <= 3);
    CHECK(c.call("ping", 4).ok());
}
