// The storage thread: it owns all writes to the Database and does group commit.
//
// The event loop hands it log records and applied states; the thread takes everything
// that is waiting at that moment, writes it as one batch with one fsync, and reports
// back through `on_written` (called on the storage thread: the callee posts to its own
// loop). A failed write is fatal (`on_error`): a node must not go on after its log
// could not be made durable.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "storage/database.h"

namespace dueq::storage {

class Writer {
  public:
    // `on_written(last_index)`: every record up to last_index is durable (per the sync
    // policy). `on_error(message)`: a write failed; nothing more will be written.
    Writer(Database& db, std::function<void(std::uint64_t)> on_written,
           std::function<void(const std::string&)> on_error);
    ~Writer();  // writes what is queued, then stops

    void append(LogRecord record);
    void apply(AppliedState state);
    // Number of batches (and so fsyncs) written so far; for metrics and tests.
    std::uint64_t batches() const;

  private:
    void run();

    Database& db_;
    std::function<void(std::uint64_t)> on_written_;
    std::function<void(const std::string&)> on_error_;
    mutable std::mutex mu_;  // guards pending_appends_, pending_applied_, stop_, batches_
    std::condition_variable cv_;
    std::vector<LogRecord> pending_appends_;
    std::vector<AppliedState> pending_applied_;
    bool stop_ = false;
    std::uint64_t batches_ = 0;
    std::thread thread_;
};

}  // namespace dueq::storage
