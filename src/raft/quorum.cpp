#include "raft/quorum.h"

#include <algorithm>

namespace dueq::raft {

std::uint64_t quorum_value(std::vector<std::uint64_t> values) {
    if (values.empty()) return 0;
    // Sorted descending, the majority-th value is held by at least a majority.
    std::size_t k = majority(values.size()) - 1;
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
