// The Raft core: a pure, deterministic state machine (docs/internals/raft.md).
//
// Inputs:  tick(now_ms), step(message), propose(payloads, now_ms), read_index(ctx),
//          transfer_leadership(peer).
// Outputs: a Ready batch (ready.h), whose contract is "persist before you send";
//          advance(ready) once the shell has carried it out.
// It reads no clock (time comes in as arguments), does no I/O, starts no thread and
// draws randomness only from Config::seed, so the same inputs give the same outputs.
//
// Ownership and threads: the Raft object keeps a reference to the LogStorage, which
// must outlive it; the shell writes that storage only while carrying out a Ready.
// Not thread-safe: one owner thread calls every method.
//
// Rules implemented here, by section of Ongaro's thesis ("Consensus: Bridging Theory
// and Practice", 2014):
//  §3.3  terms: a higher term seen anywhere turns the node into a follower of it.
//  §3.4  randomized election timeouts; one vote per term, persisted before it is sent.
//  §3.5  AppendEntries consistency check; conflicting suffixes are replaced.
//  §3.6.1 a vote goes only to a candidate whose log is at least as up-to-date.
//  §3.6.2 a leader commits by counting replicas only entries of its own term (Fig. 3.7);
//        a no-op at the start of each term commits the earlier ones.
//  §3.10 leadership transfer: catch the target up, then TimeoutNow.
//  §4.2.3 / §6.2 CheckQuorum: a leader that has not heard from a majority within an
//        election timeout steps down; a follower that hears a leader ignores votes.
//  §5    snapshots: installed from the leader, sent to followers behind the log.
//  §4.1  membership: single-server changes, one at a time, each in force once in a log;
//  §4.2.1 learners catch up without voting before they are promoted;
//  §6.4  ReadIndex, held until the leader has committed an entry of its term;
//  §6.4.1 optional leader lease for reads (needs CheckQuorum).
//  §9.6  PreVote.
//  Log time: each leader stamps entries with max(previous entry's time, its clock).
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "raft/config.h"
#include "raft/membership.h"
#include "raft/message.h"
#include "raft/progress.h"
#include "raft/quorum.h"
#include "raft/raft_log.h"
#include "raft/random.h"
#include "raft/ready.h"
#include "raft/status.h"
#include "raft/storage.h"

namespace dueq::raft {

class Raft {
  public:
    // Starts from what `storage` holds (hard state, snapshot, log) as a follower.
    // cfg must be valid() (checked by the caller; an invalid config is a programming
    // error and the constructor clamps nothing).
    Raft(Config cfg, const LogStorage& storage);

    // Advances logical time by one tick. now_ms is this node's clock, used only to
    // stamp log time on entries this node appends as leader.
    void tick(Millis now_ms);

    // Feeds a message from a peer. Messages addressed to another node, or claiming to
    // come from this one, are refused (unknown_peer) without any effect. Messages from
    // nodes outside the membership are processed (§4.1: a node learns of a change when its
    // log does, so a new leader may not be in a lagging follower's membership yet); only
    // voters' answers count.
    Status step(const Message& m);

    // Appends one entry per payload (a batch shares one round of replication). Returns
    // the index of the first. Errors: not_leader, transfer_in_progress, invalid (empty).
    Result<Index> propose(std::span<const std::string> payloads, Millis now_ms);
    Result<Index> propose(std::string payload, Millis now_ms);

    // Proposes the membership `next` (§4.1): it may differ from the current one by at
    // most one voter, and any learners. Errors: not_leader, transfer_in_progress,
    // change_pending (the last change is not committed, or no entry of this term is),
    // not_caught_up (a learner promoted while more than promote_lag entries behind),
    // invalid (malformed, several voters changed, nothing changed, or a new node made a
    // voter without being a learner first). A leader that removes itself leads until the
    // change commits, then steps down.
    Result<Index> propose_membership(Membership next, Millis now_ms);

    // Requests a linearizable read (§6.4). The answer comes as a ReadState with the same
    // context in a later Ready. Errors: not_leader. A read pending when the node loses
    // leadership is dropped (the caller times out and retries).
    Status read_index(std::uint64_t context);

    // §3.10: hands leadership to `peer`. While it runs (at most an election timeout),
    // proposals are refused with transfer_in_progress.
    Status transfer_leadership(NodeId peer);

    // Starts an election now, as if the election timeout had fired (pre-vote first when
    // configured). Does nothing on a leader.
    void campaign_now();
    // Follower only: forgets the current leader, so that a (pre-)vote can be granted
    // before the next election timeout (the shell knows the leader is gone). Refused
    // (invalid) with lease reads on: it would void the old leader's lease promise.
    Status forget_leader();

    bool has_ready() const;
    Ready ready();
    void advance(const Ready& rd);
    // Committed entries up to `limit` that no Ready has handed out, for a shell that
    // applies them while the write of a Ready is still in flight (ready.h, step 3a). They
    // count as applied once returned.
    std::vector<Entry> take_committed(Index limit);

