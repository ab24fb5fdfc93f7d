#include "storage/writer.h"

#include <pthread.h>

#include <spdlog/spdlog.h>

namespace dueq::storage {

Writer::Writer(Database& db, std::function<void(std::uint64_t)> on_written,
               std::function<void(const std::string&)> on_error)
    : db_(db),
      on_written_(std::move(on_written)),
      on_error_(std::move(on_error)),
      thread_([this] { run(); }) {}

Writer::~Writer() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
}

std::uint64_t Writer::submit(Job job) {
    std::unique_lock lock(mu_);
    const std::uint64_t ticket = ++next_ticket_;
    if (try_inline(job, lock, ticket)) return ticket;
    pending_.push_back(std::move(job));
    lock.unlock();
    cv_.notify_one();
    return ticket;
}

bool Writer::try_inline(Job& job, std::unique_lock<std::mutex>& lock, std::uint64_t ticket) {
    // Only a write its submitter waits for. One written behind (an applied state, a
    // commit-index move) gains nothing from going out at once, and would hold the event
    // loop before it answers what it has just applied.
    const auto* log = std::get_if<LogWrite>(&job);
    const bool awaited = (log && log->sync) || std::holds_alternative<OverlayWrite>(job);
    if (!inline_writes_ || !awaited || busy_ || stop_ || !pending_.empty() ||
        last_took_ > inline_limit_)
        return false;
    busy_ = true;
    lock.unlock();
    inline_jobs_.clear();
    inline_jobs_.push_back(std::move(job));
    const bool ok = carry_out(inline_jobs_);
    inline_jobs_.clear();
    metrics_.inline_batches.fetch_add(1, std::memory_order_relaxed);
    // Before busy_ drops: a write the storage thread takes up next is noticed after this.
    if (ok) on_written_(ticket);
    lock.lock();
    busy_ = false;
    const bool waiting = !pending_.empty();
    lock.unlock();
    if (waiting) cv_.notify_one();
    return true;
}

void Writer::set_inline_writes(bool on, std::chrono::steady_clock::duration limit) {
    std::lock_guard lock(mu_);
    inline_writes_ = on;
    inline_limit_ = limit;
}

void Writer::run() {
    // So that `top -H` and perf tell it from the event loop and RocksDB's threads.
    pthread_setname_np(pthread_self(), "dueq-storage");
    std::vector<Job> jobs;
    std::uint64_t last_ticket = 0;
    for (;;) {
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return !busy_ && (stop_ || !pending_.empty()); });
            if (pending_.empty() && stop_) return;
            jobs.swap(pending_);
            last_ticket = next_ticket_;
            busy_ = true;
        }
        if (!carry_out(jobs)) return;
        jobs.clear();
        on_written_(last_ticket);
        std::lock_guard lock(mu_);
        busy_ = false;
    }
}

void Writer::record(const Database::Written& w, std::chrono::steady_clock::duration took) {
    last_took_ = took;
    metrics_.bytes.fetch_add(w.bytes, std::memory_order_relaxed);
    if (!w.synced) return;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
    metrics_.synced_write.record_us(std::uint64_t(us));
    const std::uint32_t slow_ms = slow_sync_ms_.load(std::memory_order_relaxed);
    if (slow_ms == 0 || us < std::int64_t(slow_ms) * 1000) return;
    // A sick disk makes every fsync slow: one line a second says so without flooding.
    const auto now = std::chrono::steady_clock::now();
    if (now - slow_logged_ < std::chrono::seconds(1)) {
        ++slow_unlogged_;
        return;
    }
    spdlog::warn("slow fsync: a write of {} bytes took {} ms (threshold {} ms){}", w.bytes,
                 us / 1000, slow_ms,
                 slow_unlogged_
                     ? fmt::format("; {} more slow since the last such line", slow_unlogged_)
                     : std::string());
    slow_logged_ = now;
    slow_unlogged_ = 0;
}

bool Writer::carry_out(std::vector<Job>& jobs) {
    auto& logs = batch_logs_;
    auto& applied = batch_applied_;
    auto& overlay = batch_overlay_;
    auto flush = [&] {
        if (logs.empty() && applied.empty() && overlay.empty()) return true;
        const auto began = std::chrono::steady_clock::now();
        Database::Written written;
        auto st = db_.write(logs, applied, overlay, &written);
        if (st.ok) record(written, std::chrono::steady_clock::now() - began);
        logs.clear();
        applied.clear();
        overlay.clear();
        metrics_.batches.fetch_add(1, std::memory_order_relaxed);
        if (!st.ok) on_error_(st.message);
        return st.ok;
    };
    for (auto& job : jobs) {
        if (auto* w = std::get_if<LogWrite>(&job)) {
            logs.push_back(std::move(*w));
        } else if (auto* a = std::get_if<AppliedState>(&job)) {
            applied.push_back(std::move(*a));
        } else if (auto* o = std::get_if<OverlayWrite>(&job)) {
            overlay.push_back(std::move(*o));
        } else if (auto* s = std::get_if<SnapshotInstall>(&job)) {
            if (!flush()) return false;
            auto st = db_.install(*s);
            if (!st.ok) {
                on_error_(st.message);
                return false;
            }
        } else if (auto* c = std::get_if<CheckpointRequest>(&job)) {
            if (!flush()) return false;
            c->done(db_.checkpoint(c->meta));
        }
    }
    return flush();
}

}  // namespace dueq::storage
