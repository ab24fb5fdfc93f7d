#include <algorithm>

#include "raft/storage.h"

namespace dueq::raft {

Result<Term> MemoryStorage::term(Index i) const {
    Index offset = entries_[0].index;
    if (i < offset) return Error::compacted;
    if (i > last_index()) return Error::unavailable;
    return entries_[i - offset].term;
}

Result<std::vector<Entry>> MemoryStorage::entries(Index lo, Index hi,
                                                  std::uint64_t max_bytes) const {
    if (lo < first_index()) return Error::compacted;
    if (hi > last_index() + 1 || lo > hi) return Error::unavailable;
    std::vector<Entry> out;
    out.reserve(std::min<Index>(hi - lo, 1024));  // as RaftLog::slice does
    std::uint64_t bytes = 0;
    Index offset = entries_[0].index;
    for (Index i = lo; i < hi; ++i) {
        const Entry& e = entries_[i - offset];
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
    entries_.resize(first - entries_[0].index);
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
    return Status::ok();
}

Status MemoryStorage::create_snapshot(Index index, std::string data) {
    Index offset = entries_[0].index;
    if (index < snapshot_.meta.index || index < offset) return Error::compacted;
    if (index > last_index()) return Error::unavailable;
    const Entry& e = entries_[index - offset];
    snapshot_ = Snapshot{{e.index, e.term, e.time}, std::move(data)};
    return Status::ok();
}

Status MemoryStorage::compact(Index index) {
    Index offset = entries_[0].index;
    if (index <= offset) return Status::ok();  // already compacted
    if (index > snapshot_.meta.index) return Error::unavailable;
    entries_.erase(entries_.begin(),
                   entries_.begin() + static_cast<std::ptrdiff_t>(index - offset));
    entries_[0].data = {};
    return Status::ok();
}

}  // namespace dueq::raft