    // --- observers (for the shell, tests and the simulator's invariant checks) ---
    NodeId id() const { return cfg_.id; }
    Term term() const { return term_; }
    NodeId vote() const { return vote_; }
    Role role() const { return role_; }
    NodeId leader() const { return leader_; }
    const RaftLog& log() const { return log_; }
    const Config& config() const { return cfg_; }
    // The membership in force: the latest in the log, committed or not (§4.1).
    const Membership& membership() const { return confs_.rbegin()->second; }
    // The index of the entry it came from (the start's membership counts as the snapshot's).
    Index membership_index() const { return confs_.rbegin()->first; }
    bool is_voter() const { return membership().is_voter(cfg_.id); }
    // May start an election: a voter, or a voter that a change not committed yet removes
    // (it may hold the only copy of that change; raft_membership.cpp says why it must run).
    bool may_campaign() const;
    // Indexes of the configuration entries in the log that are not committed yet.
    std::vector<Index> pending_changes() const;
    // The newest membership at or before the commit index (the one before a change in
    // flight): nodes still talk to its members until the change commits.
    const Membership& committed_membership() const;
    // The index of the entry it came from.
    Index committed_membership_index() const;
    // Leader: removed members it still sends the log to, until they know (raft_membership.cpp).
    std::vector<NodeId> leaving() const;
    const Progress* progress(NodeId peer) const;
    NodeId transfer_target() const { return transferee_; }
    HardState hard_state() const { return {term_, vote_, log_.committed()}; }
    // True when a lease read would be served without a heartbeat round right now.
    bool lease_valid() const;

  private:
    Result<Index> propose_data(std::span<const EntryData> payloads, Millis now_ms);
    // Roles (raft.cpp)
    void become_follower(Term term, NodeId leader);
    void become_pre_candidate();
    void become_candidate();
    void become_leader();
    void reset(Term term);
    void reset_election_timeout();
    void send(Message m);
    bool planted(PlantedBug b) const;
    HardState hard_state_to_persist() const;
    // Ready::messages_before_persist: see ready.h for why these may leave early.
    bool may_send_before_persist(const Message& m) const;

    // Ticks (raft.cpp)
    void tick_election();
    void tick_leader();

    // Elections (raft_messages.cpp)
    bool in_lease() const;
    void campaign(bool pre_vote, bool transfer);
    void handle_vote_request(const Message& m);
    void handle_vote_response(const Message& m);
    void handle_timeout_now(const Message& m);
    void respond_to_stale(const Message& m);
    void abort_transfer();

    // Replication (raft_messages.cpp)
    bool send_append(NodeId peer, bool allow_empty);
    void send_appends(NodeId peer, bool allow_empty);
    bool send_snapshot(NodeId peer, Progress& pr);
    void bcast_append();
    void handle_append(const Message& m);
    void handle_append_response(const Message& m);
    void on_append_ack(NodeId peer, Progress& pr, Index index, bool confirms_next);
    void handle_snapshot(const Message& m);
    void handle_heartbeat(const Message& m);
    void handle_heartbeat_response(const Message& m);
    bool maybe_commit();
    Index self_match() const;
    void on_leader_commit();

    // Membership (raft_membership.cpp)
    void start_membership();
    // The log changed at and after `from` to hold `entries` (a suffix may be gone).
    void log_changed(Index from, const std::vector<Entry>& entries);
    void restore_membership(const Snapshot& snap);
    // Leader: one Progress per member but this node, after the membership changed.
    void track_members();
    // The match indexes that count toward a commit, and how many make a majority.
    std::vector<std::uint64_t> commit_matches(std::size_t& needed) const;
    bool quorum_active() const;
    // The leader left the voters and the change is committed: it steps down.
    void maybe_step_down_removed();
    Status check_change(const Membership& next) const;
    // Leader, each heartbeat interval: forgets removed members once they know.
    void see_off_leaving();

    // Reads (raft.cpp)
    void bcast_heartbeat();
    void start_read(std::uint64_t context);
    void release_confirmed_reads();
    bool committed_in_current_term() const;

    Config cfg_;
    const LogStorage& storage_;
    RaftLog log_;
    Random rand_;

    Term term_ = 0;
    NodeId vote_ = kNoNode;
    Role role_ = Role::follower;
    NodeId leader_ = kNoNode;

    int election_elapsed_ = 0;   // ticks since the last election timeout reset
    int heartbeat_elapsed_ = 0;  // leader: ticks since the last heartbeat round
    int randomized_timeout_ = 0;
    std::uint64_t tick_count_ = 0;  // ticks since start: the leader's lease clock
    Millis clock_ms_ = 0;           // the latest clock the shell reported

    std::optional<VoteTally> tally_;
    std::map<NodeId, Progress> peers_;  // leader only: one per other voter

    NodeId transferee_ = kNoNode;
    int transfer_elapsed_ = 0;
    bool transfer_sent_ = false;     // TimeoutNow already sent for the current transfer
    bool timeout_now_sent_ = false;  // this term: the lease can no longer be trusted

    // ReadIndex (§6.4): reads waiting for the term's first commit, then for a round.
    struct PendingRead {
        std::uint64_t context;
        Index index;
        std::uint64_t round;
    };
    std::vector<std::uint64_t> reads_before_commit_;
    std::deque<PendingRead> reads_;
    std::uint64_t round_ = 0;  // heartbeat rounds sent, ever
    std::deque<std::pair<std::uint64_t, std::uint64_t>> round_ticks_;  // (round, tick sent)

    // Configuration entries of the log (and the membership the log starts from, at the
    // snapshot's index), by index; the last one is in force.
    std::map<Index, Membership> confs_;
    // Voters that a change in this term removed (only the planted defect counts them).
    std::vector<NodeId> removed_;
    // Leader: members a change removed, still sent the log until they hold the change and
    // know it committed (see_off_leaving); never counted.
    struct Leaving {
        Index index = 0;  // the configuration entry that removed it
        int rounds = 0;   // heartbeat intervals it has held it since it committed
        int ticks = 0;    // heartbeat intervals since it committed
    };
    std::map<NodeId, Leaving> leaving_;

    std::vector<Message> msgs_;
    std::vector<ReadState> read_states_;
    bool pending_bcast_ = false;  // proposals appended since the last ready()
    HardState handed_hs_;         // the hard state the last Ready asked to persist
    Index snapshot_asked_at_ = 0;
};

}  // namespace dueq::raft
