// Log replication (§3.5), commitment (§3.6.2), snapshots (§5) and heartbeats.
#include <algorithm>

#include "raft/raft.h"

namespace dueq::raft {

Index Raft::self_match() const {
    return log_.stable_last_index();
}

bool Raft::maybe_commit() {
    std::vector<std::uint64_t> matches{self_match()};
    for (const auto& [id, pr] : peers_)
        matches.push_back(pr.match);
    Index candidate = quorum_value(std::move(matches));
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
}

bool Raft::send_snapshot(NodeId peer, Progress& pr) {
    const Snapshot& snap = storage_.snapshot();
    if (snap.empty()) return false;  // nothing to send yet; retried on the next heartbeat
    Message m{.type = MessageType::snapshot, .to = peer};
    m.snapshot = snap;
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
        resp.index = meta.index;
    }
    send(std::move(resp));
}

void Raft::handle_heartbeat(const Message& m) {
    if (role_ != Role::follower) become_follower(term_, m.from);
    leader_ = m.from;
    election_elapsed_ = 0;
    // The leader sends min(commit, our match), so every entry up to it is in our log.
    log_.commit_to(m.commit);
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
