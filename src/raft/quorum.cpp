#include "raft/quorum.h"

#include <algorithm>

namespace dueq::raft {

std::uint64_t quorum_value(std::vector<std::uint64_t> values) {
    const std::size_t needed = majority(values.size());
    return quorum_value(std::move(values), needed);
}

std::uint64_t quorum_value(std::vector<std::uint64_t> values, std::size_t needed) {
    if (needed == 0 || values.size() < needed) return 0;
    // Sorted descending, the needed-th value is held by at least `needed` of them.
    std::size_t k = needed - 1;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end(),
                     std::greater<>());
    return values[k];
}

std::size_t VoteTally::granted() const {
    std::size_t n = 0;
    for (const auto& [id, g] : answers_)
        n += g ? 1 : 0;
    return n;
}

VoteResult VoteTally::result() const {
    std::size_t yes = granted();
    std::size_t no = answers_.size() - yes;
    if (yes >= majority(voters_)) return VoteResult::won;
    if (no > voters_ - majority(voters_)) return VoteResult::lost;
    return VoteResult::pending;
}

}  // namespace dueq::raft
