// Lifecycle, roles, ticks, proposals and the Ready/advance hand-off; linearizable reads:
// ReadIndex (§6.4) and the optional leader lease (§6.4.1). raft_messages.cpp has the
// messages: elections, leadership transfer, replication, commitment and snapshots.
#include "raft/raft.h"

#include "common/invariant.h"

#include <algorithm>

namespace dueq::raft {

std::string_view to_string(Role r) {
    switch (r) {
        case Role::follower:
            return "follower";
        case Role::pre_candidate:
            return "pre_candidate";
        case Role::candidate:
            return "candidate";
        case Role::leader:
            return "leader";
    }
    return "?";
}

std::string_view to_string(MessageType t) {
    switch (t) {
        case MessageType::pre_vote:
            return "pre_vote";
        case MessageType::pre_vote_resp:
            return "pre_vote_resp";
        case MessageType::vote:
            return "vote";
        case MessageType::vote_resp:
            return "vote_resp";
        case MessageType::append:
            return "append";
        case MessageType::append_resp:
            return "append_resp";
        case MessageType::snapshot:
            return "snapshot";
        case MessageType::heartbeat:
            return "heartbeat";
        case MessageType::heartbeat_resp:
            return "heartbeat_resp";
        case MessageType::timeout_now:
            return "timeout_now";
    }
    return "?";
}

Raft::Raft(Config cfg, const LogStorage& storage)
    : cfg_(std::move(cfg)),
      storage_(storage),
      log_(storage),
      rand_(cfg_.seed ^ (cfg_.id * 0x9e37ULL)) {
    HardState hs = storage.hard_state();
    term_ = hs.term;
    vote_ = hs.vote;
    handed_hs_ = hard_state();
    start_membership();
    become_follower(term_, kNoNode);
}

bool Raft::planted(PlantedBug b) const {
#ifdef DUEQ_PLANTED_BUGS
    return cfg_.planted_bug == b;
#else
    (void)b;
    return false;
#endif
}

void Raft::reset(Term term) {
    DUEQ_INVARIANT(term >= term_, "term " + std::to_string(term) + " after " +
                                      std::to_string(term_) + ": terms never go back");
    if (term != term_) {
        term_ = term;
        vote_ = kNoNode;
    }
    leader_ = kNoNode;
    election_elapsed_ = 0;
    heartbeat_elapsed_ = 0;
    reset_election_timeout();
    tally_.reset();
    peers_.clear();
    transferee_ = kNoNode;
    transfer_elapsed_ = 0;
    timeout_now_sent_ = false;
    reads_before_commit_.clear();
    reads_.clear();
    removed_.clear();
    leaving_.clear();
}

void Raft::reset_election_timeout() {
    // §3.4: spread timeouts so that one node usually times out alone.
    randomized_timeout_ =
        static_cast<int>(rand_.uniform(static_cast<std::uint64_t>(cfg_.election_tick),
                                       static_cast<std::uint64_t>(2 * cfg_.election_tick - 1)));
}

void Raft::become_follower(Term term, NodeId leader) {
    reset(term);
    role_ = Role::follower;
    leader_ = leader;
}

void Raft::become_pre_candidate() {
    // §9.6: the term does not change, so a failed pre-vote disturbs nobody.
    tally_.reset();
    peers_.clear();
    role_ = Role::pre_candidate;
    leader_ = kNoNode;
    election_elapsed_ = 0;
    reset_election_timeout();
    tally_.emplace(membership().voters.size());
}

void Raft::become_candidate() {
    reset(term_ + 1);
    vote_ = cfg_.id;  // persisted with the term before any vote request leaves (Ready)
    role_ = Role::candidate;
    tally_.emplace(membership().voters.size());
}

void Raft::become_leader() {
    reset(term_);
    role_ = Role::leader;
    leader_ = cfg_.id;
    Index next = log_.last_index() + 1;
    track_members();  // everyone gets an election timeout to answer
    // §3.6.2 / §6.4: a no-op of the new term lets the leader commit what earlier terms
    // left uncommitted, and tells it its commit index is current.
    Entry noop{term_, next, std::max(log_.last_time(), clock_ms_), EntryType::noop, {}};
    log_.append({noop});
    pending_bcast_ = true;
}

void Raft::send(Message m) {
    m.from = cfg_.id;
    if (m.term == 0) m.term = term_;
    msgs_.push_back(std::move(m));
}

void Raft::tick(Millis now_ms) {
    clock_ms_ = std::max(clock_ms_, now_ms);
    ++tick_count_;
    if (role_ == Role::leader) {
        tick_leader();
    } else {
        tick_election();
    }
}

void Raft::tick_election() {
    ++election_elapsed_;
    if (election_elapsed_ >= randomized_timeout_) {
        election_elapsed_ = 0;
        if (may_campaign()) {
            campaign(cfg_.pre_vote, false);
        } else {
            // Learners and removed members never campaign, but they stop honouring a
            // leader they no longer hear (in_lease), so that they answer votes: a learner
            // may be a voter in the candidate's log already.
            leader_ = kNoNode;
        }
    }
}

void Raft::tick_leader() {
    ++heartbeat_elapsed_;
    ++election_elapsed_;
    for (auto& [id, pr] : peers_)
        ++pr.ticks_since_progress;

    if (election_elapsed_ >= cfg_.election_tick) {
        election_elapsed_ = 0;
        if (cfg_.check_quorum) {
            // §6.2: without a majority answering within an election timeout, another
            // leader may exist; stop acting as leader.
            const bool active = quorum_active();
            for (auto& [id, pr] : peers_)
                pr.recent_active = false;
            if (!active) {
                become_follower(term_, kNoNode);
                return;
            }
        }
        if (transferee_ != kNoNode) abort_transfer();  // §3.10: give up after a timeout
    }
    if (heartbeat_elapsed_ >= cfg_.heartbeat_tick) {
        heartbeat_elapsed_ = 0;
        see_off_leaving();
        bcast_heartbeat();
        for (auto& [id, pr] : peers_) {
            // Lost appends are only noticed by silence: resend from what is known to
            // match if nothing moved for an election timeout.
            bool stalled =
                pr.match < log_.last_index() && pr.ticks_since_progress >= cfg_.election_tick;
            if (pr.state == ProgressState::probe) {
                pr.probe_sent = false;
            } else if (stalled) {
                pr.become_probe();
            }
            // A follower that is behind gets an append, empty if everything is already
            // in flight: its answer shows a lost append within a heartbeat or two (a
            // gap reject). Followers that are caught up need none: the heartbeat
            // carries the commit index.
            if (pr.match < log_.last_index()) send_appends(id, true);
        }
    }
}

Result<Index> Raft::propose(std::string payload, Millis now_ms) {
    const EntryData data(std::move(payload));
    return propose_data(std::span<const EntryData>(&data, 1), now_ms);
}

Result<Index> Raft::propose(std::span<const std::string> payloads, Millis now_ms) {
    const std::vector<EntryData> data(payloads.begin(), payloads.end());
    return propose_data(data, now_ms);
}

Result<Index> Raft::propose_data(std::span<const EntryData> payloads, Millis now_ms) {
    if (role_ != Role::leader) return Error::not_leader;
    if (transferee_ != kNoNode) return Error::transfer_in_progress;
    if (payloads.empty()) return Error::invalid;
    clock_ms_ = std::max(clock_ms_, now_ms);
    // Log time never goes back, even when this leader's clock is behind the last one's.
    Millis time = std::max(log_.last_time(), clock_ms_);
    Index first = log_.last_index() + 1;
    std::vector<Entry> entries;
    entries.reserve(payloads.size());
    for (std::size_t k = 0; k < payloads.size(); ++k) {
        entries.push_back(Entry{term_, first + k, time, EntryType::normal, payloads[k]});
    }
    log_.append(entries);
    // Replication is deferred to ready(): proposals made between two Readies share
    // their append messages (batching).
    pending_bcast_ = true;
    return first;
}

const Progress* Raft::progress(NodeId peer) const {
    auto it = peers_.find(peer);
    return it == peers_.end() ? nullptr : &it->second;
}

bool Raft::has_ready() const {
    if (!msgs_.empty() || pending_bcast_ || !read_states_.empty()) return true;
    if (!log_.unstable_entries().empty() || log_.unstable_snapshot()) return true;
    if (hard_state_to_persist() != handed_hs_) return true;
    Index upto = planted(PlantedBug::apply_uncommitted) ? log_.last_index() : log_.committed();
    return upto > log_.applying();
}

bool Raft::may_send_before_persist(const Message& m) const {
    using T = MessageType;
    if (planted(PlantedBug::ack_before_persist) && m.type == T::append_resp) return true;
    return role_ == Role::leader &&
           (m.type == T::append || m.type == T::heartbeat || m.type == T::snapshot);
}

HardState Raft::hard_state_to_persist() const {
    HardState hs = hard_state();
    if (planted(PlantedBug::vote_before_persist) && vote_ != cfg_.id) {
        // Planted bug: a vote for someone else is not written until the term changes.
        hs.vote = hs.term == handed_hs_.term ? handed_hs_.vote : kNoNode;
    }
    return hs;
}

Ready Raft::ready() {
    if (pending_bcast_) {
        pending_bcast_ = false;
        if (role_ == Role::leader) bcast_append();
    }
    Ready rd;
    rd.entries = log_.unstable_entries();
    rd.snapshot = log_.unstable_snapshot();
    HardState hs = hard_state_to_persist();
    if (hs != handed_hs_) {
        rd.hard_state = hs;
        handed_hs_ = hs;
    }
    const HardState durable = storage_.hard_state();
    rd.must_sync = !rd.entries.empty() || (rd.hard_state && (rd.hard_state->term != durable.term ||
                                                             rd.hard_state->vote != durable.vote));
    for (auto& m : msgs_) {
        if (may_send_before_persist(m))
            rd.messages_before_persist.push_back(std::move(m));
        else
            rd.messages.push_back(std::move(m));
    }
    msgs_.clear();
    Index upto = planted(PlantedBug::apply_uncommitted) ? log_.last_index() : log_.committed();
    rd.committed_entries = log_.next_to_apply(upto, cfg_.max_bytes_per_msg);
    if (!rd.committed_entries.empty()) log_.applying_to(rd.committed_entries.back().index);
    rd.read_states = std::move(read_states_);
    read_states_.clear();

    Index applied = log_.applying();
    if (cfg_.snapshot_threshold > 0 && applied > snapshot_asked_at_ &&
        applied >= storage_.snapshot().meta.index + cfg_.snapshot_threshold) {
        rd.snapshot_wanted = applied;
        snapshot_asked_at_ = applied;
    }
    rd.role = role_;
    rd.leader = leader_;
    rd.term = term_;
    return rd;
}

std::vector<Entry> Raft::take_committed(Index limit) {
    const Index upto = std::min(log_.committed(), limit);
    if (upto <= log_.applying()) return {};
    auto entries = log_.next_to_apply(upto, cfg_.max_bytes_per_msg);
    if (!entries.empty()) log_.applied_to(entries.back().index);
    return entries;
}

void Raft::advance(const Ready& rd) {
    if (rd.snapshot) log_.stable_snapshot_to(rd.snapshot->meta.index);
    // The newest handed-out entry that is still in the log marks what is durable (by
    // Log Matching so is everything before it); entries replaced since ready() stay
    // unstable and go out again in the next Ready.
    for (auto it = rd.entries.rbegin(); it != rd.entries.rend(); ++it) {
        if (log_.match_term(it->index, it->term)) {
            log_.stable_to(it->index, it->term);
            break;
        }
    }
    if (!rd.committed_entries.empty()) {
        // Only what is committed is applied (unless that is the planted defect).
        DUEQ_INVARIANT(planted(PlantedBug::apply_uncommitted) ||
                           rd.committed_entries.back().index <= log_.committed(),
                       "applying " + std::to_string(rd.committed_entries.back().index) +
                           " beyond the commit index " + std::to_string(log_.committed()));
        log_.applied_to(rd.committed_entries.back().index);
    }
    // The leader counts itself only for what is on its own disk.
    if (role_ == Role::leader && maybe_commit()) on_leader_commit();
    // Configurations the log no longer holds are kept only as its starting one.
    const Index base = log_.first_index() - 1;
    while (confs_.size() > 1 && std::next(confs_.begin())->first <= base)
        confs_.erase(confs_.begin());
}

// ---- linearizable reads

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
    const bool alone = is_voter() && membership().voters.size() == 1;
    if (alone || (cfg_.lease_read && lease_valid())) {
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
    std::vector<std::uint64_t> acked;
    if (is_voter()) acked.push_back(round_);  // the leader answers its own rounds
    for (const auto& [id, pr] : peers_) {
        if (membership().is_voter(id)) acked.push_back(pr.acked_round);
    }
    std::uint64_t confirmed = quorum_value(std::move(acked), majority(membership().voters.size()));
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
    if (!is_voter()) return false;
    std::vector<std::uint64_t> sent_ticks{tick_count_};
    for (const auto& [id, pr] : peers_) {
        if (!membership().is_voter(id)) continue;
        std::uint64_t tick = 0;
        for (const auto& [round, t] : round_ticks_) {
            if (round == pr.acked_round) tick = t;
        }
        sent_ticks.push_back(tick);
    }
    std::uint64_t start = quorum_value(std::move(sent_ticks), majority(membership().voters.size()));
    if (start == 0) return false;
    auto span = static_cast<std::uint64_t>(cfg_.election_tick - cfg_.lease_margin_ticks);
    return tick_count_ < start + span;
}

}  // namespace dueq::raft
