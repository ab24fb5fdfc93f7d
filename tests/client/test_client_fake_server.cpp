// The Client against a scripted server: pipelining, out-of-order replies, deadlines,
// not_leader redirects, and what is (and is not) resent after a broken connection.
#include <catch2/catch.hpp>

#include <chrono>
#include <atomic>
#include <future>

#include "client/client.h"
#include "client/payload.h"
#include "client/fake_server.h"

using namespace dueq::client;
using namespace dueq::client::testing;
using namespace std::chrono_literals;

namespace {

ClientOptions options_for(std::vector<std::string> seeds) {
    ClientOptions o;
    o.seeds = std::move(seeds);
    o.call_timeout = 2000ms;
    o.connect_timeout = 1000ms;
    return o;
}

template <class T>
bool ready_within(std::future<T>& f, std::chrono::milliseconds d) {
    return f.wait_for(d) == std::future_status::ready;
}

std::size_t count_op(const FakeServer& s, const std::string& op) {
    std::size_t n = 0;
    for (const auto& r : s.requests()) n += r.value("op", "") == op;
    return n;
}

}  // namespace

TEST_CASE("ping reaches the server and says hello first", "[client]") {
    FakeServer server([](const FakeServer::ConnPtr&, const Json& req) { return basic_reply(req); });
    Client client(options_for({server.address()}));
    auto r = client.ping();
    REQUIRE(r.ok());
    auto reqs = server.requests();
    REQUIRE(reqs.size() == 2);
    CHECK(reqs[0]["op"] == "hello");
    CHECK(reqs[1]["op"] == "ping");
    CHECK(reqs[0]["id"] != reqs[1]["id"]);
    CHECK(client.current_session() == std::optional<uint64_t>(1));
}

TEST_CASE("pipelined replies are matched by id, out of order", "[client]") {
    std::mutex mu;
    FakeServer::ConnPtr held_conn;
    Json held_take;
    FakeServer* srv = nullptr;
    FakeServer server([&](const FakeServer::ConnPtr& c, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        if (req["op"] == "take") {  // held until the test releases it
            std::lock_guard<std::mutex> lock(mu);
            held_conn = c;
            held_take = req;
            return std::nullopt;
        }
        if (req["op"] == "get") {
            Json task = {{"key", req["key"]}, {"payload", req["key"]}, {"status", "ready"},
                         {"time", 5}, {"attempts", 0}, {"version", 3}};
            return ok_reply(req, {{"task", task}});
        }
        (void)srv;
        return error_reply(req, "bad_request");
    });
    srv = &server;
    Client client(options_for({server.address()}));

    TakeRequest take;
    take.queue = "q";
    take.timeout_ms = 10000;
    auto take_future = client.call_async(take);
    std::vector<std::future<Result<GetResponse>>> gets;
    for (int i = 0; i < 50; ++i) {
        GetRequest g;
        g.key = "k" + std::to_string(i);
        gets.push_back(client.call_async(g));
    }
    for (int i = 0; i < 50; ++i) {
        auto r = gets[i].get();
        REQUIRE(r.ok());
        CHECK(r->task.key == "k" + std::to_string(i));
        auto json = payload_to_json(r->task.payload);
        REQUIRE(json.ok());
        CHECK(*json == "\"k" + std::to_string(i) + "\"");
    }
    CHECK_FALSE(ready_within(take_future, 0ms));

    Json task = {{"key", "t1"}, {"payload", {{"a", 1}}}, {"time", 7}, {"lease", 42},
                 {"lease_until", 99}, {"attempts", 1}};
    {
        std::lock_guard<std::mutex> lock(mu);
        REQUIRE(held_conn);
        server.send(held_conn, ok_reply(held_take, {{"tasks", Json::array({task})}}));
    }
    auto taken = take_future.get();
    REQUIRE(taken.ok());
    REQUIRE(taken->tasks.size() == 1);
    CHECK(taken->tasks[0].key == "t1");
    CHECK(taken->tasks[0].lease == 42);
    CHECK(*payload_to_json(taken->tasks[0].payload) == R"({"a":1})");
    CHECK(count_op(server, "take") == 1);
    std::lock_guard<std::mutex> lock(mu);
    held_conn.reset();  // must not outlive the server's io_context
}

