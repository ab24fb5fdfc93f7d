#include "raft/config.h"

#include <algorithm>

namespace dueq::raft {

std::string_view to_string(PlantedBug b) {
    switch (b) {
        case PlantedBug::none:
            return "none";
        case PlantedBug::vote_for_stale_log:
            return "vote_for_stale_log";
        case PlantedBug::commit_prior_term:
            return "commit_prior_term";
        case PlantedBug::vote_before_persist:
            return "vote_before_persist";
        case PlantedBug::apply_uncommitted:
            return "apply_uncommitted";
        case PlantedBug::ack_before_persist:
            return "ack_before_persist";
        case PlantedBug::shell_applies_uncommitted:
            return "shell_applies_uncommitted";
        case PlantedBug::lease_from_local_clock:
            return "lease_from_local_clock";
        case PlantedBug::reply_before_commit:
            return "reply_before_commit";
        case PlantedBug::merge_dropped:
            return "merge_dropped";
        case PlantedBug::fork_put_below_deletion:
            return "fork_put_below_deletion";
        case PlantedBug::merge_older_finish_wins:
            return "merge_older_finish_wins";
        case PlantedBug::shard_serves_every_key:
            return "shard_serves_every_key";
    }
    return "?";
}

bool parse_planted_bug(std::string_view name, PlantedBug& out) {
    for (auto b : {PlantedBug::none, PlantedBug::vote_for_stale_log, PlantedBug::commit_prior_term,
                   PlantedBug::vote_before_persist, PlantedBug::apply_uncommitted,
                   PlantedBug::ack_before_persist, PlantedBug::shell_applies_uncommitted,
                   PlantedBug::lease_from_local_clock, PlantedBug::reply_before_commit,
                   PlantedBug::merge_dropped, PlantedBug::fork_put_below_deletion,
                   PlantedBug::merge_older_finish_wins, PlantedBug::shard_serves_every_key}) {
        if (to_string(b) == name) {
            out = b;
            return true;
        }
    }
    return false;
}

bool planted_bugs_compiled() {
#ifdef DUEQ_PLANTED_BUGS
    return true;
#else
    return false;
#endif
}

bool Config::valid() const {
    if (id == kNoNode || voters.empty()) return false;
    if (std::find(voters.begin(), voters.end(), id) == voters.end()) return false;
    if (std::find(voters.begin(), voters.end(), kNoNode) != voters.end()) return false;
    if (election_tick <= 0 || heartbeat_tick <= 0 || heartbeat_tick >= election_tick) return false;
    if (lease_read && !check_quorum) return false;
    if (lease_margin_ticks < 0 || lease_margin_ticks >= election_tick) return false;
    if (max_entries_per_msg == 0 || max_inflight_msgs == 0) return false;
    return true;
}

}  // namespace dueq::raft
