#include "raft/raft_log.h"

#include "common/invariant.h"

#include <algorithm>

namespace dueq::raft {

RaftLog::RaftLog(const LogStorage& storage)
    : storage_(storage),
      offset_(storage.last_index() + 1),
      committed_(std::max(storage.hard_state().commit, storage.snapshot().meta.index)),
      applying_(storage.snapshot().meta.index),
      applied_(storage.snapshot().meta.index) {
    // A commit index beyond the durable log can only come from a damaged store; never
    // claim more than we hold.
    committed_ = std::min(committed_, storage.last_index());
}

Index RaftLog::first_index() const {
    if (unstable_snapshot_) return unstable_snapshot_->meta.index + 1;
    return storage_.first_index();
}

Index RaftLog::last_index() const {
    if (!unstable_.empty()) return offset_ + unstable_.size() - 1;
    if (unstable_snapshot_) return unstable_snapshot_->meta.index;
    return std::min(storage_.last_index(), offset_ - 1);
}

Index RaftLog::stable_last_index() const {
    if (unstable_snapshot_) return 0;
    return std::min(storage_.last_index(), offset_ - 1);
}

Millis RaftLog::last_time() const {
    if (!unstable_.empty()) return unstable_.back().time;
    if (unstable_snapshot_) return unstable_snapshot_->meta.time;
    Index last = last_index();
    if (last >= storage_.first_index()) {
        auto r = storage_.entries(last, last + 1, 0);
        if (r && !r.value().empty()) return r.value().front().time;
    }
    // The log is empty: the compacted entry's time lives in the snapshot, or in the
    // storage's stand-in for it.
    return storage_.snapshot().meta.index == last ? storage_.snapshot().meta.time : 0;
}

Result<Term> RaftLog::term(Index i) const {
    if (!unstable_.empty() && i >= offset_ && i < offset_ + unstable_.size()) {
        return unstable_[i - offset_].term;
    }
    if (unstable_snapshot_) {
        if (i == unstable_snapshot_->meta.index) return unstable_snapshot_->meta.term;
        if (i < unstable_snapshot_->meta.index) return Error::compacted;
        return Error::unavailable;
    }
    if (i >= offset_) return Error::unavailable;
    return storage_.term(i);
}

Term RaftLog::term_or_zero(Index i) const {
    auto r = term(i);
    return r ? r.value() : 0;
}

bool RaftLog::match_term(Index i, Term t) const {
    auto r = term(i);
    return r && r.value() == t;
}

bool RaftLog::is_up_to_date(Index last_index_in, Term last_term_in) const {
    Term my_term = last_term();
    return last_term_in > my_term || (last_term_in == my_term && last_index_in >= last_index());
}

Index RaftLog::find_conflict(const std::vector<Entry>& entries) const {
    for (const Entry& e : entries) {
        auto t = term(e.index);
        if (t.has_value() ? t.value() != e.term : t.error() == Error::unavailable) return e.index;
        // compacted: committed, so it matches
    }
    return 0;
}

std::optional<Index> RaftLog::maybe_append(Index prev_index, Term prev_term, Index commit,
                                           const std::vector<Entry>& entries) {
    if (!match_term(prev_index, prev_term)) return std::nullopt;
    Index last_new = prev_index + entries.size();
    Index conflict = find_conflict(entries);
    if (conflict != 0) {
        if (conflict <= committed_) return std::nullopt;  // would rewrite history; refuse
        append(std::vector<Entry>(
            entries.begin() + static_cast<std::ptrdiff_t>(conflict - prev_index - 1),
            entries.end()));
    }
    commit_to(std::min(commit, last_new));
    return last_new;
}

Index RaftLog::append(const std::vector<Entry>& entries) {
    if (entries.empty()) return last_index();
    Index first = entries.front().index;
    if (first == offset_ + unstable_.size()) {
        unstable_.insert(unstable_.end(), entries.begin(), entries.end());
    } else if (first <= offset_) {
        // Replaces durable entries from `first` on: they become stale until persisted.
        unstable_ = entries;
        offset_ = first;
    } else {
        unstable_.resize(first - offset_);
        unstable_.insert(unstable_.end(), entries.begin(), entries.end());
    }
    return last_index();
}

Index RaftLog::find_conflict_by_term(Index index, Term t) const {
    index = std::min(index, last_index());
    for (Index i = index; i > 0; --i) {
        auto r = term(i);
        if (!r) return i;  // cannot look further back: those entries are committed
        if (r.value() <= t) return i;
    }
    return 0;
}

Result<std::vector<Entry>> RaftLog::slice(Index lo, Index hi, std::uint64_t max_bytes) const {
    if (lo < first_index()) return Error::compacted;
    if (hi > last_index() + 1 || lo > hi) return Error::unavailable;
    std::vector<Entry> out;
    if (lo == hi) return out;
    std::uint64_t bytes = 0;
    Index split = unstable_snapshot_ ? lo : std::min(hi, offset_);
    if (lo < split) {
        auto r = storage_.entries(lo, split, max_bytes);
        if (!r) return r.error();
        out = std::move(r).value();
        for (const Entry& e : out)
            bytes += entry_cost(e);
        if (out.size() < split - lo) return out;  // hit max_bytes
    }
    // Grown one push at a time, the array's last reallocations were large enough for
    // glibc to merge its freed small chunks first, on every append sent.
    const Index from = std::max(lo, offset_);
    if (from < hi) out.reserve(out.size() + std::min<Index>(hi - from, 1024));
    for (Index i = from; i < hi; ++i) {
        const Entry& e = unstable_[i - offset_];
        bytes += entry_cost(e);
        if (!out.empty() && bytes > max_bytes) break;
        out.push_back(e);
    }
    return out;
}

void RaftLog::commit_to(Index i) {
    if (i <= committed_) return;
    // A commit index is only ever learned for entries this log holds; one beyond them means
    // the log was truncated or lost under Raft (etcd's raft panics here too).
    DUEQ_INVARIANT(i <= last_index(), "commit " + std::to_string(i) + " beyond the last index " +
                                          std::to_string(last_index()) +
                                          ": was the log truncated or lost?");
    committed_ = i;
}

std::vector<Entry> RaftLog::next_to_apply(Index upto, std::uint64_t max_bytes) const {
    upto = std::min(upto, last_index());
    Index lo = std::max(applying_ + 1, first_index());
    if (upto < lo) return {};
    auto r = slice(lo, upto + 1, max_bytes);
    return r ? std::move(r).value() : std::vector<Entry>{};
}

void RaftLog::applied_to(Index i) {
    DUEQ_INVARIANT(i <= last_index(), "applied " + std::to_string(i) + " beyond the last index " +
                                          std::to_string(last_index()));
    applied_ = std::max(applied_, i);
    applying_ = std::max(applying_, applied_);
}

void RaftLog::restore(const Snapshot& snapshot) {
    committed_ = snapshot.meta.index;
    unstable_snapshot_ = snapshot;
    unstable_.clear();
    offset_ = snapshot.meta.index + 1;
}

void RaftLog::stable_to(Index index, Term t) {
    if (unstable_.empty() || index < offset_) return;
    Index last = offset_ + unstable_.size() - 1;
    if (index > last || unstable_[index - offset_].term != t) return;
    unstable_.erase(unstable_.begin(),
                    unstable_.begin() + static_cast<std::ptrdiff_t>(index + 1 - offset_));
    offset_ = index + 1;
}

void RaftLog::stable_snapshot_to(Index index) {
    if (unstable_snapshot_ && unstable_snapshot_->meta.index == index) {
        unstable_snapshot_.reset();
        applying_ = std::max(applying_, index);
        applied_ = std::max(applied_, index);
    }
}

}  // namespace dueq::raft