TEST_CASE("a call that gets no answer times out; later calls still work", "[client]") {
    FakeServer server([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (req["op"] == "delete") return std::nullopt;  // never answered
        return basic_reply(req);
    });
    Client client(options_for({server.address()}));
    REQUIRE(client.ping().ok());
    CallOptions quick;
    quick.timeout = 100ms;
    const auto start = std::chrono::steady_clock::now();
    auto r = client.del({.queue = "q", .key = "k"}, quick);
    const auto took = std::chrono::steady_clock::now() - start;
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == Code::timeout);
    CHECK(took >= 100ms);
    CHECK(took < 1500ms);
    CHECK(client.ping().ok());
}

TEST_CASE("a server that went silent is left for the next seed", "[client]") {
    // Serves, then answers nothing: a process frozen by SIGSTOP, whose kernel still
    // holds the connection open.
    std::atomic<bool> awake{true};
    FakeServer frozen([&](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (awake) return basic_reply(req);
        return std::nullopt;
    });
    FakeServer good([](const FakeServer::ConnPtr&, const Json& req) { return basic_reply(req); });
    Client client(options_for({frozen.address(), good.address()}));
    REQUIRE(client.ping().ok());
    REQUIRE(client.current_address() == frozen.address());
    awake = false;
    CallOptions quick;
    quick.timeout = 200ms;
    auto r = client.del({.queue = "q", .key = "k"}, quick);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == Code::timeout);
    // Without dropping the silent connection, this ping would wait on it and time out.
    auto p = client.ping(quick);
    CHECK(p.ok());
    CHECK(count_op(good, "ping") == 1);
    CHECK(client.current_address() == good.address());
}

TEST_CASE("no reachable server ends in unavailable at the deadline", "[client]") {
    std::string dead_address;
    {
        FakeServer gone([](const FakeServer::ConnPtr&, const Json& req) { return basic_reply(req); });
        dead_address = gone.address();
    }
    Client client(options_for({dead_address}));
    CallOptions quick;
    quick.timeout = 300ms;
    auto r = client.ping(quick);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == Code::unavailable);
}

TEST_CASE("not_leader with a leader address is followed", "[client]") {
    FakeServer leader([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return ok_reply(req, {{"version", 9}});
    });
    const std::string leader_addr = leader.address();
    FakeServer follower([&](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return error_reply(req, "not_leader", leader_addr);
    });
    Client client(options_for({follower.address()}));
    PutRequest put;
    put.key = "k";
    put.payload = *payload_from_json(R"({"x":1})");
    auto r = client.put(put);
    REQUIRE(r.ok());
    CHECK(r->version == 9);
    CHECK(count_op(follower, "put") == 1);
    CHECK(count_op(leader, "put") == 1);
    CHECK(client.current_address() == leader_addr);
    // Later calls go straight to the leader.
    REQUIRE(client.put(put).ok());
    CHECK(count_op(follower, "put") == 1);
}

TEST_CASE("not_leader without a leader retries on the next seed", "[client]") {
    FakeServer good([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return ok_reply(req, {{"kicked", 2}});
    });
    FakeServer lost([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return error_reply(req, "not_leader");
    });
    Client client(options_for({lost.address(), good.address()}));
    auto r = client.kick({.queue = "q", .count = 5});
    REQUIRE(r.ok());
    CHECK(r->kicked == 2);
}

TEST_CASE("no_quorum goes to the leader it names, or to the next seed", "[client]") {
    FakeServer leader([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (req.value("op", "") == "hello")  // a session of its own, unlike the others' 1
            return ok_reply(req, {{"session", 2}, {"node_id", "n2"}, {"protocol", 1}});
        if (auto r = basic_reply(req)) return r;
        return ok_reply(req, {{"kicked", 2}});
    });
    const std::string leader_addr = leader.address();
    FakeServer knows([&](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return error_reply(req, "no_quorum", leader_addr);
    });
    FakeServer cut_off([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return error_reply(req, "no_quorum");
    });
    for (const auto& seeds : {std::vector<std::string>{knows.address()},
                              std::vector<std::string>{cut_off.address(), leader_addr}}) {
        Client client(options_for(seeds));
        auto r = client.kick({.queue = "q", .count = 5});
        REQUIRE(r.ok());
        CHECK(r->kicked == 2);
        CHECK(client.current_address() == leader_addr);
    }
    // Each client offered the leader the session the first node gave it (sessions are
    // the cluster's, docs/protocol.md §5).
    std::size_t offered = 0;
    for (const auto& r : leader.requests())
        offered += r.value("op", "") == "hello" && r.contains("session") && r["session"] == 1;
    CHECK(offered == 2);
}

