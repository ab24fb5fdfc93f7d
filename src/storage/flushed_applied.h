// What of the applied state RocksDB has put in files, and what of the log a flush may
// therefore leave out.
//
// The applied state (task records, the applied index, the store-wide record) is written
// without RocksDB's WAL: the Raft log already holds every entry it was made from. It is
// durable once RocksDB has flushed it to files, and a restart replays the log from there.
// FlushedApplied, a RocksDB listener, learns from each flush up to which applied index
// that is (durable()); the log is trimmed only up to it.
//
// A flush also writes the log's memtable, and with it every entry since the last flush,
// although by the time the flush is done most of them are covered by the applied state
// it carries (atomic_flush cuts every column family at one point, and the applied state
// goes to files with the log or not at all). So a flush of the log leaves out the
// entries below the newest trim asked for at or below the applied index of that same
// cut (flush_floor(), applied by the log's compaction filter): the log entry at that
// trim point stays, as the new start of the log. Until a later write records the trim,
// a restart after a crash may find the log jumping over those entries; Database::load
// then starts the log at the entry after the gap, which the applied state covers.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <rocksdb/compaction_filter.h>
#include <rocksdb/listener.h>

#include "raft/types.h"

namespace dueq::storage {

class FlushedApplied final : public rocksdb::EventListener {
  public:
    // `state_cf` holds the applied state (its index record too), `log_cf` the log.
    FlushedApplied(std::uint64_t durable, std::string state_cf, std::string log_cf);
    const char* Name() const override { return "DueqFlushedApplied"; }

    // An applied state up to `index` was written; the write's last sequence number is `seq`.
    void written(rocksdb::SequenceNumber seq, std::uint64_t index);
    // The log may be trimmed up to `trim` once the applied state covers it. A trim is
    // superseded by one further on: past kMaxTrims waiting, the lowest is dropped (which
    // only trims later).
    void trim_asked(const raft::SnapshotMeta& trim);
    // The newest trim asked for at or below durable() that trim_due has not returned yet.
    std::optional<raft::SnapshotMeta> trim_due();
    // A snapshot replaced the log and the applied state, through the WAL: it is durable
    // as it is, and no trim asked for before it applies any more.
    void installed(std::uint64_t index);
    // Everything written is in files (a clean stop's flush).
    void flushed(std::uint64_t index);
    std::uint64_t durable() const;
    // Log entries below this index are left out of the log's flush now running.
    std::uint64_t flush_floor() const;

    void OnMemTableSealed(const rocksdb::MemTableInfo& info) override;
    void OnFlushCompleted(rocksdb::DB*, const rocksdb::FlushJobInfo& info) override;

  private:
    void durable_to(std::uint64_t index);  // with mu_ held

    mutable std::mutex mu_;
    std::deque<std::pair<rocksdb::SequenceNumber, std::uint64_t>> unflushed_;
    std::uint64_t durable_;
    std::uint64_t written_ = 0;  // the newest applied index written
    // Trims asked for, by index; those at or below durable_ but the largest are gone.
    static constexpr std::size_t kMaxTrims = 64;
    std::deque<raft::SnapshotMeta> trims_;
    std::uint64_t trim_done_ = 0;  // the index of the last trim trim_due returned
    // Log memtables sealed and not yet flushed, oldest first: the first sequence number in
    // each, and the applied index written when it was sealed (the flush that takes it
    // takes the applied state up to there with it).
    std::deque<std::pair<rocksdb::SequenceNumber, std::uint64_t>> sealed_logs_;
    const std::string state_cf_, log_cf_;
};

// The log column family's compaction filter factory: in flushes only, it leaves out the
// entries below FlushedApplied::flush_floor().
std::shared_ptr<rocksdb::CompactionFilterFactory> log_flush_filter(
    std::shared_ptr<const FlushedApplied> flushed);

}  // namespace dueq::storage
