#include "node/write_path.h"

#include <algorithm>

namespace dueq::node {

using queue::Code;

namespace {
void answer_error(const ReplyTo& to, Code code, std::string message) {
    if (!to) return;
    shell::Outcome o{code, std::move(message), nullptr, nullptr, 0, 0};
    to->answer(o);
}
}  // namespace

WritePath::WritePath(const WritePathSettings& settings, shell::RaftShell& shell)
    : settings_(settings),
      shell_(shell),
      sessions_(settings.node_bits, settings.first_session, settings.session_grace_ms),
      waiters_(settings.max_waiting_takes) {}

std::int64_t WritePath::store_now(std::int64_t now) const {
    return std::max(std::int64_t(shell_.applied().time), now);
}

bool WritePath::resume_session(queue::SessionId current, queue::SessionId wanted,
                               std::int64_t now) {
    return sessions_.resume(current, wanted, now, shell_.store().holds_leases(wanted));
}

void WritePath::on_term_started(std::int64_t now) {
    sessions_.took_over(shell_.store().lease_holders(), now);
}

bool WritePath::submit(queue::Command cmd, std::int64_t wait_ms, ReplyTo to, std::int64_t now) {
    std::optional<std::int64_t> wait_until;
    if (auto* take = std::get_if<queue::Take>(&cmd); take && wait_ms > 0) {
        wait_until = now + wait_ms;
        // Nothing to hand out now: wait here instead of logging an empty take.
        if (shell_.is_leader() && !shell_.store().has_due(take->queue, store_now(now)))
            return wait_for_task(std::move(to), std::move(*take), *wait_until);
    }
    propose_until(std::move(cmd), std::move(to), wait_until, now);
    return false;
}

raft::Index WritePath::propose(queue::Command cmd, ReplyTo to, std::int64_t now) {
    return propose_until(std::move(cmd), std::move(to), std::nullopt, now);
}

namespace {
// For the write path's own commands: nobody waits for their answer.
struct Unanswered final : Replier {
    bool open() const override { return true; }
    void answer(const shell::Outcome&) override {}
};
}  // namespace

raft::Index WritePath::propose_until(queue::Command cmd, ReplyTo to,
                                     std::optional<std::int64_t> wait_until, std::int64_t now) {
    if (!to) to = std::make_shared<Unanswered>();
    to->path_ = this;
    to->wait_until_ = wait_until;
    to->advance_ = std::holds_alternative<queue::Advance>(cmd);
    const bool advance = to->advance_;
    const raft::Index index = shell_.propose(
        std::move(cmd), now, [to](shell::Outcome& o) { to->path_->on_outcome(o, to); });
    if (advance && index != 0) advance_index_ = index;
    return index;
}

void WritePath::on_outcome(shell::Outcome& o, const ReplyTo& to) {
    if (to->advance_) advance_index_ = 0;
    if (o.code == Code::ok) {
        if (auto* take = std::get_if<queue::Take>(o.command)) {
            const std::int64_t now = shell_.now();
            // Applied, but the task it was woken for went to someone else: wait again.
            const auto wait_until = to->wait_until_;
            if (o.result->ok() && o.result->tasks.empty() && wait_until && *wait_until > now) {
                if (to->open()) wait_for_task(to, std::move(*take), *wait_until);
                return;
            }
            if (!o.result->tasks.empty() && take->release_on_disconnect)
                sessions_.took_tasks(take->session, now);
        }
    }
    to->answer(o);
}

bool WritePath::wait_for_task(ReplyTo to, queue::Take take, std::int64_t deadline) {
    if (waiters_.full()) {
        answer_error(to, Code::unavailable, TakeWaiters::kFullMessage);
        return false;
    }
    waiters_.park({std::move(to), std::move(take), deadline});
    return true;
}

void WritePath::wake_waiters(const std::string& queue, std::int64_t now) {
    std::vector<TakeWaiters::Waiter> woken;
    if (shell_.is_leader() && shell_.reaches_quorum()) {
        woken = waiters_.wake(queue, shell_.applied().index, [&](std::uint64_t claimed) {
            return shell_.store().count_due(queue, store_now(now),
                                            claimed + settings_.max_take_count);
        });
    } else {
        // Waiters parked while this node led with a majority: each is proposed again and
        // so answered not_leader or no_quorum (not applied), to park on the new leader.
        woken = waiters_.pop(queue, ~std::uint64_t(0));
    }
    for (auto& w : woken) {
        if (!w.to || !w.to->open()) continue;
        const auto count = w.take.count;
        const raft::Index index =
            propose_until(std::move(w.take), std::move(w.to), w.deadline, now);
        if (index != 0 && shell_.is_leader()) waiters_.claim(queue, index, count);
    }
}

void WritePath::on_batch_applied(bool wrote, std::int64_t now) {
    if (!wrote && shell_.is_leader()) return;
    for (const auto& queue : waiters_.queues())
        wake_waiters(queue, now);
}

void WritePath::after_ready(std::int64_t now) {
    const bool leading = shell_.is_leader() && shell_.reaches_quorum();
    const bool lost = leading_ && !leading;
    leading_ = leading;
    if (!lost) return;
    for (const auto& queue : waiters_.queues())
        wake_waiters(queue, now);
}

void WritePath::on_timer(std::int64_t now) {
    events_seen_until_ = now;
    // Leases and delays that ran out change the state on every replica at once: the
    // leader logs an Advance, which applies at its log time everywhere. Every take
    // advances the store itself, so this only keeps reads and retention current; once
    // per kAdvanceEveryMs is plenty.
    if (shell_.is_leader() && advance_index_ == 0 && now - last_advance_ms_ >= kAdvanceEveryMs) {
        auto at = shell_.store().next_event_any(queue::Millis(shell_.applied().time));
        if (at && *at <= now) {
            last_advance_ms_ = now;
            propose(queue::Advance{}, nullptr, now);
        }
    }
    for (auto& w : waiters_.expire(now))
        w.answer_nothing();
    for (const auto& queue : waiters_.queues())
        wake_waiters(queue, now);
    for (queue::SessionId session : sessions_.expire(now))
        propose(queue::ReleaseSession{session}, nullptr, now);
}

std::optional<std::int64_t> WritePath::next_deadline() const {
    std::optional<std::int64_t> at;
    auto earliest = [&](std::int64_t t) { at = at ? std::min(*at, t) : t; };
    // Only the leader acts on the store's events (followers follow its log). Events the
    // timer already saw are not looked at again until an entry moves the store's time.
    if (shell_.is_leader()) {
        const queue::Store& store = shell_.store();
        const auto applied = queue::Millis(shell_.applied().time);
        const auto seen = std::max<queue::Millis>(applied, events_seen_until_);
        if (auto e = store.next_event_any(seen)) earliest(*e);
        if (advance_index_ == 0 && seen > applied) {
            auto pending = store.next_event_any(applied);
            if (pending && *pending <= seen) earliest(last_advance_ms_ + kAdvanceEveryMs);
        }
    }
    if (auto d = waiters_.earliest_deadline()) earliest(*d);
    if (auto d = sessions_.next_deadline()) earliest(*d);
    return at;
}

}  // namespace dueq::node
