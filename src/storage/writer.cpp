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

void Writer::append(LogRecord record) {
    {
        std::lock_guard lock(mu_);
        pending_appends_.push_back(std::move(record));
    }
    cv_.notify_one();
}

void Writer::apply(AppliedState state) {
    {
        std::lock_guard lock(mu_);
        pending_applied_.push_back(std::move(state));
    }
    cv_.notify_one();
}

std::uint64_t Writer::batches() const {
    std::lock_guard lock(mu_);
    return batches_;
}

void Writer::run() {
    std::vector<LogRecord> appends;
    std::vector<AppliedState> applied;
    for (;;) {
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] {
                return stop_ || !pending_appends_.empty() || !pending_applied_.empty();
            });
            if (pending_appends_.empty() && pending_applied_.empty() && stop_) return;
            appends.swap(pending_appends_);
            applied.swap(pending_applied_);
            ++batches_;
        }
        auto status = db_.write(appends, applied);
        if (!status.ok) {
            on_error_(status.message);
            return;
        }
        if (!appends.empty()) on_written_(appends.back().index);
        appends.clear();
        applied.clear();
    }
}

}  // namespace dueq::storage
