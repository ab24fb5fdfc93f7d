#include "testing/planted/planted.h"

#include <array>

namespace dueq::testing {
namespace {

using node::NodeDefect;
using node::PlantedDefects;
using queue::StoreDefect;
using raft::PlantedBug;
using shell::ShellDefect;

struct Named {
    std::string_view name;
    PlantedDefects defects;
};

// The names are the ones the chaos harness, the docs and the replay commands use; the
// shell's carry their layer in the name where the bare word would be ambiguous.
constexpr std::array kNamed{
    Named{"vote_for_stale_log", {.core = PlantedBug::vote_for_stale_log}},
    Named{"commit_prior_term", {.core = PlantedBug::commit_prior_term}},
    Named{"vote_before_persist", {.core = PlantedBug::vote_before_persist}},
    Named{"apply_uncommitted", {.core = PlantedBug::apply_uncommitted}},
    Named{"ack_before_persist", {.core = PlantedBug::ack_before_persist}},
    Named{"two_changes_in_flight", {.core = PlantedBug::two_changes_in_flight}},
    Named{"change_before_term_commit", {.core = PlantedBug::change_before_term_commit}},
    Named{"removed_counted_in_quorum", {.core = PlantedBug::removed_counted_in_quorum}},
    Named{"learner_counted_as_voter", {.core = PlantedBug::learner_counted_as_voter}},
    Named{"shell_applies_uncommitted", {.shell = ShellDefect::applies_uncommitted}},
    Named{"lease_from_local_clock", {.shell = ShellDefect::lease_from_local_clock}},
    Named{"reply_before_commit", {.shell = ShellDefect::reply_before_commit}},
    Named{"merge_dropped", {.shell = ShellDefect::merge_dropped}},
    Named{"fork_put_below_deletion", {.store = StoreDefect::fork_put_below_deletion}},
    Named{"merge_older_finish_wins", {.store = StoreDefect::merge_older_finish_wins}},
    Named{"shard_serves_every_key", {.node = NodeDefect::shard_serves_every_key}},
    Named{"leader_reads_unconfirmed", {.node = NodeDefect::leader_reads_unconfirmed}},
};

}  // namespace

std::optional<PlantedDefects> parse_planted(std::string_view name) {
    if (name == "none") return PlantedDefects{};
    for (const auto& n : kNamed)
        if (n.name == name) return n.defects;
    return std::nullopt;
}

std::string_view planted_name(const PlantedDefects& defects) {
    if (defects == PlantedDefects{}) return "none";
    for (const auto& n : kNamed)
        if (n.defects == defects) return n.name;
    return "?";
}

std::vector<std::string_view> planted_names() {
    std::vector<std::string_view> out;
    for (const auto& n : kNamed)
        out.push_back(n.name);
    return out;
}

std::string planted_list() {
    std::string out;
    for (const auto& n : kNamed)
        out += (out.empty() ? "" : ", ") + std::string(n.name);
    return out;
}

}  // namespace dueq::testing
