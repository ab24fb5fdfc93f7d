#include "node/take_waiters.h"

namespace dueq::node {

void TakeWaiters::Waiter::answer_nothing() {
    if (!to) return;
    queue::Command command{std::move(take)};
    const queue::Result nothing;
    to->answer(shell::Outcome{queue::Code::ok, {}, &command, &nothing, 0, 0});
}

void TakeWaiters::park(Waiter w) {
    const auto id = next_id_++;
    by_deadline_.emplace(w.deadline, id);
    auto& f = fifo_[w.take.queue];
    f.ids.push_back(id);
    ++f.live;
    by_id_.emplace(id, std::move(w));
}

std::optional<std::int64_t> TakeWaiters::earliest_deadline() const {
    if (by_deadline_.empty()) return std::nullopt;
    return by_deadline_.begin()->first;
}

void TakeWaiters::forget(const std::string& queue) {
    auto it = fifo_.find(queue);
    if (it == fifo_.end()) return;
    auto& f = it->second;
    --f.live;
    if (f.live == 0) {
        fifo_.erase(it);
        return;
    }
    while (!f.ids.empty() && !by_id_.count(f.ids.front())) f.ids.pop_front();
    // Ids that left from the middle (their timeout ran out before earlier ones') stay
    // behind; rebuild once they outnumber the live ones, so memory follows what waits.
    if (f.ids.size() > 2 * f.live + 64) {
        std::deque<std::uint64_t> kept;
        for (auto x : f.ids)
            if (by_id_.count(x)) kept.push_back(x);
        f.ids.swap(kept);
    }
}

std::vector<TakeWaiters::Waiter> TakeWaiters::expire(std::int64_t now) {
    std::vector<Waiter> out;
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
        const auto id = by_deadline_.begin()->second;
        by_deadline_.erase(by_deadline_.begin());
        auto it = by_id_.find(id);
        out.push_back(std::move(it->second));
        by_id_.erase(it);
        forget(out.back().take.queue);
        if (out.back().to) out.back().to->unparked();
    }
    return out;
}

std::vector<std::string> TakeWaiters::queues() const {
    std::vector<std::string> out;
    out.reserve(fifo_.size());
    for (const auto& [name, f] : fifo_) out.push_back(name);
    return out;
}

std::vector<TakeWaiters::Waiter> TakeWaiters::pop(const std::string& queue,
                                                  std::uint64_t tasks) {
    std::vector<Waiter> out;
    std::uint64_t asked = 0;
    while (asked < tasks) {
        auto f = fifo_.find(queue);
        if (f == fifo_.end() || f->second.ids.empty()) break;
        const auto id = f->second.ids.front();
        f->second.ids.pop_front();
        auto it = by_id_.find(id);
        if (it == by_id_.end()) continue;
        by_deadline_.erase({it->second.deadline, id});
        asked += it->second.take.count;
        out.push_back(std::move(it->second));
        by_id_.erase(it);
        forget(queue);
        if (out.back().to) out.back().to->unparked();
    }
    return out;
}

}  // namespace dueq::node
