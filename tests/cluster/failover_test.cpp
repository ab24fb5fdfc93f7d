// kill -9 of the leader under a steady put + take + ack load, four times, restarting the
// killed node each time (the fourth time its followers are frozen first, so whatever it
// proposed then dies with it): a new leader serves within three election timeouts, every
// acknowledged put and ack is on every node afterwards, and no task was held under two
// live leases (G1, G3).
#include <catch2/catch.hpp>

#include "cluster/failover.h"

using namespace dueq::test;

TEST_CASE(
    "kill -9 of the leader under load loses no acknowledged write and leases no task "
    "twice") {
    ClusterOptions options;  // heartbeat 50 ms, election timeout 500 ms
    Cluster cluster("failover", options);
    LoadOptions load;
    load.tag = "failover";
    FailoverPlan plan;
    plan.kills = 4;
    plan.frozen_kills = 1;
    const auto report = run_failover(cluster, load, plan);
    INFO(report.summary());

    REQUIRE(report.rounds.size() == 4);
    const long bound_ms = 3L * options.election_timeout_ms;
    for (const auto& r : report.rounds) {
        INFO("killed " << r.killed);
        CHECK_FALSE(r.new_leader.empty());
        CHECK(r.new_leader != r.killed);
        CHECK(r.new_term > r.old_term);
        CHECK(r.served_ms >= 0);
        CHECK(r.served_ms <= bound_ms);
        CHECK(r.on_new_leader.problems() == 0);
        CHECK(r.on_new_leader.puts_checked > 0);
    }
    CHECK(report.settled);
    CHECK(report.puts_ok > 300);  // the load really ran
    CHECK(report.acks_ok > 100);
    for (const auto& v : report.nodes)
        CHECK(v.problems() == 0);
    CHECK(report.leases.problems() == 0);
    CHECK(report.leases.pairs_checked > 0);
    WARN(report.summary());
}
