#include "node/clock.h"

#include <algorithm>
#include <chrono>

namespace dueq::node {
namespace {
template <class Clock>
std::int64_t micros() {
    using namespace std::chrono;
    return duration_cast<microseconds>(Clock::now().time_since_epoch()).count();
}
}  // namespace

NodeClock::NodeClock()
    : NodeClock(micros<std::chrono::system_clock>, micros<std::chrono::steady_clock>) {}

NodeClock::NodeClock(Source wall_us, Source monotonic_us)
    : wall_us_(std::move(wall_us)), mono_us_(std::move(monotonic_us)) {}

std::int64_t NodeClock::now_ms() {
    const std::int64_t wall = wall_us_(), mono = mono_us_();
    if (!started_) {
        started_ = true;
        now_us_ = wall;
        last_mono_us_ = mono;
        return now_us_ / 1000;
    }
    const std::int64_t elapsed = std::max<std::int64_t>(0, mono - last_mono_us_);
    last_mono_us_ = std::max(last_mono_us_, mono);
    const std::int64_t base = now_us_ + elapsed;
    wall_offset_us_ = wall - base;
    const auto allowed = std::int64_t(double(elapsed) * kMaxSlew);
    now_us_ = base + std::clamp(wall_offset_us_, -allowed, allowed);
    return now_us_ / 1000;
}

}  // namespace dueq::node
