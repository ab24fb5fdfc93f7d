// Membership: the configurations in the log, learners, single-server changes (§4.1) and
// the quorums they define. docs/internals/raft.md, "Membership", says why single-server
// changes and not joint consensus.
#include <algorithm>

#include "raft/raft.h"

namespace dueq::raft {

namespace {

Membership sorted(Membership m) {
    std::sort(m.voters.begin(), m.voters.end());
    std::sort(m.learners.begin(), m.learners.end());
    return m;
}

}  // namespace

void Raft::start_membership() {
    confs_.clear();
    confs_[storage_.first_index() - 1] =
        sorted(Membership{cfg_.voters, cfg_.learners, cfg_.directory});
    // The log after the snapshot may hold newer configurations (a restart replays them).
    for (Index lo = storage_.first_index(), hi = storage_.last_index(); lo <= hi;) {
        auto batch = storage_.entries(lo, hi + 1, std::uint64_t(64) << 20);
        if (!batch || batch.value().empty()) break;
        for (const Entry& e : batch.value()) {
            if (e.type != EntryType::config) continue;
            if (auto m = decode_membership(e.data.view())) confs_[e.index] = std::move(*m);
        }
        lo = batch.value().back().index + 1;
    }
}

bool Raft::may_campaign() const {
    // A voter that the latest change removes still campaigns until that change commits,
    // counting the votes of the new voters only. Otherwise, when it alone holds the change
    // (its leader crashed before the change reached its own disk, or it was the leader
    // that removed itself), the others' logs are behind its and they cannot elect one of
    // theirs without its vote, which goes only to a log as long as its own. It wins, commits
    // the change, and steps down (maybe_step_down_removed).
    return is_voter() || committed_membership().is_voter(cfg_.id);
}

const Membership& Raft::committed_membership() const {
    auto it = confs_.upper_bound(log_.committed());
    return it == confs_.begin() ? it->second : std::prev(it)->second;
}

Index Raft::committed_membership_index() const {
    auto it = confs_.upper_bound(log_.committed());
    return it == confs_.begin() ? it->first : std::prev(it)->first;
}

std::vector<NodeId> Raft::leaving() const {
    std::vector<NodeId> out;
    for (const auto& [id, state] : leaving_)
        out.push_back(id);
    return out;
}

std::vector<Index> Raft::pending_changes() const {
    std::vector<Index> out;
    for (auto it = confs_.upper_bound(log_.committed()); it != confs_.end(); ++it)
        out.push_back(it->first);
    return out;
}

void Raft::log_changed(Index from, const std::vector<Entry>& entries) {
    const std::vector<NodeId> voters_before = membership().voters;
    const Index last = log_.last_index();
    const Index upto = from + entries.size();
    for (auto it = confs_.lower_bound(from); it != confs_.end();) {
        // The first element stands for the log's start and always stays.
        bool replaced = (it->first < upto || it->first > last) && it != confs_.begin();
        it = replaced ? confs_.erase(it) : std::next(it);
    }
    for (const Entry& e : entries) {
        if (e.type != EntryType::config) continue;
        if (auto m = decode_membership(e.data.view())) confs_[e.index] = std::move(*m);
    }
    if (role_ != Role::leader) return;
    for (NodeId id : voters_before) {
        if (!membership().is_voter(id)) removed_.push_back(id);
    }
    for (const auto& [id, pr] : peers_) {
        if (!membership().contains(id) && !leaving_.count(id))
            leaving_[id] = {membership_index(), 0};
    }
    track_members();
}

void Raft::see_off_leaving() {
    // A removed member learns that its removal committed only from us (its peers stop
    // talking to it), so it is sent appends and heartbeats until it holds the change and
    // was told it is committed (two heartbeats after that), or for two election timeouts.
    for (auto it = leaving_.begin(); it != leaving_.end();) {
        auto& [id, state] = *it;
        auto pr = peers_.find(id);
        bool done = pr == peers_.end();
        if (!done && log_.committed() >= state.index) {
            state.rounds += pr->second.match >= state.index ? 1 : 0;
            done = state.rounds > 2 || ++state.ticks > 2 * cfg_.election_tick;
        }
        if (done && pr != peers_.end() && !membership().contains(id)) peers_.erase(pr);
        it = done ? leaving_.erase(it) : std::next(it);
    }
}

void Raft::restore_membership(const Snapshot& snap) {
    const Index at = snap.meta.index;
    std::optional<Membership> m = decode_membership(snap.conf);
    if (!m) {
        // The sender did not say: the newest configuration at or before the snapshot's
        // index is the one we had there.
        auto it = confs_.upper_bound(at);
        m = it == confs_.begin() ? it->second : std::prev(it)->second;
    }
    confs_.clear();
    confs_[at] = std::move(*m);
}

void Raft::track_members() {
    const Membership& now = membership();
    const Index next = log_.last_index() + 1;
    auto add = [&](NodeId id) {
        if (id == cfg_.id || peers_.count(id)) return;
        Progress pr(next, cfg_.max_inflight_msgs, cfg_.max_inflight_bytes);
        pr.recent_active = true;  // give a new member an election timeout to answer
        peers_.emplace(id, std::move(pr));
    };
    for (NodeId id : now.voters)
        add(id);
    for (NodeId id : now.learners)
        add(id);
    const bool keep_removed = planted(PlantedBug::removed_counted_in_quorum);
    for (auto it = peers_.begin(); it != peers_.end();) {
        bool kept = now.contains(it->first) || leaving_.count(it->first) ||
                    (keep_removed && std::count(removed_.begin(), removed_.end(), it->first));
        it = kept ? std::next(it) : peers_.erase(it);
    }
    if (transferee_ != kNoNode && !now.is_voter(transferee_)) abort_transfer();
}

std::vector<std::uint64_t> Raft::commit_matches(std::size_t& needed) const {
    const Membership& now = membership();
    needed = majority(now.voters.size());
    std::vector<std::uint64_t> matches;
    if (now.is_voter(cfg_.id)) matches.push_back(self_match());
    for (const auto& [id, pr] : peers_) {
        bool counts = now.is_voter(id) ||
                      (planted(PlantedBug::learner_counted_as_voter) && now.is_learner(id)) ||
                      (planted(PlantedBug::removed_counted_in_quorum) && !now.contains(id));
        if (counts) matches.push_back(pr.match);
    }
    return matches;
}

bool Raft::quorum_active() const {
    const Membership& now = membership();
    std::size_t active = now.is_voter(cfg_.id) ? 1 : 0;
    for (const auto& [id, pr] : peers_)
        active += (now.is_voter(id) && pr.recent_active) ? 1 : 0;
    return active >= majority(now.voters.size());
}

void Raft::maybe_step_down_removed() {
    if (role_ != Role::leader || is_voter() || log_.committed() < membership_index()) return;
    // The change that removed this leader is committed (§4.2.2): hand over to the voter
    // that is furthest along, so the cluster need not wait for an election timeout.
    NodeId best = kNoNode;
    Index best_match = 0;
    for (const auto& [id, pr] : peers_) {
        if (membership().is_voter(id) && pr.match >= best_match) {
            best = id;
            best_match = pr.match;
        }
    }
    if (best != kNoNode && best_match == log_.last_index()) {
        send({.type = MessageType::timeout_now, .to = best});
    }
    become_follower(term_, kNoNode);
}

Status Raft::check_change(const Membership& next) const {
    if (!membership_valid(next)) return Error::invalid;
    if (membership_index() > log_.committed() && !planted(PlantedBug::two_changes_in_flight)) {
        return Error::change_pending;
    }
    if (!committed_in_current_term() && !planted(PlantedBug::change_before_term_commit)) {
        return Error::change_pending;
    }
    const Membership& now = membership();
    if (next == now || voters_changed(now, next) > 1) return Error::invalid;
    for (NodeId id : next.voters) {
        if (now.is_voter(id)) continue;
        // §4.2.1: only a learner that has caught up becomes a voter (and that has answered
        // at all: one that never started would count toward no commit).
        if (!now.is_learner(id)) return Error::invalid;
        const Progress* pr = progress(id);
        if (!pr || pr->match == 0 || pr->match + cfg_.promote_lag < log_.last_index())
            return Error::not_caught_up;
    }
    return Status::ok();
}

Result<Index> Raft::propose_membership(Membership next, Millis now_ms) {
    if (role_ != Role::leader) return Error::not_leader;
    if (transferee_ != kNoNode) return Error::transfer_in_progress;
    next = sorted(std::move(next));
    if (Status st = check_change(next); !st) return st.error();
    clock_ms_ = std::max(clock_ms_, now_ms);
    Entry e{term_, log_.last_index() + 1, std::max(log_.last_time(), clock_ms_), EntryType::config,
            encode_membership(next)};
    log_.append({e});
    log_changed(e.index, {e});
    pending_bcast_ = true;
    return e.index;
}

}  // namespace dueq::raft
