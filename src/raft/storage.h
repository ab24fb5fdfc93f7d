// Durable log, hard state and snapshot of one node, behind a small interface.
//
// Ownership: the shell owns the storage and writes it (append, set_hard_state,
// apply_snapshot, create_snapshot, compact) while carrying out a Ready. The core only
// reads it, through the const methods, and only ever sees what is durable: what
// the shell has written here must survive a crash (an fsync before the call returns,
// for a disk implementation). Not thread-safe: the core and the shell call it from the
// one thread that owns the node.
//
// Layout: the snapshot covers [1, snapshot().meta.index]; the log holds
// [first_index(), last_index()] with first_index() <= snapshot index + 1 (the log may
// keep entries the snapshot already covers, so that a slightly lagging follower needs
// no snapshot). The term of first_index() - 1 is always known. An empty log has
// last_index() == first_index() - 1.
#pragma once

#include <cstdint>
#include <vector>

#include "raft/status.h"
#include "raft/types.h"

namespace dueq::raft {

class LogStorage {
  public:
    virtual ~LogStorage() = default;

    // --- read side (the core) ---
    virtual HardState hard_state() const = 0;
    virtual Index first_index() const = 0;
    virtual Index last_index() const = 0;
    // Term of entry i, for i in [first_index()-1, last_index()] (first_index()-1 is the
    // snapshot's last entry). compacted below, unavailable above.
    virtual Result<Term> term(Index i) const = 0;
    // Entries [lo, hi), at most max_bytes by entry_cost() but always at least one.
    virtual Result<std::vector<Entry>> entries(Index lo, Index hi,
                                               std::uint64_t max_bytes) const = 0;
    virtual const Snapshot& snapshot() const = 0;

    // --- write side (the shell, while carrying out a Ready) ---
    // Appends entries, first dropping every stored entry at or after entries[0].index
    // (a follower overwriting a conflicting suffix, §3.5). entries[0].index must be in
    // [first_index(), last_index() + 1].
    virtual Status append(const std::vector<Entry>& entries) = 0;
    virtual Status set_hard_state(const HardState& hs) = 0;
    // Replaces everything with a snapshot received from the leader (the whole log goes:
    // the core only installs a snapshot whose last entry its log does not hold, §5.3).
    virtual Status apply_snapshot(const Snapshot& snap) = 0;
    // Records a snapshot of the local state machine at `index` (an entry this storage
    // holds, already applied), taking term and time from that entry. Does not compact.
    virtual Status create_snapshot(Index index, std::string data) = 0;
    // Drops entries up to and including `index` (<= the snapshot's index).
    virtual Status compact(Index index) = 0;
};

// The in-memory twin, for tests and the simulator: "durable" means "written here".
class MemoryStorage final : public LogStorage {
  public:
    MemoryStorage() = default;

    HardState hard_state() const override { return hard_state_; }
    Index first_index() const override { return head().index + 1; }
    Index last_index() const override { return head().index + (entries_.size() - base_) - 1; }
    Result<Term> term(Index i) const override;
    Result<std::vector<Entry>> entries(Index lo, Index hi, std::uint64_t max_bytes) const override;
    const Snapshot& snapshot() const override { return snapshot_; }

    Status append(const std::vector<Entry>& entries) override;
    Status set_hard_state(const HardState& hs) override;
    Status apply_snapshot(const Snapshot& snap) override;
    Status create_snapshot(Index index, std::string data) override;
    Status compact(Index index) override;

    // Test helper: the stored entry at i (must exist).
    const Entry& at(Index i) const { return entries_[base_ + (i - head().index)]; }

  private:
    const Entry& head() const { return entries_[base_]; }

    HardState hard_state_;
    Snapshot snapshot_;
    // entries_[base_] stands for the last compacted entry (index, term, time; no data);
    // entries_[base_ + k].index == entries_[base_].index + k. What lies before base_ is
    // compacted, its payloads dropped: the vector's front is erased only once it is half
    // of it, since erasing moves every entry after it, and a leader compacts often.
    std::vector<Entry> entries_{Entry{}};
    std::size_t base_ = 0;
};

}  // namespace dueq::raft
