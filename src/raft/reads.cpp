// Linearizable reads: ReadIndex (§6.4) and the optional leader lease (§6.4.1).
#include <algorithm>

#include "raft/raft.h"

namespace dueq::raft {

bool Raft::committed_in_current_term() const {
    return log_.term_or_zero(log_.committed()) == term_;
}

Status Raft::read_index(std::uint64_t context) {
    if (role_ != Role::leader) return Error::not_leader;
    if (!committed_in_current_term()) {
        // §6.4 step 1: a fresh leader's commit index may lag what its predecessor
        // committed; wait until its no-op commits.
        reads_before_commit_.push_back(context);
        return Status::ok();
    }
    start_read(context);
    return Status::ok();
}

void Raft::start_read(std::uint64_t context) {
    Index index = log_.committed();
    if (peers_.empty() || (cfg_.lease_read && lease_valid())) {
        read_states_.push_back({index, context});
        return;
    }
    // §6.4 steps 2-3: confirm we are still the leader with a heartbeat round sent after
    // the request arrived; the read is safe once a majority answers that round.
    bcast_heartbeat();
    reads_.push_back({context, index, round_});
}

void Raft::bcast_heartbeat() {
    ++round_;
    round_ticks_.emplace_back(round_, tick_count_);
    // Rounds older than two election timeouts can no longer extend a lease.
    auto horizon = static_cast<std::uint64_t>(2 * cfg_.election_tick);
    while (round_ticks_.size() > 1 && round_ticks_.front().second + horizon < tick_count_) {
        round_ticks_.pop_front();
    }
    for (const auto& [id, pr] : peers_) {
        send({.type = MessageType::heartbeat,
              .to = id,
              .commit = std::min(pr.match, log_.committed()),
              .context = round_});
    }
}

void Raft::release_confirmed_reads() {
    if (reads_.empty()) return;
    std::vector<std::uint64_t> acked{round_};  // the leader answers its own rounds
    for (const auto& [id, pr] : peers_)
        acked.push_back(pr.acked_round);
    std::uint64_t confirmed = quorum_value(std::move(acked));
    while (!reads_.empty() && reads_.front().round <= confirmed) {
        read_states_.push_back({reads_.front().index, reads_.front().context});
        reads_.pop_front();
    }
}

bool Raft::lease_valid() const {
    // §6.4.1: a follower that answered a heartbeat sent at tick s heard us at or after
    // s and, with CheckQuorum, will not vote for anyone else for election_tick of its
    // own ticks. So no other leader can exist before s + election_tick on a majority,
    // minus a margin for clock drift. A transfer breaks that promise on purpose.
    if (role_ != Role::leader || !cfg_.check_quorum || timeout_now_sent_) return false;
    if (transferee_ != kNoNode) return false;
    std::vector<std::uint64_t> sent_ticks{tick_count_};
    for (const auto& [id, pr] : peers_) {
        std::uint64_t tick = 0;
        for (const auto& [round, t] : round_ticks_) {
            if (round == pr.acked_round) tick = t;
        }
        sent_ticks.push_back(tick);
    }
    std::uint64_t start = quorum_value(std::move(sent_ticks));
    if (start == 0) return false;
    auto span = static_cast<std::uint64_t>(cfg_.election_tick - cfg_.lease_margin_ticks);
    return tick_count_ < start + span;
}

}  // namespace dueq::raft
