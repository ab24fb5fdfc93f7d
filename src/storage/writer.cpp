#include "storage/writer.h"

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
    std::uint64_t ticket;
    {
        std::lock_guard lock(mu_);
        pending_.push_back(std::move(job));
        ticket = ++next_ticket_;
    }
    cv_.notify_one();
    return ticket;
}

std::uint64_t Writer::batches() const {
    std::lock_guard lock(mu_);
    return batches_;
}

void Writer::run() {
    std::vector<Job> jobs;
    std::uint64_t last_ticket = 0;
    for (;;) {
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
            if (pending_.empty() && stop_) return;
            jobs.swap(pending_);
            last_ticket = next_ticket_;
        }
        if (!carry_out(jobs)) return;
        jobs.clear();
        on_written_(last_ticket);
    }
}

bool Writer::carry_out(std::vector<Job>& jobs) {
    std::vector<LogWrite> logs;
    std::vector<AppliedState> applied;
    std::vector<OverlayWrite> overlay;
    auto flush = [&] {
        if (logs.empty() && applied.empty() && overlay.empty()) return true;
        auto st = db_.write(logs, applied, overlay);
        logs.clear();
        applied.clear();
        overlay.clear();
        {
            std::lock_guard lock(mu_);
            ++batches_;
        }
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
