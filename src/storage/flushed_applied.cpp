#include "storage/flushed_applied.h"

#include <algorithm>
#include <string>

#include "storage/be64.h"

namespace dueq::storage {

FlushedApplied::FlushedApplied(std::uint64_t durable, std::string state_cf, std::string log_cf)
    : durable_(durable), state_cf_(std::move(state_cf)), log_cf_(std::move(log_cf)) {}

void FlushedApplied::written(rocksdb::SequenceNumber seq, std::uint64_t index) {
    std::lock_guard lock(mu_);
    unflushed_.emplace_back(seq, index);
    written_ = std::max(written_, index);
}

void FlushedApplied::trim_asked(const raft::SnapshotMeta& trim) {
    std::lock_guard lock(mu_);
    auto at =
        std::lower_bound(trims_.begin(), trims_.end(), trim.index,
                         [](const raft::SnapshotMeta& t, std::uint64_t i) { return t.index < i; });
    if (at != trims_.end() && at->index == trim.index) return;
    trims_.insert(at, trim);
    if (trims_.size() > kMaxTrims) trims_.pop_front();
}

std::optional<raft::SnapshotMeta> FlushedApplied::trim_due() {
    std::lock_guard lock(mu_);
    std::optional<raft::SnapshotMeta> due;
    for (const auto& t : trims_)
        if (t.index <= durable_ && t.index > trim_done_) due = t;
    if (due) trim_done_ = due->index;
    return due;
}

void FlushedApplied::installed(std::uint64_t index) {
    std::lock_guard lock(mu_);
    unflushed_.clear();
    trims_.clear();
    trim_done_ = 0;
    written_ = std::max(written_, index);
    durable_to(index);
}

void FlushedApplied::flushed(std::uint64_t index) {
    std::lock_guard lock(mu_);
    unflushed_.clear();
    durable_to(index);
}

std::uint64_t FlushedApplied::durable() const {
    std::lock_guard lock(mu_);
    return durable_;
}

std::uint64_t FlushedApplied::flush_floor() const {
    std::lock_guard lock(mu_);
    if (sealed_logs_.empty()) return 0;
    const std::uint64_t covered = sealed_logs_.front().second;
    std::uint64_t floor = 0;
    for (const auto& t : trims_)
        if (t.index <= covered) floor = t.index;
    return floor;
}

void FlushedApplied::OnMemTableSealed(const rocksdb::MemTableInfo& info) {
    if (info.cf_name != log_cf_) return;
    // One writer at a time (storage/writer.h), and it is inside a write now: every applied
    // state it wrote before is in memtables sealed with this one, or in files.
    std::lock_guard lock(mu_);
    sealed_logs_.emplace_back(info.first_seqno, std::max(written_, durable_));
}

void FlushedApplied::OnFlushCompleted(rocksdb::DB*, const rocksdb::FlushJobInfo& info) {
    std::lock_guard lock(mu_);
    if (info.cf_name == log_cf_) {
        while (!sealed_logs_.empty() && sealed_logs_.front().first <= info.largest_seqno)
            sealed_logs_.pop_front();
    }
    // The task records (`tasks`) and the applied index they make up (`meta`) are in two
    // column families; atomic flush puts both in files at the same cut, so the flush of
    // state_cf_ stands for both.
    if (info.cf_name != state_cf_) return;
    std::uint64_t index = durable_;
    while (!unflushed_.empty() && unflushed_.front().first <= info.largest_seqno) {
        index = std::max(index, unflushed_.front().second);
        unflushed_.pop_front();
    }
    durable_to(index);
}

void FlushedApplied::durable_to(std::uint64_t index) {
    durable_ = std::max(durable_, index);
    // Keep the largest trim point at or below durable_: flush_floor() may still need it.
    while (trims_.size() > 1 && trims_[1].index <= durable_)
        trims_.pop_front();
}

namespace {

class LogFlushFilter final : public rocksdb::CompactionFilter {
  public:
    explicit LogFlushFilter(std::uint64_t floor) : floor_(floor) {}
    const char* Name() const override { return "DueqLogFlushFilter"; }

    Decision FilterV2(int, const rocksdb::Slice& key, ValueType type, const rocksdb::Slice&,
                      std::string*, std::string*) const override {
        if (type != ValueType::kValue || key.size() != 8) return Decision::kKeep;
        return get_be64(key.ToStringView()) < floor_ ? Decision::kRemove : Decision::kKeep;
    }

  private:
    const std::uint64_t floor_;
};

class LogFlushFilterFactory final : public rocksdb::CompactionFilterFactory {
  public:
    explicit LogFlushFilterFactory(std::shared_ptr<const FlushedApplied> flushed)
        : flushed_(std::move(flushed)) {}
    const char* Name() const override { return "DueqLogFlushFilterFactory"; }

    // Not compactions: what they read was flushed before, and a compaction running beside
    // a flush must not leave out what only that flush makes safe to leave out.
    bool ShouldFilterTableFileCreation(rocksdb::TableFileCreationReason reason) const override {
        return reason == rocksdb::TableFileCreationReason::kFlush;
    }

    std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
        const rocksdb::CompactionFilter::Context&) override {
        return std::make_unique<LogFlushFilter>(flushed_->flush_floor());
    }

  private:
    std::shared_ptr<const FlushedApplied> flushed_;
};

}  // namespace

std::shared_ptr<rocksdb::CompactionFilterFactory> log_flush_filter(
    std::shared_ptr<const FlushedApplied> flushed) {
    return std::make_shared<LogFlushFilterFactory>(std::move(flushed));
}

}  // namespace dueq::storage
