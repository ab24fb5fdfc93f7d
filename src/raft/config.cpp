#include "raft/config.h"

#include "raft/membership.h"

#include <algorithm>

namespace dueq::raft {

bool planted_bugs_compiled() {
#ifdef DUEQ_PLANTED_BUGS
    return true;
#else
    return false;
#endif
}

bool Config::valid() const {
    if (id == kNoNode) return false;
    if (!voters.empty() || !learners.empty()) {
        Membership m{voters, learners, {}};
        std::sort(m.voters.begin(), m.voters.end());
        std::sort(m.learners.begin(), m.learners.end());
        if (!membership_valid(m)) return false;
    }
    if (election_tick <= 0 || heartbeat_tick <= 0 || heartbeat_tick >= election_tick) return false;
    if (lease_read && !check_quorum) return false;
    if (lease_margin_ticks < 0 || lease_margin_ticks >= election_tick) return false;
    if (max_entries_per_msg == 0 || max_inflight_msgs == 0) return false;
    return true;
}

}  // namespace dueq::raft