TEST_CASE("redirects to a named leader stop after max_redirects", "[client]") {
    // Two nodes that name each other as the leader.
    std::string a_addr, b_addr;
    FakeServer a([&](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return error_reply(req, "not_leader", b_addr);
    });
    FakeServer b([&](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return error_reply(req, "not_leader", a_addr);
    });
    a_addr = a.address();
    b_addr = b.address();
    auto opts = options_for({a_addr});
    opts.max_redirects = 2;
    Client client(opts);
    auto r = client.del({.key = "k"});
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == Code::not_leader);
    CHECK(count_op(a, "delete") + count_op(b, "delete") == 3);
}

TEST_CASE("without a leader named, refusals are retried until the deadline", "[client]") {
    FakeServer a([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return error_reply(req, "no_quorum");
    });
    FakeServer b([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return error_reply(req, "not_leader");
    });
    Client client(options_for({a.address(), b.address()}));
    CallOptions quick;
    quick.timeout = 2500ms;  // refused at 0, 50, 150, 350, 750 and 1550 ms
    auto r = client.del({.key = "k"}, quick);
    REQUIRE_FALSE(r.ok());
    // The last refusal: not applied.
    CHECK((r.code() == Code::no_quorum || r.code() == Code::not_leader));
    CHECK_FALSE(r.error().maybe_applied);
    CHECK(count_op(a, "delete") + count_op(b, "delete") > 5);  // more than max_redirects
    // A cut-off node with no other seed to try: its no_quorum is the answer (dueqctl --addr).
    Client alone(options_for({a.address()}));
    auto before = count_op(a, "delete");
    CHECK(alone.del({.key = "k"}).code() == Code::no_quorum);
    CHECK(count_op(a, "delete") == before + 1);
    // max_redirects = 0: every refusal as it is.
    auto opts = options_for({b.address(), a.address()});
    opts.max_redirects = 0;
    Client once(opts);
    before = count_op(b, "delete");
    CHECK(once.del({.key = "k"}).code() == Code::not_leader);
    CHECK(count_op(b, "delete") == before + 1);
}

TEST_CASE("moving is retried on the same node until the bucket is served", "[client]") {
    std::atomic<int> refusals{3};
    FakeServer node([&](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        if (refusals-- > 0) return error_reply(req, "moving");
        return ok_reply(req, {});
    });
    FakeServer other([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        return error_reply(req, "not_leader");
    });
    Client client(options_for({node.address(), other.address()}));
    auto r = client.del({.key = "k"});
    REQUIRE(r.ok());
    CHECK(count_op(node, "delete") == 4);
    CHECK(count_op(other, "delete") == 0);  // the same node, not the next seed
    // Still moving at the deadline: the last refusal (not applied).
    refusals = 1000;
    CallOptions quick;
    quick.timeout = 600ms;
    auto late = client.del({.key = "k"}, quick);
    CHECK(late.code() == Code::moving);
    CHECK_FALSE(late.error().maybe_applied);
}

TEST_CASE("a broken connection resends safe ops but not unsafe ones", "[client]") {
    std::atomic<int> gets{0};
    FakeServer* self = nullptr;
    FakeServer server([&](const FakeServer::ConnPtr& c, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        if (req["op"] == "get" && gets.fetch_add(1) == 0) {
            self->close(c);  // the first get kills its connection
            return std::nullopt;
        }
        if (req["op"] == "get") {
            Json task = {{"key", "k"}, {"payload", nullptr}, {"status", "ready"}, {"time", 1}};
            return ok_reply(req, {{"task", task}});
        }
        return std::nullopt;  // puts are never answered
    });
    self = &server;
    Client client(options_for({server.address()}));
    REQUIRE(client.ping().ok());

    PutRequest put;
    put.key = "k";
    auto put_future = client.call_async(put);
    // Make sure the put is on the wire before the connection dies.
    while (count_op(server, "put") == 0) std::this_thread::sleep_for(1ms);
    auto got = client.get({.key = "k"});
    REQUIRE(got.ok());
    CHECK(got->task.status == "ready");
    CHECK(gets.load() == 2);

    auto put_result = put_future.get();
    REQUIRE_FALSE(put_result.ok());
    CHECK(put_result.code() == Code::unavailable);
    CHECK(count_op(server, "put") == 1);
    CHECK(server.accepted() == 2);
    // The second connection asked to resume the first one's session.
    auto reqs = server.requests();
    std::vector<Json> hellos;
    for (auto& r : reqs) if (r["op"] == "hello") hellos.push_back(r);
    REQUIRE(hellos.size() == 2);
    CHECK_FALSE(hellos[0].contains("session"));
    CHECK(hellos[1]["session"] == 1);
}

