// The simulator's checks of the task store's guarantees (docs/guarantees.md), on the
// committed history as the replicas apply it:
//  G1  an acknowledged command is never lost: every replica that applies its index
//      applies that very entry, and at the end every replica holds it;
//  G2  a task taken and abandoned comes back once its lease has run out (checked on
//      every replica at the end, after the log time has passed every such lease);
//  G3  no task is ever handed out while another lease on it is live, in log time.
// Failures go to the Raft checker, so that the first violation of either is reported.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "queue/command.h"
#include "queue/store.h"
#include "raft/types.h"
#include "sim/checker.h"

namespace dueq::sim {

class TaskHistory {
  public:
    explicit TaskHistory(Checker& checker) : checker_(checker) {}

    // A client was told its command at (index, term) is applied.
    void acknowledged(raft::Index index, raft::Term term);
    // A node applied an entry (cmd and result null for a no-op). The first application
    // of each index is the history G3 is checked on.
    void applied(raft::NodeId node, const raft::Entry& e, const queue::Command* cmd,
                 const queue::Result* result);
    // A client walked away from a lease without a word.
    void abandoned(const std::string& queue, const std::string& key, queue::LeaseId lease,
                   queue::Millis until);

    // The log time by which every abandoned lease has run out.
    queue::Millis abandoned_until() const { return abandoned_until_; }
    // End of run, on a quiet cluster: the replica `node` (its store at `applied`).
    void check_final(raft::NodeId node, const queue::Store& store, raft::Index applied,
                     queue::Millis time);
    std::size_t acknowledged_count() const { return acked_.size(); }
    std::size_t abandoned_count() const { return abandoned_.size(); }
    std::uint64_t leases_checked() const { return leases_checked_; }
    std::uint64_t sessions_released() const { return sessions_released_; }

  private:
    struct Lease {
        queue::LeaseId id = 0;
        queue::Millis until = 0;
        queue::SessionId session = 0;
        bool release_on_disconnect = false;
    };
    struct Abandoned {
        std::string queue, key;
        queue::LeaseId lease;
    };
    using TaskKey = std::pair<std::string, std::string>;
    void on_command(const queue::Command& cmd, const queue::Result& r, raft::Index index);
    void end_lease(const TaskKey& key, queue::LeaseId lease);

    Checker& checker_;
    std::map<raft::Index, raft::Term> acked_;
    raft::Index history_ = 0;  // the highest index whose first application was seen
    queue::Millis time_ = 0;   // log time of the history so far
    std::map<TaskKey, Lease> live_;
    std::vector<Abandoned> abandoned_;
    queue::Millis abandoned_until_ = 0;
    std::uint64_t leases_checked_ = 0;
    std::uint64_t sessions_released_ = 0;
};

}  // namespace dueq::sim
