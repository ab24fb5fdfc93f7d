// The failover scenario against nodes started with `--plant reply_before_commit`: the
// leader answers writes as soon as it proposes them, before they commit. Killing it
// then loses writes it already acknowledged; the checks of the failover test must see
// that. If this test fails, the failover test's checks are blind.
//
// A plain kill loses acknowledged writes only when it lands while some are not yet sent
// to any follower (the leader sends its appends before its own fsync, so that window is
// short: about one kill in two catches it). The second kill first freezes the followers
// (SIGSTOP) for 300 ms, as a partition would: the planted leader goes on answering, and
// everything it answered then is lost when it dies. That makes the catch certain.
#include <catch2/catch.hpp>

#include "cluster/failover.h"

using namespace dueq::test;

TEST_CASE("the failover checks catch a leader that replies before commit") {
    ClusterOptions options;
    options.extra_args = {"--plant", "reply_before_commit"};
    Cluster cluster("planted", options);
    LoadOptions load;
    load.tag = "planted";
    FailoverPlan plan;
    plan.kills = 2;
    plan.frozen_kills = 1;
    const auto report = run_failover(cluster, load, plan);
    INFO(report.summary());
    REQUIRE(report.rounds.size() == 2);
    const auto& plain = report.rounds[0].on_new_leader;
    const auto& frozen = report.rounds[1].on_new_leader;
    WARN("planted reply_before_commit: " << report.problems() << " problems; the plain kill lost "
                                         << plain.lost_puts << " acknowledged puts, the kill "
                                         << "with frozen followers " << frozen.lost_puts);
    CHECK(report.problems() > 0);
    CHECK(frozen.lost_puts > 0);
}
