// The core's view of the log: the durable part (LogStorage, read-only here) plus the
// part not yet handed to the shell for persisting ("unstable": new entries and a
// snapshot received from the leader).
//
// Unstable entries start at `offset`. Durable entries at or after `offset` are stale
// (about to be overwritten by the unstable ones) and are never read.
#pragma once

#include <optional>
#include <vector>

#include "raft/status.h"
#include "raft/storage.h"
#include "raft/types.h"

namespace dueq::raft {

class RaftLog {
  public:
    // Starts from what the storage holds (after a restart: snapshot, log, hard state).
    explicit RaftLog(const LogStorage& storage);

    Index first_index() const;
    Index last_index() const;
    Term last_term() const { return term_or_zero(last_index()); }
    // Log time of the last entry (or of the snapshot when the log is empty).
    Millis last_time() const;
    Result<Term> term(Index i) const;
    Term term_or_zero(Index i) const;
    bool match_term(Index i, Term t) const;

    // §3.6.1: is a log ending at (last_term, last_index) at least as up-to-date as ours?
    bool is_up_to_date(Index last_index, Term last_term) const;

    // §3.5 receiver rule: if our entry at prev_index has prev_term, drop any conflicting
    // suffix, append what is new and raise commit to min(commit, last new index).
    // Returns the last index now matching the leader, or nullopt when prev does not
    // match. Never truncates committed entries (returns nullopt instead).
    std::optional<Index> maybe_append(Index prev_index, Term prev_term, Index commit,
                                      const std::vector<Entry>& entries);
    // Appends entries after (or over a suffix of) the log; returns the new last index.
    Index append(const std::vector<Entry>& entries);

    // Largest i <= index whose term is <= term (or the last index we cannot look below).
    // The follower uses it to build a reject hint, the leader to use one (§5.3).
    Index find_conflict_by_term(Index index, Term term) const;

    // Entries [lo, hi), at most max_bytes (at least one entry).
    Result<std::vector<Entry>> slice(Index lo, Index hi, std::uint64_t max_bytes) const;

    Index committed() const { return committed_; }
    void commit_to(Index i);

    // Entries handed out to apply and not yet acknowledged by advance().
    Index applying() const { return applying_; }
    Index applied() const { return applied_; }
    // Committed entries not handed out yet, up to `upto` (normally committed()).
    std::vector<Entry> next_to_apply(Index upto, std::uint64_t max_bytes) const;
    void applying_to(Index i) { applying_ = std::max(applying_, i); }
    void applied_to(Index i);

    // Replaces the log with a snapshot from the leader (§5.3: the whole log is dropped,
    // since its entry at the snapshot's index is missing or has another term).
    void restore(const Snapshot& snapshot);

    const std::vector<Entry>& unstable_entries() const { return unstable_; }
    const std::optional<Snapshot>& unstable_snapshot() const { return unstable_snapshot_; }
    // The shell persisted entries up to (index, term): they leave the unstable part,
    // unless a newer append replaced them meanwhile (term differs).
    void stable_to(Index index, Term term);
    void stable_snapshot_to(Index index);
    // Last index the shell has persisted (as far as the core knows).
    Index stable_last_index() const;

  private:
    Index find_conflict(const std::vector<Entry>& entries) const;

    const LogStorage& storage_;
    std::optional<Snapshot> unstable_snapshot_;
    std::vector<Entry> unstable_;
    Index offset_;
    Index committed_;
    Index applying_;
    Index applied_;
};

}  // namespace dueq::raft
