// Raft's messages: dispatch, term rules, elections (§3.4, §3.6.1, §9.6), leadership
// transfer (§3.10), then log replication (§3.5), commitment (§3.6.2), snapshots (§5) and
// heartbeats.
#include <algorithm>

#include "raft/raft.h"

namespace dueq::raft {

namespace {
// Vote requests with this context come from a leadership transfer: they may pass a
// follower's leader lease (§3.10: the old leader asked for this election).
constexpr std::uint64_t kTransferContext = 1;
}  // namespace

Status Raft::step(const Message& m) {
    if (m.to != cfg_.id || m.from == cfg_.id || m.from == kNoNode) return Error::unknown_peer;
    if (m.type == MessageType::snapshot && !m.snapshot) return Error::invalid;

    if (m.term > term_) {
        if (is_vote_request(m.type) && m.context != kTransferContext && in_lease()) {
            // §4.2.3: we heard a leader within the minimum election timeout; a node
            // that asks for votes now is disruptive (e.g. just back from a partition).
            return Status::ok();
        }
        bool keep_term =
            m.type == MessageType::pre_vote || (m.type == MessageType::pre_vote_resp && !m.reject);
        if (!keep_term) {
            bool from_leader = m.type == MessageType::append || m.type == MessageType::heartbeat ||
                               m.type == MessageType::snapshot;
            become_follower(m.term, from_leader ? m.from : kNoNode);  // §3.3
        }
    } else if (m.term < term_) {
        respond_to_stale(m);
        return Status::ok();
    }

    switch (m.type) {
        case MessageType::pre_vote:
        case MessageType::vote:
            handle_vote_request(m);
            break;
        case MessageType::pre_vote_resp:
        case MessageType::vote_resp:
            handle_vote_response(m);
            break;
        case MessageType::append:
            handle_append(m);
            break;
        case MessageType::append_resp:
            handle_append_response(m);
            break;
        case MessageType::snapshot:
            handle_snapshot(m);
            break;
        case MessageType::heartbeat:
            handle_heartbeat(m);
            break;
        case MessageType::heartbeat_resp:
            handle_heartbeat_response(m);
            break;
        case MessageType::timeout_now:
            handle_timeout_now(m);
            break;
    }
    return Status::ok();
}

void Raft::respond_to_stale(const Message& m) {
    if ((cfg_.check_quorum || cfg_.pre_vote) &&
        (m.type == MessageType::append || m.type == MessageType::heartbeat)) {
        // A deposed leader that cannot reach the new one would otherwise never learn
        // of the new term (with PreVote, our term may not reach it any other way).
        send({.type = MessageType::append_resp, .to = m.from});
    } else if (m.type == MessageType::pre_vote) {
        // Tell the stale pre-candidate the term, so it can rejoin as a follower.
        send({.type = MessageType::pre_vote_resp, .to = m.from, .reject = true});
    }
}

bool Raft::in_lease() const {
    // With lease reads, a node that just (re)started may have heard a leader right
    // before it went down: it honours that leader's lease too, for one election timeout,
    // or a crash and quick restart would let it vote while the old leader still serves
    // lease reads. (Without lease reads nothing depends on it, so no delay.)
    bool booting = cfg_.lease_read && tick_count_ < static_cast<std::uint64_t>(cfg_.election_tick);
    bool heard_leader = leader_ != kNoNode || booting;
    return cfg_.check_quorum && heard_leader && election_elapsed_ < cfg_.election_tick;
}

void Raft::campaign(bool pre_vote, bool transfer) {
    Term vote_term;
    MessageType type;
    if (pre_vote) {
        become_pre_candidate();
        vote_term = term_ + 1;  // the term we would run in; our own term stays
        type = MessageType::pre_vote;
    } else {
        become_candidate();
        vote_term = term_;
        type = MessageType::vote;
    }
    if (is_voter()) tally_->record(cfg_.id, true);
    if (tally_->result() == VoteResult::won) {  // a single-node cluster
        if (pre_vote) {
            campaign(false, transfer);
        } else {
            become_leader();
        }
        return;
    }
    for (NodeId p : membership().voters) {
        if (p == cfg_.id) continue;
        send({.type = type,
              .to = p,
              .term = vote_term,
              .index = log_.last_index(),
              .log_term = log_.last_term(),
              .context = transfer ? kTransferContext : 0});
    }
}

void Raft::campaign_now() {
    if (role_ != Role::leader && may_campaign()) campaign(cfg_.pre_vote, false);
}

Status Raft::forget_leader() {
    if (cfg_.lease_read) return Error::invalid;
    if (role_ == Role::follower) leader_ = kNoNode;
    return Status::ok();
}

void Raft::handle_vote_request(const Message& m) {
    bool pre = m.type == MessageType::pre_vote;
    MessageType resp = pre ? MessageType::pre_vote_resp : MessageType::vote_resp;
    // §3.4: at most one vote per term (a repeated request from the same candidate is
    // granted again). A pre-vote for a later term promises nothing, so it may be
    // granted whatever we voted in this term.
    bool can_vote =
        vote_ == m.from || (vote_ == kNoNode && leader_ == kNoNode) || (pre && m.term > term_);
    // §3.6.1: only to a candidate whose log holds everything ours does.
    bool up_to_date =
        log_.is_up_to_date(m.index, m.log_term) || planted(PlantedBug::vote_for_stale_log);
    if (can_vote && up_to_date) {
        // Grant with the candidate's term: a pre-candidate counts only answers for the
        // term it is about to run in.
        send({.type = resp, .to = m.from, .term = m.term});
        if (!pre) {
            election_elapsed_ = 0;
            vote_ = m.from;  // goes to disk in the same Ready, before this reply leaves
        }
    } else {
        send({.type = resp, .to = m.from, .term = term_, .reject = true});
    }
}

void Raft::handle_vote_response(const Message& m) {
    bool pre = m.type == MessageType::pre_vote_resp;
    if ((pre && role_ != Role::pre_candidate) || (!pre && role_ != Role::candidate)) return;
    if (!membership().is_voter(m.from)) return;  // only voters' answers count
    tally_->record(m.from, !m.reject);
    switch (tally_->result()) {
        case VoteResult::won:
            if (pre) {
                campaign(false, false);
            } else {
                become_leader();
            }
            break;
        case VoteResult::lost:
            become_follower(term_, kNoNode);
            break;
        case VoteResult::pending:
            break;
    }
}

void Raft::handle_timeout_now(const Message& m) {
    if (role_ == Role::leader || !may_campaign()) return;
    (void)m;
    // §3.10: the leader chose us; skip the pre-vote (it would fail: everyone still
    // hears the leader) and run a real election that passes their leases.
    campaign(false, true);
}

Status Raft::transfer_leadership(NodeId peer) {
    if (role_ != Role::leader) return Error::not_leader;
    if (peer == cfg_.id) return Error::invalid;
    auto it = peers_.find(peer);
    if (it == peers_.end()) return Error::unknown_peer;
    if (!membership().is_voter(peer)) return Error::invalid;  // a learner cannot lead
    if (transferee_ == peer) return Status::ok();
    transferee_ = peer;
    transfer_elapsed_ = 0;
    election_elapsed_ = 0;  // the transfer gets a full election timeout (tick_leader)
    transfer_sent_ = false;
    if (it->second.match == log_.last_index()) {
        timeout_now_sent_ = transfer_sent_ = true;
        send({.type = MessageType::timeout_now, .to = peer});
    } else {
        send_appends(peer, false);
    }
    return Status::ok();
}

void Raft::abort_transfer() {
    transferee_ = kNoNode;
    transfer_elapsed_ = 0;
}

// ---- log replication, commitment, snapshots and heartbeats

Index Raft::self_match() const {
    return log_.stable_last_index();
}

bool Raft::maybe_commit() {
    std::size_t needed = 0;
    std::vector<std::uint64_t> matches = commit_matches(needed);
    Index candidate = quorum_value(std::move(matches), needed);
    if (candidate <= log_.committed()) return false;
    // §3.6.2 (Figure 3.7): a replica count proves nothing about an entry of an earlier
    // term; only an entry of the current term is committed by counting, and with it
    // everything before it.
    if (log_.term_or_zero(candidate) != term_ && !planted(PlantedBug::commit_prior_term)) {
        return false;
    }
    log_.commit_to(candidate);
    return true;
}

void Raft::on_leader_commit() {
    pending_bcast_ = true;  // followers learn the new commit index with the next append
    if (!reads_before_commit_.empty() && committed_in_current_term()) {
        auto waiting = std::move(reads_before_commit_);
        reads_before_commit_.clear();
        for (std::uint64_t ctx : waiting)
            start_read(ctx);
    }
    maybe_step_down_removed();
}

bool Raft::send_snapshot(NodeId peer, Progress& pr) {
    const Snapshot& snap = storage_.snapshot();
    if (snap.empty()) return false;  // nothing to send yet; retried on the next heartbeat
    Message m{.type = MessageType::snapshot, .to = peer};
    m.snapshot = snap;
    // The membership at the snapshot's index: the newest configuration at or before it.
    auto conf = confs_.upper_bound(snap.meta.index);
    m.snapshot->conf =
        encode_membership(conf == confs_.begin() ? conf->second : std::prev(conf)->second);
    send(std::move(m));
    pr.become_snapshot(snap.meta.index);
    return true;
}

bool Raft::send_append(NodeId peer, bool allow_empty) {
    Progress& pr = peers_.at(peer);
    if (pr.paused()) return false;
    Index prev = pr.next - 1;
    auto prev_term = log_.term(prev);
    Index last = log_.last_index();
    Result<std::vector<Entry>> entries = std::vector<Entry>{};
    if (pr.next <= last) {
        Index hi = std::min(last + 1, pr.next + cfg_.max_entries_per_msg);
        entries = log_.slice(pr.next, hi, cfg_.max_bytes_per_msg);
    }
    if (!prev_term || !entries) {
        // §5.3: the entries this follower needs are gone; send the snapshot instead.
        return send_snapshot(peer, pr);
    }
    std::vector<Entry> ents = std::move(entries).value();
    if (ents.empty() && !allow_empty) return false;
    std::uint64_t bytes = 0;
    for (const Entry& e : ents)
        bytes += entry_cost(e);
    Index sent_last = ents.empty() ? prev : ents.back().index;
    bool has_entries = !ents.empty();
    send({.type = MessageType::append,
          .to = peer,
          .index = prev,
          .log_term = prev_term.value(),
          .commit = log_.committed(),
          .context = pr.generation,
          .entries = std::move(ents)});
    pr.on_sent(sent_last, bytes, has_entries);
    return true;
}

void Raft::send_appends(NodeId peer, bool allow_empty) {
    // Pipelining: in replicate state keep sending until caught up or the window is full.
    if (!send_append(peer, allow_empty)) return;
    while (peers_.at(peer).state == ProgressState::replicate && send_append(peer, false)) {
    }
}

void Raft::bcast_append() {
    for (auto& [id, pr] : peers_)
        send_appends(id, true);
}

void Raft::handle_append(const Message& m) {
    if (role_ != Role::follower) become_follower(term_, m.from);  // §3.4: a leader exists
    leader_ = m.from;
    election_elapsed_ = 0;
    Message resp{.type = MessageType::append_resp, .to = m.from, .context = m.context};
    if (m.index < log_.committed()) {
        // Everything up to our commit index matches any leader's log: say so, so that
        // a leader probing below it moves on at once.
        resp.index = log_.committed();
        send(std::move(resp));
        return;
    }
    if (auto last = log_.maybe_append(m.index, m.log_term, m.commit, m.entries)) {
        log_changed(m.index + 1, m.entries);
        resp.index = *last;  // sent only after these entries are on disk (Ready)
        send(std::move(resp));
        return;
    }
    // §5.3 fast backtracking: point the leader at the last entry that can still match:
    // at or before its prev index and with a term no newer than its prev term.
    resp.reject = true;
    resp.index = m.index;
    resp.hint_index = log_.find_conflict_by_term(std::min(m.index, log_.last_index()), m.log_term);
    resp.log_term = log_.term_or_zero(resp.hint_index);
    send(std::move(resp));
}

void Raft::handle_append_response(const Message& m) {
    if (role_ != Role::leader) return;
    auto it = peers_.find(m.from);
    if (it == peers_.end()) return;
    Progress& pr = it->second;
    // Nobody can hold an entry of ours that we do not have: such an ack would let the
    // commit index run ahead of what is replicated.
    if (m.index > log_.last_index()) return;
    pr.recent_active = true;

    if (m.reject) {
        bool stale =
            m.context != pr.generation ||
            (pr.state == ProgressState::replicate ? m.index <= pr.match : m.index != pr.next - 1);
        if (stale || pr.state == ProgressState::snapshot) return;
        // If the hint entry is also ours, the follower's log matches ours up to it
        // (Log Matching), so it is as good as an ack of the hint.
        bool hint_matches = m.log_term > 0 && log_.match_term(m.hint_index, m.log_term);
        if (pr.state == ProgressState::replicate && hint_matches && m.hint_index > pr.match) {
            // A gap, not a conflict: with pipelining the missing appends are usually
            // still on their way (reordered). Take the ack and keep the pipeline; if the
            // gap does not close (a later reject shows no progress), probe from it.
            on_append_ack(m.from, pr, m.hint_index, false);
            return;
        }
        // Skip a whole term of mismatching entries at a time: the follower's hint says
        // where its log may match; our own log says which of our entries can match it.
        Index probe = m.hint_index;
        if (m.log_term > 0) probe = log_.find_conflict_by_term(m.hint_index, m.log_term);
        pr.become_probe();
        pr.next = std::max(std::min(m.index, probe + 1), pr.match + 1);
        send_appends(m.from, false);
        return;
    }

    on_append_ack(m.from, pr, m.index, true);
}

void Raft::on_append_ack(NodeId peer, Progress& pr, Index index, bool confirms_next) {
    bool was_paused = pr.paused();
    // A success proves where the logs match: a probe (or a snapshot) is over.
    bool ends_probe =
        confirms_next && ((pr.state == ProgressState::probe && index >= pr.match) ||
                          (pr.state == ProgressState::snapshot && index >= pr.pending_snapshot));
    bool advanced = pr.on_ack(index);
    if (ends_probe) pr.become_replicate();
    if (advanced && maybe_commit()) {
        on_leader_commit();  // followers hear of it in the next Ready's appends
    } else if (was_paused || advanced) {
        send_appends(peer, false);
    }
    if (peer == transferee_ && pr.match == log_.last_index() && !transfer_sent_) {
        timeout_now_sent_ = transfer_sent_ = true;
        send({.type = MessageType::timeout_now, .to = peer});  // §3.10: caught up
    }
}

void Raft::handle_snapshot(const Message& m) {
    if (role_ != Role::follower) become_follower(term_, m.from);
    leader_ = m.from;
    election_elapsed_ = 0;
    const SnapshotMeta& meta = m.snapshot->meta;
    Message resp{.type = MessageType::append_resp, .to = m.from};
    if (meta.index <= log_.committed()) {
        resp.index = log_.committed();  // stale: we are past it
    } else if (log_.match_term(meta.index, meta.term)) {
        // We already hold its last entry, so the log before it matches: keep the log
        // (and what follows) and just learn that it is committed.
        log_.commit_to(meta.index);
        resp.index = meta.index;
    } else {
        // §5.3: our entry at the snapshot's index is missing or conflicts: drop the
        // whole log; the snapshot replaces it (the shell installs it before replying).
        log_.restore(*m.snapshot);
        restore_membership(*m.snapshot);
        resp.index = meta.index;
    }
    send(std::move(resp));
}

void Raft::handle_heartbeat(const Message& m) {
    if (role_ != Role::follower) become_follower(term_, m.from);
    leader_ = m.from;
    election_elapsed_ = 0;
    // The leader sends min(commit, our match), so every entry up to it is in our log, unless
    // this node lost the tail of its log after acking it (fsync = "never" and a machine
    // crash): then it commits what it holds, and the next append mends the rest.
    log_.commit_to(std::min(m.commit, log_.last_index()));
    send({.type = MessageType::heartbeat_resp, .to = m.from, .context = m.context});
}

void Raft::handle_heartbeat_response(const Message& m) {
    if (role_ != Role::leader) return;
    auto it = peers_.find(m.from);
    if (it == peers_.end()) return;
    Progress& pr = it->second;
    pr.recent_active = true;
    pr.acked_round = std::max(pr.acked_round, m.context);
    if (pr.match < log_.last_index()) {
        // The follower is alive but behind: a full window may hold lost messages.
        if (pr.state == ProgressState::replicate && pr.inflights.full()) pr.inflights.free_first();
        send_appends(m.from, false);
    }
    release_confirmed_reads();
}

}  // namespace dueq::raft
