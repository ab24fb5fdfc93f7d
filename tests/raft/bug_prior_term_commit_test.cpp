// Classic bug: a leader counts replicas of an entry from an earlier term and calls it
// committed. Figure 8 of the Raft paper shows such an entry being overwritten later.
// §3.6.2: only entries of the current term are committed by counting.
#include <catch2/catch.hpp>

#include "raft_test_support.h"

using namespace dueq::raft;
using namespace dueq::raft::test;

namespace {
// Figure 8 of the Raft paper, played out; returns S1's commit index at the point where
// X (an entry of an older term) sits on a majority but S1's own no-op on nobody else.
Index figure8_commit_with_old_entry_on_majority(PlantedBug bug) {
    // (a) S1 leads term t and gets entry X (index 2) only to S2.
    Cluster c(5, [&](Config& cfg) {
        cfg.max_entries_per_msg = 1;
        cfg.planted_bug = bug;
    });
    c.elect(1);
    for (NodeId id : {3, 4, 5})
        c.cut(1, id);
    c.raft(1).propose(cmd(1), 0);
    c.deliver_all();
    Term t = c.raft(1).term();
    REQUIRE(c.raft(2).log().last_index() == 2);
    REQUIRE(c.raft(1).log().committed() == 1);
    // (b) S1 crashes. S5 wins the next term with S3 and S4 and writes index 2 itself only.
    c.heal();
    c.isolate(1);
    c.set_drop([](Message& m) { return m.from == 5 && m.type == MessageType::append; });
    c.elect(5);
    REQUIRE(c.raft(5).role() == Role::leader);
    REQUIRE(c.raft(5).log().term(2).value() > t);
    // (c) S5 crashes; S1 restarts and wins a later term with S2 and S3.
    c.set_drop({});
    c.heal();
    c.isolate(5);
    c.isolate(4);
    c.restart(1);
    // S1 will push X to S3, but its own no-op (index 3) is to reach nobody.
    Index noop = 3;
    c.set_drop([&](Message& m) {
        if (m.type == MessageType::append) {
            std::erase_if(m.entries, [&](const Entry& e) { return e.index >= noop; });
        }
        return false;
    });
    c.elect(1);
    if (c.raft(1).role() != Role::leader) c.elect(1);  // the first try only taught it the term
    REQUIRE(c.raft(1).role() == Role::leader);
    REQUIRE(c.raft(1).log().last_index() == noop);
    c.tick(1, 3);
    c.deliver_all();
    // X now sits on S1, S2, S3 - a majority of five - but it is from term t: S5 (whose
    // last term is newer) could still win with S2, S3, S4 and overwrite it.
    REQUIRE(c.raft(3).log().term(2).value() == t);
    Index commit = c.raft(1).log().committed();
    // Once the current-term no-op reaches a majority, both commit.
    c.set_drop({});
    c.tick(1, 3);
    c.deliver_all();
    CHECK(c.raft(1).log().committed() >= noop);
    return commit;
}
}  // namespace

TEST_CASE("§3.6.2 Figure 8: an old-term entry is not committed by counting replicas",
          "[raft][commit][bug]") {
    CHECK(figure8_commit_with_old_entry_on_majority(PlantedBug::none) < 2);
    if (planted_bugs_compiled()) {
        // The same scenario with the rule broken does commit X: the test can fail.
        CHECK(figure8_commit_with_old_entry_on_majority(PlantedBug::commit_prior_term) == 2);
    }
}