TEST_CASE("resend_on_reconnect opts an unsafe op into being resent", "[client]") {
    std::atomic<int> puts{0};
    FakeServer* self = nullptr;
    FakeServer server([&](const FakeServer::ConnPtr& c, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        if (puts.fetch_add(1) == 0) {
            self->close(c);
            return std::nullopt;
        }
        return ok_reply(req, {{"version", 2}});
    });
    self = &server;
    Client client(options_for({server.address()}));
    CallOptions opts;
    opts.resend_on_reconnect = true;
    auto r = client.put({.key = "k", .payload = ""}, opts);
    REQUIRE(r.ok());
    CHECK(r->version == 2);
    CHECK(puts.load() == 2);
}

TEST_CASE("server errors come back as values", "[client]") {
    FakeServer server([](const FakeServer::ConnPtr&, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        Json resp = error_reply(req, req["op"] == "ack" ? "lease_mismatch" : "brand_new_code");
        return resp;
    });
    Client client(options_for({server.address()}));
    auto r = client.ack({.key = "k", .lease = 3});
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == Code::lease_mismatch);
    CHECK(r.error().message == "fake lease_mismatch");
    auto u = client.touch({.key = "k", .lease = 3});
    CHECK(u.code() == Code::unknown);
    CHECK(u.error().code_name == "brand_new_code");
}

TEST_CASE("a malformed or oversized response closes the connection", "[client]") {
    std::atomic<int> mode{0};
    FakeServer* self = nullptr;
    FakeServer server([&](const FakeServer::ConnPtr& c, const Json& req) -> std::optional<Json> {
        if (req["op"] == "hello") return basic_reply(req);
        if (req["op"] == "stats") {
            if (mode == 0) self->send_raw(c, frame_bytes("\xdd\xff\xff\xff\xff"));  // array of 4G
            if (mode == 1) self->send_raw(c, std::string("\x7f\xff\xff\xff", 4));  // 2 GiB frame
            return std::nullopt;
        }
        return basic_reply(req);
    });
    self = &server;
    auto opts = options_for({server.address()});
    opts.max_frame_bytes = 1 << 20;
    Client client(opts);
    for (int m = 0; m < 2; ++m) {
        mode = m;
        // stats is safe to resend, so it is retried until its deadline on reconnects.
        CallOptions quick;
        quick.timeout = 200ms;
        auto r = client.stats({}, quick);
        REQUIRE_FALSE(r.ok());
        CHECK((r.code() == Code::timeout || r.code() == Code::unavailable));
        CHECK(client.ping().ok());
    }
    CHECK(server.accepted() >= 3);
}

TEST_CASE("bad input is refused locally without a round trip", "[client]") {
    FakeServer server([](const FakeServer::ConnPtr&, const Json& req) { return basic_reply(req); });
    Client client(options_for({server.address()}));
    auto r = client.put({.key = "", .payload = ""});
    CHECK(r.code() == Code::bad_request);
    auto p = client.put({.key = "k", .payload = "\x92\x01"});  // array of 2 with 1 element
    CHECK(p.code() == Code::bad_request);
    Client bad_seeds(options_for({"nonsense"}));
    CHECK(bad_seeds.ping().code() == Code::bad_request);
}

TEST_CASE("a blocking take's wait extends its deadline", "[client]") {
    FakeServer* self = nullptr;
    std::vector<std::thread> repliers;
    std::mutex mu;
    FakeServer server([&](const FakeServer::ConnPtr& c, const Json& req) -> std::optional<Json> {
        if (auto r = basic_reply(req)) return r;
        // Answer the take (empty) after 300 ms, as a server whose timeout_ms ran out would.
        std::lock_guard<std::mutex> lock(mu);
        repliers.emplace_back([self, c, req] {
            std::this_thread::sleep_for(300ms);
            self->send(c, ok_reply(req, {{"tasks", Json::array()}}));
        });
        return std::nullopt;
    });
    self = &server;
    auto opts = options_for({server.address()});
    opts.call_timeout = 150ms;
    Client client(opts);
    auto r = client.take({.queue = "q", .timeout_ms = 300});
    REQUIRE(r.ok());
    CHECK(r->tasks.empty());
    auto late = client.take({.queue = "q"});  // no wait: 150 ms is all it gets
    CHECK(late.code() == Code::timeout);
    std::lock_guard<std::mutex> lock(mu);
    for (auto& t : repliers) t.join();
}
