// Bug: a task due in the far future (time near the store's 2^46 ms cap) overflowed the
// event timer's nanoseconds; the timer fired at once, found nothing, re-armed to the
// same time and spun the event loop at 100% CPU, across restarts too.
#include <catch2/catch.hpp>

#include <thread>

#include "common/process_cpu.h"
#include "node/support.h"

using namespace dueq::test;

TEST_CASE("a task due in the far future leaves an idle node idle") {
    TestNode node("timer-spin");
    RawClient c(node.port());
    const std::int64_t far = (std::int64_t(1) << 46) - 1;
    REQUIRE(c.call("put", 1, {{"key", c.str("far")}, {"payload", c.obj(1)}, {"time", c.obj(far)}})
                .ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double before = dueq::process_cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const double used = dueq::process_cpu_seconds() - before;
    INFO("CPU used by the idle process in 0.5 s: " << used << " s");
    CHECK(used < 0.25);  // a spinning loop uses the whole 0.5 s
    CHECK(c.call("ping", 3).ok());
}
