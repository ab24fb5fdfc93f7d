// A follower that was down while the leader snapshotted and trimmed its log past the
// follower's last entry catches up by snapshot when it comes back.
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "cluster/cluster.h"
#include "node/support.h"

using namespace dueq;
using namespace dueq::test;
using Clock = std::chrono::steady_clock;

TEST_CASE("a node restarted after the log was trimmed past it catches up by snapshot") {
    ClusterOptions options;
    options.snapshot_entries = 200;  // snapshot every 200 applied entries
    options.log_keep = 50;           // and keep only 50 behind it
    Cluster cluster("snapshot", options);
    cluster.start_all();
    const int leader = cluster.wait_for_leader(15s);
    REQUIRE(leader >= 0);
    const int down = (leader + 1) % 3;
    cluster.kill9(down);
    const auto down_before = cluster.status(leader);
    REQUIRE(down_before);

    // 3000 puts (15 snapshots' worth) through the leader while `down` is down.
    const int n = 3000;
    const std::int64_t time = wall_ms() + 3'600'000;
    auto c = cluster.client({leader}, 5s);
    std::size_t ok = 0;
    std::string first_error;
    for (int from = 0; from < n; from += 100) {
        std::vector<std::future<client::Result<client::PutResponse>>> answers;
        for (int k = from; k < from + 100; ++k) {
            client::PutRequest put;
            put.queue = "snap";
            put.key = "s" + std::to_string(k);
            put.payload = string_payload("p" + std::to_string(k));
            put.time = time + k;
            answers.push_back(c->call_async(put));
        }
        for (auto& a : answers) {
            auto r = a.get();
            if (r.ok())
                ++ok;
            else if (first_error.empty())
                first_error = r.error().to_string();
        }
    }
    INFO("first error: " << first_error);
    REQUIRE(ok == std::size_t(n));
    const auto ls = cluster.status(leader);
    REQUIRE(ls);
    REQUIRE(ls->role == "leader");
    INFO("leader " << ls->node_id << " commit_index " << ls->commit_index << " tasks "
                   << ls->tasks);

    cluster.start(down);
    std::optional<NodeStatus> ds;
    bool caught_up = false;
    const auto until = Clock::now() + 30s;
    for (int round = 0; round < 3000 && !caught_up && Clock::now() < until; ++round) {
        ds = cluster.status(down);
        caught_up = ds && ds->applied_index >= ls->commit_index;
        if (!caught_up) std::this_thread::sleep_for(50ms);
    }
    INFO("restarted " << cluster.node_id(down) << ": applied_index " << (ds ? ds->applied_index : 0)
                      << ", role " << (ds ? ds->role : "?"));
    REQUIRE(caught_up);
    CHECK(ds->tasks == ls->tasks);

    auto f = cluster.client({down});
    auto last = f->get({"snap", "s" + std::to_string(n - 1), {}});
    REQUIRE(last.ok());
    CHECK(payload_string(last->task.payload) == "p" + std::to_string(n - 1));
    CHECK(last->task.time == time + n - 1);
    std::size_t wrong = 0;
    for (int k = 0; k < n; k += 37) {
        auto g = f->get({"snap", "s" + std::to_string(k), {}});
        if (!g.ok() || payload_string(g->task.payload) != "p" + std::to_string(k) ||
            g->task.time != time + k)
            ++wrong;
    }
    CHECK(wrong == 0);
    // And it takes part again: a write now reaches it too.
    client::PutRequest after;
    after.queue = "snap";
    after.key = "after";
    after.payload = string_payload("after");
    REQUIRE(c->put(after).ok());
    bool seen = false;
    for (int round = 0; round < 250 && !seen; ++round) {
        seen = f->get({"snap", "after", {}}).ok();
        if (!seen) std::this_thread::sleep_for(20ms);
    }
    CHECK(seen);
    // The state above is what matters; this shows it came by the snapshot path (the
    // log was trimmed past the node) rather than by replaying entries.
    const auto log = cluster.log_text(down);
    const auto restarted = log.rfind("---- test harness: starting");
    REQUIRE(restarted != std::string::npos);
    CHECK(log.find("installed snapshot", restarted) != std::string::npos);
}
