// A latency histogram in the shape Prometheus exposes (cumulative buckets, a sum and a
// count), cheap to record from any thread: relaxed atomics, no lock. The count is the
// buckets' total, so a scrape never shows more samples in the buckets than in the count.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dueq {

class Histogram {
  public:
    // Upper bounds in seconds, from 50 µs to 10 s: fsyncs and requests on one scale.
    static constexpr std::array<double, 16> kBounds{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                    0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                                    0.5,     1.0,    2.5,     10.0};

    void record_us(std::uint64_t us) {
        const double s = double(us) / 1e6;
        std::size_t i = 0;
        while (i < kBounds.size() && s > kBounds[i])
            ++i;
        buckets_[i].fetch_add(1, std::memory_order_relaxed);  // [kBounds.size()]: +Inf only
        sum_us_.fetch_add(us, std::memory_order_relaxed);
    }
    // Samples with a value <= kBounds[i] (i == kBounds.size(): all of them).
    std::uint64_t cumulative(std::size_t i) const {
        std::uint64_t n = 0;
        for (std::size_t j = 0; j <= i && j < buckets_.size(); ++j)
            n += buckets_[j].load(std::memory_order_relaxed);
        return n;
    }
    double sum_seconds() const { return double(sum_us_.load(std::memory_order_relaxed)) / 1e6; }
    std::uint64_t count() const { return cumulative(kBounds.size()); }

  private:
    std::array<std::atomic<std::uint64_t>, kBounds.size() + 1> buckets_{};
    std::atomic<std::uint64_t> sum_us_{0};
};

}  // namespace dueq
