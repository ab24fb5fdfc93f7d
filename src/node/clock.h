// The node's clock: wall-clock time (ms since the Unix epoch) that never jumps.
//
// The leader stamps every log entry with this time, and leases, due times and session
// deadlines are judged by it. If it followed the system clock, an NTP step or a wrong
// clock 30 s ahead would end every live lease 30 s early, and a second worker would get a
// task the first still holds (the chaos scenario clock-jump showed exactly that). So it
// advances with the monotonic clock, and drifts toward the system clock by at most
// kMaxSlew of the elapsed time: a step of the system clock is absorbed over time (30 s in
// 50 minutes), a lease is never cut short by more than 1% of its length, and in the
// steady state (no steps) it reads the system clock exactly.
#pragma once

#include <cstdint>
#include <functional>

namespace dueq::node {

class NodeClock {
  public:
    static constexpr double kMaxSlew = 0.01;

    // Sources in microseconds; the defaults read the system and the monotonic clock.
    using Source = std::function<std::int64_t()>;
    NodeClock();
    NodeClock(Source wall_us, Source monotonic_us);

    std::int64_t now_ms();
    // How far the system clock is from this clock (positive: ahead), as of the last read.
    std::int64_t wall_offset_ms() const { return wall_offset_us_ / 1000; }

  private:
    Source wall_us_, mono_us_;
    bool started_ = false;
    std::int64_t now_us_ = 0, last_mono_us_ = 0, wall_offset_us_ = 0;
};

}  // namespace dueq::node
