// The product checks of the simulator (task_history.h) can fail: each is fed a history
// that breaks its guarantee, and one that keeps it.
#include <catch2/catch.hpp>

#include "sim/task_history.h"

using namespace dueq;
using namespace dueq::sim;

namespace {
raft::Entry entry(raft::Index index, raft::Term term, raft::Millis time) {
    return raft::Entry{term, index, time, raft::EntryType::normal, {}};
}

struct Fixture {
    Checker checker{{{1, nullptr, nullptr}}, true};
    TaskHistory history{checker};
    queue::Store store{queue::kApplyLimits};
    raft::Index index = 0;

    queue::Result apply(const queue::Command& cmd, raft::Millis time, raft::Term term = 1) {
        queue::Result r = store.apply(cmd, queue::Millis(time));
        history.applied(1, entry(++index, term, time), &cmd, &r);
        return r;
    }
};
}  // namespace

TEST_CASE("G1: an acknowledged index applied with another entry is reported", "[sim][history]") {
    Fixture f;
    f.history.acknowledged(1, 2);
    f.apply(queue::Put{"q", "k", "\xa1v", 1000, queue::PutMode::upsert}, 1000, 3);
    REQUIRE(f.checker.failed());
    CHECK(f.checker.failure().find("G1") != std::string::npos);
}

TEST_CASE("G1: an acknowledged index missing at the end is reported", "[sim][history]") {
    Fixture f;
    f.apply(queue::Put{"q", "k", "\xa1v", 1000, queue::PutMode::upsert}, 1000);
    f.history.acknowledged(1, 1);
    f.history.check_final(1, f.store, 1, 1000);
    CHECK_FALSE(f.checker.failed());
    f.history.acknowledged(2, 1);
    f.history.check_final(1, f.store, 1, 1000);
    CHECK(f.checker.failed());
}

TEST_CASE("G3: a second lease while the first is live is reported", "[sim][history]") {
    Fixture f;
    f.apply(queue::Put{"q", "k", "\xa1v", 1000, queue::PutMode::upsert}, 1000);
    auto first = f.apply(queue::Take{"q", 1, 500, 7, false}, 1000);
    REQUIRE(first.tasks.size() == 1);
    // A store that handed the task out again at 1200 (its lease runs until 1500) would
    // break G3; the history is told so directly.
    queue::Result forged;
    forged.tasks.push_back({"k", "\xa1v", 1000, first.tasks[0].lease + 1, 1700, 2});
    queue::Command take = queue::Take{"q", 1, 500, 8, false};
    f.history.applied(1, entry(++f.index, 1, 1200), &take, &forged);
    REQUIRE(f.checker.failed());
    CHECK(f.checker.failure().find("G3") != std::string::npos);
}

TEST_CASE("G3: leases that ended or ran out leave the task free", "[sim][history]") {
    Fixture f;
    f.apply(queue::Put{"q", "k", "\xa1v", 1000, queue::PutMode::upsert}, 1000);
    auto a = f.apply(queue::Take{"q", 1, 500, 7, false}, 1000);
    REQUIRE(a.tasks.size() == 1);
    f.apply(queue::Release{"q", "k", a.tasks[0].lease, 0}, 1100);
    auto b = f.apply(queue::Take{"q", 1, 500, 7, false}, 1100);
    REQUIRE(b.tasks.size() == 1);
    auto c = f.apply(queue::Take{"q", 1, 500, 7, false}, 1700);  // b ran out at 1600
    REQUIRE(c.tasks.size() == 1);
    CHECK_FALSE(f.checker.failed());
    CHECK(f.history.leases_checked() == 3);
}

TEST_CASE("G2: a task still taken under an abandoned lease that ran out is reported",
          "[sim][history]") {
    Fixture f;
    f.apply(queue::Put{"q", "k", "\xa1v", 1000, queue::PutMode::upsert}, 1000);
    auto a = f.apply(queue::Take{"q", 1, 500, 7, false}, 1000);
    REQUIRE(a.tasks.size() == 1);
    f.history.abandoned("q", "k", a.tasks[0].lease, a.tasks[0].lease_until);
    // A replica whose store never let the lease go (no advance past 1500) breaks G2.
    f.history.check_final(1, f.store, f.index, 2000);
    REQUIRE(f.checker.failed());
    CHECK(f.checker.failure().find("G2") != std::string::npos);
}

TEST_CASE("G2: an abandoned task that came back passes", "[sim][history]") {
    Fixture f;
    f.apply(queue::Put{"q", "k", "\xa1v", 1000, queue::PutMode::upsert}, 1000);
    auto a = f.apply(queue::Take{"q", 1, 500, 7, false}, 1000);
    REQUIRE(a.tasks.size() == 1);
    f.history.abandoned("q", "k", a.tasks[0].lease, a.tasks[0].lease_until);
    f.apply(queue::Advance{}, 2000);
    f.history.check_final(1, f.store, f.index, 2000);
    CHECK_FALSE(f.checker.failed());
}
