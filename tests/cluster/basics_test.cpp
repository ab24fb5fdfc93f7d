// Three real dueqd processes on loopback: one leader is elected and the others follow
// it; what the leader writes, the followers serve; a follower refuses writes and takes
// with not_leader naming the leader, and the C++ client follows that.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <thread>

#include "cluster/cluster.h"
#include "cluster/workload.h"
#include "node/support.h"

using namespace dueq;
using namespace dueq::test;
using Clock = std::chrono::steady_clock;

namespace {

std::string error_leader(const Response& r) {
    const auto* e = r.find("error");
    if (!e || e->type != msgpack::type::MAP) return "";
    for (std::uint32_t i = 0; i < e->via.map.size; ++i) {
        const auto& kv = e->via.map.ptr[i];
        if (kv.key.as<std::string>() == "leader" && kv.val.type == msgpack::type::STR)
            return kv.val.as<std::string>();
    }
    return "";
}

std::string text(const Response& r, const std::string& key) {
    const auto* o = r.find(key);
    return o && o->type == msgpack::type::STR ? o->as<std::string>() : "";
}

}  // namespace

TEST_CASE("a 3-node cluster elects exactly one leader and the others follow it") {
    Cluster cluster("election");
    cluster.start_all();
    const int leader = cluster.wait_for_leader(15s);
    REQUIRE(leader >= 0);

    // Watch for two seconds: never two leaders in one term (§3.6.3, Election Safety),
    // terms never go back on a node.
    std::map<std::uint64_t, std::set<std::string>> leaders_of_term;
    std::vector<std::uint64_t> last_term(3, 0);
    std::size_t samples = 0;
    const auto until = Clock::now() + 2s;
    for (int round = 0; round < 1000 && Clock::now() < until; ++round) {
        for (int i = 0; i < 3; ++i) {
            const auto s = cluster.status(i);
            if (!s) continue;
            ++samples;
            CHECK(s->term >= last_term[std::size_t(i)]);
            last_term[std::size_t(i)] = s->term;
            if (s->role == "leader") leaders_of_term[s->term].insert(s->node_id);
        }
        std::this_thread::sleep_for(50ms);
    }
    CHECK(samples > 30);
    for (const auto& [term, ids] : leaders_of_term) {
        INFO("term " << term);
        CHECK(ids.size() == 1);
    }
    if (leaders_of_term.size() != 1)
        WARN("the leader changed in a healthy cluster: " << leaders_of_term.size() << " terms led");

    // At rest: one leader, two followers naming it, every link up, no lag.
    const int now_leader = cluster.wait_for_leader(10s);
    REQUIRE(now_leader >= 0);
    bool converged = false;
    std::optional<NodeStatus> ls;
    for (int round = 0; round < 100 && !converged; ++round) {
        ls = cluster.status(now_leader);
        REQUIRE(ls);
        converged = ls->peers.size() == 2;
        for (const auto& p : ls->peers)
            converged = converged && p.connected && p.lag == 0 && p.match == ls->last_index;
        if (!converged) std::this_thread::sleep_for(50ms);
    }
    INFO("leader " << ls->node_id << " term " << ls->term << " last_index " << ls->last_index);
    CHECK(converged);
    std::set<std::string> peer_ids;
    for (const auto& p : ls->peers)
        peer_ids.insert(p.id);
    std::set<std::string> others;
    for (int i = 0; i < 3; ++i)
        if (i != now_leader) others.insert(cluster.node_id(i));
    CHECK(peer_ids == others);
    CHECK(ls->mode == "normal");

    for (int i = 0; i < 3; ++i) {
        const auto s = cluster.status(i);
        REQUIRE(s);
        INFO("node " << s->node_id);
        CHECK(s->node_id == cluster.node_id(i));
        CHECK(s->term == ls->term);
        CHECK(s->role == (i == now_leader ? "leader" : "follower"));
        CHECK(s->leader == cluster.client_address(now_leader));
        CHECK(s->leader_id == cluster.node_id(now_leader));
        // hello names the leader too.
        RawClient raw(cluster.client_port(i));
        const auto hello = raw.call("hello", 1);
        REQUIRE(hello.ok());
        CHECK(text(hello, "leader") == cluster.client_address(now_leader));
        CHECK(text(hello, "node_id") == cluster.node_id(i));
    }
}

