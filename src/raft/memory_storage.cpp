#include <algorithm>

#include "raft/storage.h"

namespace dueq::raft {

Result<Term> MemoryStorage::term(Index i) const {
    if (i < head().index) return Error::compacted;
    if (i > last_index()) return Error::unavailable;
    return at(i).term;
}

Result<std::vector<Entry>> MemoryStorage::entries(Index lo, Index hi,
                                                  std::uint64_t max_bytes) const {
    if (lo < first_index()) return Error::compacted;
    if (hi > last_index() + 1 || lo > hi) return Error::unavailable;
    std::vector<Entry> out;
    out.reserve(std::min<Index>(hi - lo, 1024));  // as RaftLog::slice does
    std::uint64_t bytes = 0;
    for (Index i = lo; i < hi; ++i) {
        const Entry& e = at(i);
        bytes += entry_cost(e);
        if (!out.empty() && bytes > max_bytes) break;
        out.push_back(e);
    }
    return out;
}

Status MemoryStorage::append(const std::vector<Entry>& entries) {
    if (entries.empty()) return Status::ok();
    Index first = entries.front().index;
    if (first < first_index() || first > last_index() + 1) return Error::invalid;
    entries_.resize(base_ + (first - head().index));
    entries_.insert(entries_.end(), entries.begin(), entries.end());
    return Status::ok();
}

Status MemoryStorage::set_hard_state(const HardState& hs) {
    hard_state_ = hs;
    return Status::ok();
}

Status MemoryStorage::apply_snapshot(const Snapshot& snap) {
    if (snap.meta.index < snapshot_.meta.index) return Error::compacted;
    snapshot_ = snap;
    entries_.assign(1, Entry{snap.meta.term, snap.meta.index, snap.meta.time, EntryType::noop, {}});
    base_ = 0;
    return Status::ok();
}

Status MemoryStorage::create_snapshot(Index index, std::string data) {
    if (index < snapshot_.meta.index || index < head().index) return Error::compacted;
    if (index > last_index()) return Error::unavailable;
    const Entry& e = at(index);
    snapshot_ = Snapshot{{e.index, e.term, e.time}, std::move(data)};
    return Status::ok();
}

Status MemoryStorage::compact(Index index) {
    const Index offset = head().index;
    if (index <= offset) return Status::ok();  // already compacted
    if (index > snapshot_.meta.index) return Error::unavailable;
    const std::size_t new_base = base_ + (index - offset);
    for (std::size_t k = base_; k <= new_base; ++k)
        entries_[k].data = {};
    base_ = new_base;
    if (base_ >= entries_.size() / 2) {
        entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(base_));
        base_ = 0;
    }
    return Status::ok();
}

}  // namespace dueq::raft
