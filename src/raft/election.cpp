// Message dispatch, term rules, elections (§3.4, §3.6.1, §9.6) and leadership
// transfer (§3.10).
#include <algorithm>

#include "raft/raft.h"

namespace dueq::raft {

namespace {
// Vote requests with this context come from a leadership transfer: they may pass a
// follower's leader lease (§3.10: the old leader asked for this election).
constexpr std::uint64_t kTransferContext = 1;
}  // namespace

Status Raft::step(const Message& m) {
    if (m.to != cfg_.id || m.from == cfg_.id ||
        std::find(cfg_.voters.begin(), cfg_.voters.end(), m.from) == cfg_.voters.end()) {
        return Error::unknown_peer;
    }
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
    tally_->record(cfg_.id, true);
    if (tally_->result() == VoteResult::won) {  // a single-node cluster
        if (pre_vote) {
            campaign(false, transfer);
        } else {
            become_leader();
        }
        return;
    }
    for (NodeId p : cfg_.voters) {
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
    if (role_ != Role::leader) campaign(cfg_.pre_vote, false);
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
    if (role_ == Role::leader) return;
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

}  // namespace dueq::raft
