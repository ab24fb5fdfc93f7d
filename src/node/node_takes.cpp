// The node's timer: blocking takes (parked, woken, timed out), the Advance the leader
// logs when leases and delays run out, and the end of sessions' grace periods.
#include <algorithm>

#include "node/node.h"

namespace dueq::node {

using queue::Code;

void Node::wait_for_task(Reply reply, queue::Take take, std::int64_t deadline) {
    if (waiters_.full()) {
        answer_error(reply, Code::unavailable,
                     "too many blocking takes are waiting on this node ([limits] "
                     "max_waiting_takes); not applied, retry later");
        return;
    }
    waiters_.park({std::move(reply), std::move(take), deadline});
    arm_timer();
}

void Node::wake_waiters(const std::string& queue) {
    std::vector<TakeWaiters::Waiter> woken;
    if (is_leader()) {
        woken = waiters_.wake(queue, applied_index(), [&](std::uint64_t claimed) {
            return shell_->store().count_due(queue, store_now(),
                                             claimed + config_.limits.max_take_count);
        });
    } else {
        // A follower holds no waiters but the leader's it was: they learn where it went.
        woken = waiters_.pop(queue, ~std::uint64_t(0));
    }
    for (auto& w : woken) {
        auto c = w.reply.conn.lock();
        if (!c || !c->open()) continue;
        const auto count = w.take.count;
        const raft::Index index = propose(std::move(w.take), std::move(w.reply));
        if (index != 0 && is_leader()) waiters_.claim(queue, index, count);
    }
}

void Node::on_timer() {
    timer_at_ = 0;
    if (stopped_) return;
    const std::int64_t now = now_ms();
    events_seen_until_ = now;
    // Leases and delays that ran out change the state on every replica at once: the
    // leader logs an Advance, which applies at its log time everywhere. Every take
    // advances the store itself, so this only keeps reads and retention current; once
    // per kAdvanceEveryMs is plenty.
    if (is_leader() && advance_index_ == 0 && now - last_advance_ms_ >= kAdvanceEveryMs) {
        auto at = shell_->store().next_event_any(queue::Millis(shell_->applied().time));
        if (at && std::int64_t(*at) <= now) {
            last_advance_ms_ = now;
            propose(queue::Advance{}, Reply{});
        }
    }
    for (auto& w : waiters_.expire(now))
        answer(w.reply, queue::Command{w.take}, queue::Result{});
    for (const auto& queue : waiters_.queues())
        wake_waiters(queue);
    for (queue::SessionId session : sessions_->expire(now))
        propose(queue::ReleaseSession{session}, Reply{});
    arm_timer();
}

void Node::arm_timer() {
    if (stopped_) return;
    std::optional<std::int64_t> at;
    auto earliest = [&](std::int64_t t) { at = at ? std::min(*at, t) : t; };
    // Only the leader acts on the store's events (followers follow its log). Events the
    // timer already saw are not looked at again until an entry moves the store's time.
    if (is_leader()) {
        const queue::Store& store = shell_->store();
        const auto applied = queue::Millis(shell_->applied().time);
        const auto seen = std::max<queue::Millis>(applied, queue::Millis(events_seen_until_));
        if (auto e = store.next_event_any(seen)) earliest(std::int64_t(*e));
        if (advance_index_ == 0 && seen > applied) {
            auto pending = store.next_event_any(applied);
            if (pending && *pending <= seen) earliest(last_advance_ms_ + kAdvanceEveryMs);
        }
    }
    if (auto d = waiters_.earliest_deadline()) earliest(*d);
    if (sessions_)
        if (auto d = sessions_->next_deadline()) earliest(*d);
    if (!at) return;
    const std::int64_t now = now_ms();
    if (timer_at_ != 0 && timer_at_ <= *at) return;
    timer_at_ = *at;
    // A task due in 300 years would overflow the timer's nanoseconds; waking once an hour
    // to look again costs nothing.
    const std::int64_t delay = std::clamp<std::int64_t>(*at - now, 0, 3'600'000);
    timer_.expires_after(std::chrono::milliseconds(delay));
    timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) on_timer();
    });
}

}  // namespace dueq::node
