// Nodes whose config files disagree ([limits], [queues]) still apply every log entry the
// same way: limits are checked before proposing and apply uses fixed bounds, and queue
// settings reach the replicas only as declares in the log.
#include <catch2/catch.hpp>

#include <thread>

#include "cluster/cluster.h"

using namespace dueq;
using namespace dueq::test;

namespace {

// The task as node i holds it (a local read).
std::optional<client::TaskInfo> local_get(const Cluster& c, int i, const std::string& queue,
                                          const std::string& key) {
    auto cl = c.client({i});
    auto r = cl->get({.queue = queue, .key = key});
    if (!r.ok()) {
        CHECK(r.code() == client::Code::not_found);
        return std::nullopt;
    }
    return r.value().task;
}

// Every node holds the same version of the task (or none has it). Nodes whose [limits]
// refuse the key in a read request are asked through `via` (whose limits allow it) with
// no way to pick the replica, so they are left out: the task counts cover them.
void check_replicas_agree(const Cluster& c, const std::string& queue, const std::string& key,
                          std::vector<int> nodes = {0, 1, 2}) {
    CAPTURE(queue, key.size());
    const auto first = local_get(c, nodes[0], queue, key);
    for (std::size_t n = 1; n < nodes.size(); ++n) {
        const int i = nodes[n];
        CAPTURE(i);
        const auto other = local_get(c, i, queue, key);
        REQUIRE(first.has_value() == other.has_value());
        if (!first) continue;
        CHECK(other->payload == first->payload);
        CHECK(other->status == first->status);
        CHECK(other->time == first->time);
        CHECK(other->lease_until == first->lease_until);
        CHECK(other->version == first->version);
    }
}

// Kills the leader until node `want` leads (each election is a coin flip among the rest).
int make_leader(Cluster& c, int want) {
    int leader = c.wait_for_leader(10s);
    for (int round = 0; round < 12 && leader >= 0 && leader != want; ++round) {
        const auto term = c.status(leader)->term;
        c.kill9(leader);
        const int next = c.wait_for_leader(10s, term);
        c.start(leader);
        leader = next >= 0 ? c.wait_for_leader(10s) : -1;
    }
    return leader;
}

}  // namespace

TEST_CASE("nodes with different [limits] and [queues] end in identical states") {
    ClusterOptions o;
    o.extra_config = {
        "[limits]\nmax_key_bytes = 2000\n\n[queues.default]\nttr_ms = 7000\n\n"
        "[queues.tokens]\nlead_ms = 30000\nttr_ms = 11000\n",
        "[queues.default]\nttr_ms = 5000\n\n[queues.tokens]\nlead_ms = 1000\n",
        "",
    };
    Cluster cluster("config-agreement", o);
    cluster.start_all();
    REQUIRE(make_leader(cluster, 0) == 0);
    auto c = cluster.client({0}, 5s);

    // A key only n1's [limits] allow: accepted by the leader, applied everywhere.
    const std::string long_key(1500, 'k');
    REQUIRE(c->put({.queue = "other", .key = long_key, .payload = string_payload("v")}).ok());
    // Takes without ttr_ms: the lease length comes from the queue's settings.
    REQUIRE(c->put({.queue = "tokens", .key = "t1", .payload = string_payload("v"), .time = 0})
                .ok());
    REQUIRE(c->put({.queue = "other", .key = "o1", .payload = string_payload("v"), .time = 0})
                .ok());
    auto t1 = c->take({.queue = "tokens"});
    REQUIRE(t1.ok());
    REQUIRE(t1.value().tasks.size() == 1);
    auto o1 = c->take({.queue = "other"});
    REQUIRE(o1.ok());
    REQUIRE(o1.value().tasks.size() == 1);
    const auto leader_status = cluster.status(0);
    REQUIRE(cluster.wait_applied(leader_status->applied_index, 10s));
    REQUIRE(local_get(cluster, 0, "other", long_key));
    check_replicas_agree(cluster, "tokens", "t1");
    check_replicas_agree(cluster, "other", o1.value().tasks[0].key);
    // n1's settings are the replicated ones while it leads.
    const auto lease = local_get(cluster, 1, "tokens", "t1")->lease_until.value_or(0);
    CHECK(lease - t1.value().tasks[0].lease_until == 0);

    // n2 leads next: its settings replace n1's, on every replica at once.
    REQUIRE(make_leader(cluster, 1) == 1);
    auto c2 = cluster.client({1}, 5s);
    REQUIRE(c2->put({.queue = "tokens", .key = "t2", .payload = string_payload("v"), .time = 0})
                .ok());
    auto t2 = c2->take({.queue = "tokens"});
    REQUIRE(t2.ok());
    REQUIRE(t2.value().tasks.size() == 1);
    // And a key over n2's max_key_bytes is refused before it is proposed.
    CHECK(c2->put({.queue = "other", .key = std::string(1500, 'x'), .payload = string_payload("v")})
              .code() == client::Code::too_large);
    const auto s2 = cluster.status(1);
    REQUIRE(cluster.wait_applied(s2->applied_index, 10s));
    check_replicas_agree(cluster, "tokens", "t2");
    CHECK_FALSE(local_get(cluster, 0, "other", std::string(1500, 'x')));
    // The take used n2's [queues.tokens] (ttr from n2's defaults: 5 s).
    const auto& task = t2.value().tasks[0];
    const auto got = local_get(cluster, 2, "tokens", task.key);
    REQUIRE(got);
    CHECK(got->lease_until == task.lease_until);
    std::vector<std::uint64_t> tasks;
    for (const auto& s : cluster.statuses())
        if (s) tasks.push_back(s->tasks);
    REQUIRE(tasks.size() == 3);
    CHECK(tasks[0] == 4);  // long key, t1, o1, t2
    CHECK(tasks[0] == tasks[1]);
    CHECK(tasks[1] == tasks[2]);
}
