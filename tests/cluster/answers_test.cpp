// Every write gets an answer, even from a leader that has lost its followers: at once
// with no_quorum when its links to a majority are down, or with timeout when the
// followers went silent (paused) and the entry cannot commit within the bound.
#include <catch2/catch.hpp>

#include <thread>

#include "cluster/cluster.h"

using namespace dueq;
using namespace dueq::test;
using Clock = std::chrono::steady_clock;

namespace {
struct Answer {
    client::Code code;
    std::chrono::milliseconds took;
};

Answer put_on(const Cluster& cluster, int node, const std::string& key) {
    // The client's own deadline is far beyond the server's bound, so a timeout seen here
    // within the bound is the server's answer; and it takes the first refusal as it is
    // (a client resends a no_quorum, after a backoff, as it does a not_leader).
    client::ClientOptions o;
    o.seeds = {cluster.client_address(node)};
    o.call_timeout = 20s;
    o.max_redirects = 0;
    auto c = std::make_unique<client::Client>(std::move(o));
    const auto start = Clock::now();
    auto r = c->put({.queue = "q", .key = key, .payload = string_payload("v")});
    return {r.code(), std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)};
}
}  // namespace

TEST_CASE("a leader without a quorum answers every write") {
    ClusterOptions o;
    o.election_timeout_ms = 500;  // proposals time out after 1.5 s
    Cluster cluster("answers", o);
    cluster.start_all();
    const int leader = cluster.wait_for_leader(10s);
    REQUIRE(leader >= 0);
    REQUIRE(put_on(cluster, leader, "before").code == client::Code::ok);
    std::vector<int> followers;
    for (int i = 0; i < cluster.size(); ++i)
        if (i != leader) followers.push_back(i);

    SECTION("followers frozen: the write times out within the bound") {
        for (int f : followers) cluster.pause(f);
        const auto a = put_on(cluster, leader, "frozen");
        // Either the proposal ran out of time, or the leader saw its links die first.
        CHECK((a.code == client::Code::timeout || a.code == client::Code::no_quorum));
        CHECK(a.took < 5s);
        for (int f : followers) cluster.resume(f);
    }
    SECTION("followers killed: the write is refused at once with no_quorum") {
        for (int f : followers) cluster.kill9(f);
        std::this_thread::sleep_for(200ms);  // the mesh sees the links break
        const auto a = put_on(cluster, leader, "alone");
        CHECK(a.code == client::Code::no_quorum);
        CHECK(a.took < 1s);
        // Nothing was applied: once the others are back, the key does not exist.
        for (int f : followers) cluster.start(f);
        const int again = cluster.wait_for_leader(20s);
        REQUIRE(again >= 0);
        auto c = cluster.client({again});
        CHECK(c->get({.queue = "q", .key = "alone", .consistency = "leader"}).code() ==
              client::Code::not_found);
    }
}
