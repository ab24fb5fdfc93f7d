// Blocking takes parked on the leader (node/take_waiters.h), without a network.
#include <catch2/catch.hpp>

#include "node/take_waiters.h"

using dueq::node::TakeWaiters;

namespace {
TakeWaiters::Waiter waiter(const std::string& queue, std::uint32_t count, std::int64_t deadline,
                           std::uint64_t id) {
    // The take's session tells the waiters apart here.
    return {nullptr, dueq::queue::Take{queue, count, {}, id, true}, deadline};
}
}  // namespace

TEST_CASE("waiters wake in arrival order, as many as there are tasks") {
    TakeWaiters w(100);
    for (std::uint64_t k = 1; k <= 5; ++k)
        w.park(waiter("q", 1, 1000 + k, k));
    w.park(waiter("other", 1, 900, 9));
    auto woken = w.pop("q", 2);
    REQUIRE(woken.size() == 2);
    CHECK(woken[0].take.session == 1);
    CHECK(woken[1].take.session == 2);
    CHECK(w.size() == 4);
}

TEST_CASE("a take of several tasks counts for all of them") {
    TakeWaiters w(100);
    w.park(waiter("q", 3, 1000, 1));
    w.park(waiter("q", 1, 1000, 2));
    CHECK(w.pop("q", 2).size() == 1);  // the first asked for 3: enough for 2 tasks
    CHECK(w.size() == 1);
}

TEST_CASE("timeouts expire in deadline order and leave the rest") {
    TakeWaiters w(100);
    w.park(waiter("q", 1, 3000, 1));
    w.park(waiter("q", 1, 1000, 2));
    w.park(waiter("q", 1, 2000, 3));
    CHECK(w.earliest_deadline() == 1000);
    auto gone = w.expire(2000);
    REQUIRE(gone.size() == 2);
    CHECK(gone[0].take.session == 2);
    CHECK(gone[1].take.session == 3);
    auto left = w.pop("q", 10);
    REQUIRE(left.size() == 1);
    CHECK(left[0].take.session == 1);
    CHECK(w.queues().empty());
}

TEST_CASE("the capacity is a hard cap") {
    TakeWaiters w(2);
    w.park(waiter("q", 1, 1000, 1));
    CHECK_FALSE(w.full());
    w.park(waiter("q", 1, 1000, 2));
    CHECK(w.full());
}

TEST_CASE("woken takes not applied yet count against the due tasks") {
    TakeWaiters w(100);
    for (std::uint64_t k = 1; k <= 4; ++k)
        w.park(waiter("q", 1, 5000, k));
    std::uint64_t due = 1;
    auto count_due = [&](std::uint64_t) { return due; };
    auto first = w.wake("q", 10, count_due);  // one task due: one take wakes
    REQUIRE(first.size() == 1);
    w.claim("q", 11, 1);  // proposed as entry 11
    // Another Ready passes before entry 11 is applied: the same task is still due, and
    // nobody else may wake for it.
    CHECK(w.wake("q", 10, count_due).empty());
    due = 2;  // a second task came due
    CHECK(w.wake("q", 10, count_due).size() == 1);
    w.claim("q", 12, 1);
    // Both applied (the tasks are taken): the claims go, and nothing is due.
    due = 0;
    CHECK(w.wake("q", 12, count_due).empty());
    due = 1;
    CHECK(w.wake("q", 12, count_due).size() == 1);
    CHECK(w.size() == 1);
}
