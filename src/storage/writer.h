// The storage thread: it owns all writes to the Database and does group commit (or, with
// inline writes, lets the submitter write when it is idle; one writer at a time).
//
// The event loop hands it jobs: log writes (the persistence half of a Raft Ready),
// applied states, snapshot installs and checkpoint requests. The thread takes everything
// that is waiting at that moment and carries it out in order: consecutive log writes and
// applied states go out as one batch with at most one fsync. Each job gets a ticket from
// submit(); `on_written(ticket)` (called on the thread that wrote: the callee posts to
// its own loop) says every job up to that ticket is done. A failed write is fatal
// (`on_error`): a node must not go on after its log could not be made durable.
//
// With inline writes on, a write that the submitter waits for, submitted while the thread
// is idle and nothing else waits, is carried out by the submitting thread itself, at once.
// On this kind of machine waking a sleeping thread costs tens of microseconds each way,
// more than writing one small batch to the OS: one request in flight paid two such
// wake-ups per write. The completion still
// goes through `on_written`, so the caller sees the same order and the same posting.
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
    std::atomic<std::uint64_t> inline_batches{0};  // of those, written by the submitter
};

class Writer {
  public:
    Writer(Database& db, std::function<void(std::uint64_t ticket)> on_written,
           std::function<void(const std::string&)> on_error);
    ~Writer();  // carries out what is queued, then stops

    // Queues a job (or, with inline writes, may carry it out before returning); returns
    // its ticket (1, 2, 3, ... in submission order).
    std::uint64_t submit(Job job);
    // Whether a write its submitter waits for (a synced log write, an overlay write)
    // submitted to an idle writer is carried out on the submitting thread (see above).
    // Writes behind (applied states, commit-index moves), snapshot installs and checkpoints
    // never are, nor any write while the latest batch took longer than kInlineLimit: a disk
    // that has turned slow stalls the storage thread, not the submitter's event loop.
    // `limit` is for tests.
    static constexpr std::chrono::milliseconds kInlineLimit{5};
    void set_inline_writes(bool on, std::chrono::steady_clock::duration limit = kInlineLimit);
    // Number of write batches so far; for metrics and tests.
    std::uint64_t batches() const { return metrics_.batches.load(std::memory_order_relaxed); }
    // Of those, the batches carried out on the submitting thread.
    std::uint64_t inline_batches() const {
        return metrics_.inline_batches.load(std::memory_order_relaxed);
    }
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
    // Carries `job` out on this thread if the writer is idle; false: it was not.
    bool try_inline(Job& job, std::unique_lock<std::mutex>& lock, std::uint64_t ticket);

    mutable std::mutex mu_;  // guards pending_, next_ticket_, stop_, busy_
    std::condition_variable cv_;
    std::vector<Job> pending_;
    std::vector<Job> inline_jobs_;   // the submitter's one job (kept: no allocation per write)
    std::uint64_t next_ticket_ = 0;  // ticket of the last job submitted
    bool stop_ = false;
    bool busy_ = false;  // a thread is carrying out jobs (the storage thread or a submitter)
    bool inline_writes_ = false;
    std::chrono::steady_clock::duration inline_limit_ = kInlineLimit;
    // Whoever is busy_ only (read under mu_ once busy_ has dropped under it):
    std::chrono::steady_clock::duration last_took_{};  // the latest batch's write
    // One batch's writes, kept so that a write (on the event loop, when inline) does not
    // allocate them each time.
    std::vector<LogWrite> batch_logs_;
    std::vector<AppliedState> batch_applied_;
    std::vector<OverlayWrite> batch_overlay_;
    WriteMetrics metrics_;
    std::atomic<std::uint32_t> slow_sync_ms_{0};
    std::chrono::steady_clock::time_point slow_logged_{};  // whoever is busy_ only
    std::uint64_t slow_unlogged_ = 0;                      // slow syncs not logged since
    std::thread thread_;
};

}  // namespace dueq::storage
