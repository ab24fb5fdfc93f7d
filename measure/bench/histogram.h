// Latency histogram with log-linear buckets: exact below 128 ns, then 128 buckets per
// power of two (relative error under 0.8%), from 1 ns to hours, in a fixed 56 KiB.
// Not thread-safe: each worker thread records into its own and merges at the end.
#pragma once

#include <array>
#include <cstdint>

namespace dueq::bench {

class Histogram {
  public:
    void record(std::uint64_t nanos);
    void merge(const Histogram& other);
    std::uint64_t count() const { return count_; }
    // The value at quantile q in [0, 1] (the midpoint of its bucket), in nanoseconds;
    // 0 when empty.
    std::uint64_t quantile(double q) const;
    std::uint64_t max() const { return max_; }
    double mean() const { return count_ ? double(sum_) / double(count_) : 0; }

  private:
    static constexpr int kSubBits = 7;
    static constexpr int kSub = 1 << kSubBits;
    static constexpr int kBuckets = (64 - kSubBits + 1) * kSub;
    static int index_of(std::uint64_t v);
    static std::uint64_t midpoint_of(int index);

    std::array<std::uint64_t, kBuckets> counts_{};
    std::uint64_t count_ = 0, sum_ = 0, max_ = 0;
};

}  // namespace dueq::bench
