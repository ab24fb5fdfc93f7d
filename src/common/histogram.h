// A histogram in the shape Prometheus exposes (cumulative buckets, a sum and a count),
// cheap to record from any thread: relaxed atomics, no lock. The count is the buckets'
// total, so a scrape never shows more samples in the buckets than in the count.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace dueq {

class Histogram {
  public:
    // Upper bounds in seconds, from 50 µs to 10 s: fsyncs and requests on one scale.
    static constexpr std::array<double, 16> kBounds{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                    0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                                    0.5,     1.0,    2.5,     10.0};
    static constexpr std::size_t kMaxBounds = 24;

    Histogram() : Histogram(kBounds) {}
    // Other upper bounds (ascending, at most kMaxBounds, seconds, negative ones allowed);
    // `bounds` must outlive the histogram.
    explicit Histogram(std::span<const double> bounds)
        : bounds_(bounds.size() <= kMaxBounds ? bounds : bounds.first(kMaxBounds)) {}

    void record_us(std::uint64_t us) { record_signed_us(std::int64_t(us)); }
    void record_signed_us(std::int64_t us) {
        const double s = double(us) / 1e6;
        std::size_t i = 0;
        while (i < bounds_.size() && s > bounds_[i])
            ++i;
        buckets_[i].fetch_add(1, std::memory_order_relaxed);  // [bounds_.size()]: +Inf only
        sum_us_.fetch_add(us, std::memory_order_relaxed);
    }
    std::span<const double> bounds() const { return bounds_; }
    // Samples with a value <= bounds()[i] (i == bounds().size(): all of them).
    std::uint64_t cumulative(std::size_t i) const {
        std::uint64_t n = 0;
        for (std::size_t j = 0; j <= i && j <= bounds_.size(); ++j)
            n += buckets_[j].load(std::memory_order_relaxed);
        return n;
    }
    double sum_seconds() const { return double(sum_us_.load(std::memory_order_relaxed)) / 1e6; }
    std::uint64_t count() const { return cumulative(bounds_.size()); }

  private:
    std::span<const double> bounds_;
    std::array<std::atomic<std::uint64_t>, kMaxBounds + 1> buckets_{};
    std::atomic<std::int64_t> sum_us_{0};
};

}  // namespace dueq