TEST_CASE("writes on the leader are readable on every follower") {
    Cluster cluster("replicate");
    cluster.start_all();
    const int leader = cluster.wait_for_leader(15s);
    REQUIRE(leader >= 0);

    auto c = cluster.client({leader});
    const int n = 300;
    const std::int64_t time = wall_ms() + 3'600'000;
    std::vector<std::future<client::Result<client::PutResponse>>> answers;
    for (int k = 0; k < n; ++k) {
        client::PutRequest put;
        put.queue = "rep";
        put.key = "k" + std::to_string(k);
        put.payload = string_payload("v" + std::to_string(k));
        put.time = time + k;
        answers.push_back(c->call_async(put));
    }
    for (auto& a : answers) {
        auto r = a.get();
        INFO(r.error().to_string());
        REQUIRE(r.ok());
    }
    const auto ls = cluster.status(leader);
    REQUIRE(ls);

    for (int i = 0; i < 3; ++i) {
        if (i == leader) continue;
        INFO("follower " << cluster.node_id(i));
        auto f = cluster.client({i});
        // Local reads: bounded wait for the last key, then every key as written.
        bool there = false;
        const auto until = Clock::now() + 10s;
        for (int round = 0; round < 1000 && !there && Clock::now() < until; ++round) {
            there = f->get({"rep", "k" + std::to_string(n - 1), {}}).ok();
            if (!there) std::this_thread::sleep_for(20ms);
        }
        REQUIRE(there);
        for (int k = 0; k < n; ++k) {
            auto r = f->get({"rep", "k" + std::to_string(k), {}});
            REQUIRE(r.ok());
            CHECK(payload_string(r->task.payload) == "v" + std::to_string(k));
            CHECK(r->task.time == time + k);
            CHECK(r->task.status == "ready");
        }
        CHECK(f->current_address() == cluster.client_address(i));  // not redirected
        const auto fs = cluster.status(i);
        REQUIRE(fs);
        CHECK(fs->applied_index >= ls->commit_index);
        CHECK(fs->tasks == ls->tasks);
        auto stats = f->stats({"rep"});
        REQUIRE(stats.ok());
        REQUIRE(stats->queues.size() == 1);
        CHECK(stats->queues[0].ready == std::uint64_t(n));
    }
}

TEST_CASE(
    "a follower refuses writes and takes with not_leader naming the leader; the client "
    "follows it") {
    Cluster cluster("redirect");
    cluster.start_all();
    const int leader = cluster.wait_for_leader(15s);
    REQUIRE(leader >= 0);
    const int follower = (leader + 1) % 3;
    const std::string leader_address = cluster.client_address(leader);

    RawClient raw(cluster.client_port(follower));
    auto take = raw.call("take", 1, {{"queue", raw.str("jobs")}, {"count", raw.obj(1)}});
    CHECK_FALSE(take.ok());
    CHECK(take.error_code() == "not_leader");
    CHECK(error_leader(take) == leader_address);
    auto put = raw.call(
        "put", 2, {{"queue", raw.str("jobs")}, {"key", raw.str("j1")}, {"payload", raw.str("p")}});
    CHECK(put.error_code() == "not_leader");
    CHECK(error_leader(put) == leader_address);
    for (const char* op : {"delete", "ack", "release", "touch", "bury"}) {
        INFO(op);
        auto r = raw.call(
            op, 3, {{"queue", raw.str("jobs")}, {"key", raw.str("j1")}, {"lease", raw.obj(1)}});
        CHECK(r.error_code() == "not_leader");
    }
    // Reads are served where they are asked.
    auto get = raw.call("get", 4, {{"queue", raw.str("jobs")}, {"key", raw.str("j1")}});
    CHECK(get.error_code() == "not_found");
    CHECK(raw.call("stats", 5).ok());

    // The client, knowing only the follower, follows the redirect for every write.
    auto c = cluster.client({follower});
    client::PutRequest p;
    p.queue = "jobs";
    p.key = "j1";
    p.payload = string_payload("work");
    p.time = wall_ms() - 1000;
    auto put_ok = c->put(p);
    INFO(put_ok.error().to_string());
    REQUIRE(put_ok.ok());
    CHECK(c->current_address() == leader_address);
    auto taken = c->take({"jobs", 1, 1000, 30'000, {}});
    REQUIRE(taken.ok());
    REQUIRE(taken->tasks.size() == 1);
    CHECK(taken->tasks[0].key == "j1");
    auto ack = c->ack({"jobs", "j1", taken->tasks[0].lease, string_payload("done"), {}});
    INFO(ack.error().to_string());
    CHECK(ack.ok());
    // The follower catches up with the ack: the task is done there too.
    bool done = false;
    auto f = cluster.client({follower});
    for (int round = 0; round < 250 && !done; ++round) {
        auto g = f->get({"jobs", "j1", {}});
        done = g.ok() && g->task.status == "done" && payload_string(g->task.payload) == "done";
        if (!done) std::this_thread::sleep_for(20ms);
    }
    CHECK(done);
}
