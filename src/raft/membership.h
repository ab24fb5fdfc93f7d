// Who takes part in one Raft group: the voters, whose majority commits entries and
// elects leaders, and the learners, who receive the log but neither vote nor count.
//
// A membership travels in the log as an entry of type `config` (its data is
// encode_membership), and with a snapshot. The rule that makes changes safe is the
// thesis' single-server change (§4.1, and §4.2 for learners): every node uses the latest
// configuration in its log, committed or not; a leader proposes a change only once the
// previous one is committed and it has committed an entry of its own term; and one
// change adds or removes at most one voter, so that any two majorities of the old and
// new voters share a node (docs/internals/raft.md, "Membership").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "raft/types.h"

namespace dueq::raft {

struct Membership {
    std::vector<NodeId> voters;    // sorted, no duplicates, no kNoNode
    std::vector<NodeId> learners;  // sorted, disjoint from voters
    // What the layer above keeps with the membership (names and addresses of the
    // members); the core carries it and never reads it.
    std::string directory;

    bool empty() const { return voters.empty() && learners.empty(); }
    bool is_voter(NodeId id) const;
    bool is_learner(NodeId id) const;
    bool contains(NodeId id) const { return is_voter(id) || is_learner(id); }
    bool operator==(const Membership&) const = default;
};

// Sorted and well-formed (see the field comments), with at least one voter.
bool membership_valid(const Membership& m);
// How many voters are in one of `a`, `b` and not the other.
std::size_t voters_changed(const Membership& a, const Membership& b);

std::string encode_membership(const Membership& m);
// nullopt when `data` is not an encoded, valid membership.
std::optional<Membership> decode_membership(std::string_view data);

// "voters 1,2,3 learners 4" for logs and errors.
std::string describe(const Membership& m);

}  // namespace dueq::raft
