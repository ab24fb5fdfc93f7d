// The failover scenario against nodes started with `--plant reply_before_commit`: the
// leader answers writes as soon as it proposes them, before they commit. Killing it
// then loses writes it already acknowledged; the checks of the failover test must see
// that. If this test passes against a correct dueqd build, it proves nothing; if it fails,
// the failover test's checks are blind.
#include <catch2/catch.hpp>

#include "cluster/failover.h"

using namespace dueq::test;

TEST_CASE("the failover checks catch a leader that replies before commit") {
    ClusterOptions options;
    options.extra_args = {"--plant", "reply_before_commit"};
    // A few tries: each kill of a leader with acknowledged but uncommitted writes is a
    // chance to lose one.
    std::size_t caught = 0;
    std::string last_summary;
    for (int attempt = 0; attempt < 3 && caught == 0; ++attempt) {
        Cluster cluster("planted-" + std::to_string(attempt), options);
        LoadOptions load;
        load.tag = "planted";
        const auto report = run_failover(cluster, load, FailoverPlan{});
        caught = report.problems();
        last_summary = report.summary();
        WARN("planted reply_before_commit, try " << attempt + 1 << ": " << caught
                                                 << " problems found\n"
                                                 << last_summary);
    }
    INFO(last_summary);
    CHECK(caught > 0);
}
