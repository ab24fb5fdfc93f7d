#include "histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace dueq::bench {

int Histogram::index_of(std::uint64_t v) {
    if (v < std::uint64_t(kSub)) return int(v);
    const int msb = 63 - std::countl_zero(v);  // >= kSubBits
    const int shift = msb - kSubBits;
    const int sub = int(v >> shift);  // in [kSub, 2 kSub)
    return (shift + 1) * kSub + (sub - kSub);
}

std::uint64_t Histogram::midpoint_of(int index) {
    if (index < kSub) return std::uint64_t(index);
    const int shift = index / kSub - 1;
    const std::uint64_t low = std::uint64_t(index % kSub + kSub) << shift;
    return low + ((std::uint64_t(1) << shift) >> 1);
}

void Histogram::record(std::uint64_t nanos) {
    ++counts_[std::size_t(index_of(nanos))];
    ++count_;
    sum_ += nanos;
    max_ = std::max(max_, nanos);
}

void Histogram::merge(const Histogram& other) {
    for (std::size_t i = 0; i < counts_.size(); ++i)
        counts_[i] += other.counts_[i];
    count_ += other.count_;
    sum_ += other.sum_;
    max_ = std::max(max_, other.max_);
}

std::uint64_t Histogram::quantile(double q) const {
    if (count_ == 0) return 0;
    const auto rank = std::max<std::uint64_t>(1, std::uint64_t(std::ceil(q * double(count_))));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
        seen += counts_[i];
        if (seen >= rank) return std::min(midpoint_of(int(i)), max_);
    }
    return max_;
}

}  // namespace dueq::bench
