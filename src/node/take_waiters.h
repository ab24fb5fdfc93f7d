// Blocking takes parked on the leader until a task comes due or their timeout runs out.
//
// Every operation is O(log n) in the number of parked takes: the earliest deadline is
// the front of an ordered set, expiring walks only what expired, and waking pops from the
// front of the queue's arrival order only as many takes as there are tasks to hand out.
// (A list walked on every event stalled the loop for 500 ms with 20,000 parked takes, and
// one put woke all of them into 20,000 log entries.)
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "node/replier.h"
#include "queue/command.h"

namespace dueq::node {

class TakeWaiters {
  public:
    struct Waiter {
        ReplyTo to;
        queue::Take take;
        std::int64_t deadline;  // then answered with no task

        // Its deadline passed, or nobody serves it any more: ok, with no task.
        void answer_nothing();
    };

    explicit TakeWaiters(std::size_t capacity) : capacity_(capacity) {}

    std::size_t size() const { return by_id_.size(); }
    bool full() const { return by_id_.size() >= capacity_; }
    // The answer (unavailable) to a blocking take that finds the waiters full.
    static constexpr const char* kFullMessage =
        "too many blocking takes are waiting on this node ([limits] max_waiting_takes); not "
        "applied, retry later";
    void park(Waiter w);
    std::optional<std::int64_t> earliest_deadline() const;
    // Removes and returns every waiter whose deadline is at or before `now`.
    std::vector<Waiter> expire(std::int64_t now);
    // The queues that have waiters.
    std::vector<std::string> queues() const;
    // Removes and returns the waiters of `queue` in arrival order, as long as the tasks
    // they asked for so far are fewer than `tasks`.
    std::vector<Waiter> pop(const std::string& queue, std::uint64_t tasks);

    // Leader: the waiters of `queue` to wake now. `count_due(limit)` says how many tasks
    // a take could hand out now (counted up to limit); the takes of waiters woken before
    // whose entries are not applied yet (claims above `applied`) count against them, so
    // a put that makes one task due wakes one take, however many Readies pass first.
    template <class CountDue>
    std::vector<Waiter> wake(const std::string& queue, std::uint64_t applied, CountDue count_due) {
        auto& claims = claims_[queue];
        claims.erase(claims.begin(), claims.upper_bound(applied));
        std::uint64_t claimed = 0;
        for (const auto& [index, count] : claims)
            claimed += count;
        if (claims.empty()) claims_.erase(queue);
        const std::uint64_t due = count_due(claimed);
        return due <= claimed ? std::vector<Waiter>{} : pop(queue, due - claimed);
    }
    // A woken take of `tasks` tasks was proposed as log entry `index`.
    void claim(const std::string& queue, std::uint64_t index, std::uint32_t tasks) {
        claims_[queue][index] = tasks;
    }

  private:
    struct Fifo {
        std::deque<std::uint64_t> ids;  // may hold ids that already left by_id_
        std::size_t live = 0;
    };
    void forget(const std::string& queue);  // after a waiter of `queue` left by_id_

    std::size_t capacity_;
    std::uint64_t next_id_ = 1;
    std::unordered_map<std::uint64_t, Waiter> by_id_;
    std::set<std::pair<std::int64_t, std::uint64_t>> by_deadline_;
    std::map<std::string, Fifo, std::less<>> fifo_;
    // Per queue: log index of a woken take's entry -> the tasks it asked for.
    std::map<std::string, std::map<std::uint64_t, std::uint32_t>> claims_;
};

}  // namespace dueq::node
