// SIGKILL of all three nodes at once under load, then all three started again: nothing
// acknowledged is lost (G1: "... and a restart of all of them").
#include <catch2/catch.hpp>

#include <thread>

#include "cluster/cluster.h"
#include "cluster/workload.h"

using namespace dueq::test;

TEST_CASE("restarting all three nodes at once loses nothing acknowledged") {
    Cluster cluster("restart-all");
    cluster.start_all();
    REQUIRE(cluster.wait_for_leader(15s) >= 0);
    LoadOptions load;
    load.tag = "restart";
    preload_work(*cluster.client(), load);

    History history;
    Load running(cluster.client_addresses(), load, history);
    running.start();
    std::this_thread::sleep_for(2s);
    const auto ok_before = running.ok_ops();
    for (int i = 0; i < 3; ++i)
        cluster.kill9(i);  // with requests in flight
    running.stop();
    REQUIRE(ok_before > 100);

    cluster.start_all();
    const int leader = settle(cluster, 30s);
    REQUIRE(leader >= 0);
    INFO("acknowledged puts " << history.puts().size() << ", acks " << history.acks_ok()
                              << "; client errors: " << history.error_counts());
    for (int i = 0; i < 3; ++i) {
        const auto v = check_node(cluster, i, history, load);
        INFO(v.summary());
        CHECK(v.problems() == 0);
        CHECK(v.puts_checked > 100);
    }
    const auto leases = check_leases(history);
    INFO(leases.summary());
    CHECK(leases.problems() == 0);

    // The restarted cluster serves: the refreshers go on where they stopped.
    History after;
    LoadOptions again = load;
    again.tag = "restart-after";
    Load more(cluster.client_addresses(), again, after);
    more.start();
    std::this_thread::sleep_for(1s);
    more.stop();
    CHECK(after.puts().size() > 10);
    CHECK(after.acks_ok() > 10);
}
