// A tiny seeded random source (SplitMix64). The core uses it only to randomize
// election timeouts (§3.4). Written out here, rather than std::mt19937 plus a
// distribution, because std distributions differ between standard libraries and the
// simulator must replay a seed bit-for-bit anywhere.
#pragma once

#include <cstdint>

namespace dueq::raft {

class Random {
  public:
    explicit Random(std::uint64_t seed) : state_(seed) {}

    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

    // Uniform in [lo, hi] (inclusive); lo <= hi. The modulo bias is negligible for the
    // small ranges used here and keeps the sequence portable.
    std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi) {
        return lo + next() % (hi - lo + 1);
    }

    // True with probability p (0..1).
    bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }

  private:
    std::uint64_t state_;
};

}  // namespace dueq::raft
