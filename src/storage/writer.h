// The storage thread: it owns all writes to the Database and does group commit.
//
// The event loop hands it jobs: log writes (the persistence half of a Raft Ready),
// applied states, snapshot installs and checkpoint requests. The thread takes everything
// that is waiting at that moment and carries it out in order: consecutive log writes and
// applied states go out as one batch with at most one fsync. Each job gets a ticket from
// submit(); `on_written(ticket)` (called on the storage thread: the callee posts to its
// own loop) says every job up to that ticket is done. A failed write is fatal
// (`on_error`): a node must not go on after its log could not be made durable.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

#include "common/histogram.h"
#include "storage/database.h"

namespace dueq::storage {

// Takes a checkpoint once everything queued before it is written; `done` runs on the
// storage thread.
struct CheckpointRequest {
    raft::SnapshotMeta meta;
    std::function<void(std::shared_ptr<const Checkpoint>)> done;
};

using Job = std::variant<LogWrite, AppliedState, SnapshotInstall, CheckpointRequest, OverlayWrite>;

// What the storage thread has written; read from any thread (relaxed atomics).
struct WriteMetrics {
    Histogram synced_write;  // batches written with an fsync: the whole write, fsync included
    std::atomic<std::uint64_t> bytes{0};    // batch bytes handed to RocksDB
    std::atomic<std::uint64_t> batches{0};  // batches handed to RocksDB, synced or not
};

class Writer {
  public:
    Writer(Database& db, std::function<void(std::uint64_t ticket)> on_written,
           std::function<void(const std::string&)> on_error);
    ~Writer();  // carries out what is queued, then stops

    // Queues a job; returns its ticket (1, 2, 3, ... in submission order).
    std::uint64_t submit(Job job);
    // Number of write batches so far; for metrics and tests.
    std::uint64_t batches() const { return metrics_.batches.load(std::memory_order_relaxed); }
    const WriteMetrics& metrics() const { return metrics_; }
    // A synced write slower than this is logged (at most once a second); 0: never.
    void set_slow_sync_ms(std::uint32_t ms) { slow_sync_ms_ = ms; }

  private:
    void run();
    bool carry_out(std::vector<Job>& jobs);
    void record(const Database::Written& w, std::chrono::steady_clock::duration took);

    Database& db_;
    std::function<void(std::uint64_t)> on_written_;
    std::function<void(const std::string&)> on_error_;
    mutable std::mutex mu_;  // guards pending_, next_ticket_, stop_
    std::condition_variable cv_;
    std::vector<Job> pending_;
    std::uint64_t next_ticket_ = 0;  // ticket of the last job submitted
    bool stop_ = false;
    WriteMetrics metrics_;
    std::atomic<std::uint32_t> slow_sync_ms_{0};
    std::chrono::steady_clock::time_point slow_logged_{};  // storage thread only
    std::uint64_t slow_unlogged_ = 0;                      // slow syncs not logged since
    std::thread thread_;
};

}  // namespace dueq::storage
