// Majority arithmetic, kept apart from the protocol so it can be tested on its own
// (the configuration is a single majority of voters; joint consensus would add a
// second one here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "raft/types.h"

namespace dueq::raft {

// Smallest number of voters that is a majority of n.
constexpr std::size_t majority(std::size_t n) {
    return n / 2 + 1;
}

// The largest value v such that a majority of `values` are >= v (values holds one
// number per voter). §3.6.2: the leader's candidate commit index is this over the match
// indexes; it may commit it only if that entry is from the current term.
std::uint64_t quorum_value(std::vector<std::uint64_t> values);
// The largest value v such that at least `needed` of `values` are >= v (0 if fewer than
// `needed` values): the same for a majority counted over another set than `values`.
std::uint64_t quorum_value(std::vector<std::uint64_t> values, std::size_t needed);

enum class VoteResult { pending, won, lost };

// Counts grants and refusals of one election (pre-vote or real) among `voters`.
class VoteTally {
  public:
    explicit VoteTally(std::size_t voters) : voters_(voters) {}
    // Records `from`'s answer; a repeated answer from the same node is ignored.
    void record(NodeId from, bool granted) { answers_.emplace(from, granted); }
    VoteResult result() const;
    std::size_t granted() const;

  private:
    std::size_t voters_;
    std::map<NodeId, bool> answers_;
};

}  // namespace dueq::raft
