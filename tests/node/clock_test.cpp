#include <catch2/catch.hpp>

#include "node/clock.h"

using dueq::node::NodeClock;

namespace {
// Hand-driven sources, in ms for readability.
struct FakeTime {
    std::int64_t wall_ms = 1'700'000'000'000, mono_ms = 5'000;
    NodeClock clock() {
        return NodeClock([this] { return wall_ms * 1000; }, [this] { return mono_ms * 1000; });
    }
    void pass(std::int64_t ms) {
        wall_ms += ms;
        mono_ms += ms;
    }
};
}  // namespace

TEST_CASE("the node clock reads the system clock while it does not jump") {
    FakeTime t;
    auto c = t.clock();
    CHECK(c.now_ms() == t.wall_ms);
    for (int i = 0; i < 100; ++i) {
        t.pass(37);
        CHECK(c.now_ms() == t.wall_ms);
    }
}

TEST_CASE("a forward step of the system clock is absorbed at 1%: no lease ends early") {
    FakeTime t;
    auto c = t.clock();
    const auto start = c.now_ms();
    t.wall_ms += 30'000;  // NTP steps, or the clock is simply wrong
    t.pass(3'000);        // a lease of 3 s
    const auto advanced = c.now_ms() - start;
    CHECK(advanced >= 3'000);
    CHECK(advanced <= 3'030);
    CHECK(c.wall_offset_ms() > 29'000);
    // It does converge: 30 s at 1% takes 3000 s.
    for (int i = 0; i < 3'100; ++i) {
        t.pass(1'000);
        c.now_ms();
    }
    CHECK(c.now_ms() == t.wall_ms);
}

TEST_CASE("a backward step never moves the node clock back; it slows by at most 1%") {
    FakeTime t;
    auto c = t.clock();
    auto last = c.now_ms();
    t.wall_ms -= 30'000;
    for (int i = 0; i < 100; ++i) {
        t.pass(100);
        const auto now = c.now_ms();
        CHECK(now - last >= 99);
        CHECK(now - last <= 100);
        last = now;
    }
}
