// A naive reference model of the task store: one std::map of tasks per queue, every
// decision made by scanning all of them. Written to be obviously right rather than fast;
// the randomized test checks the real store against it step by step.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "queue/store.h"

namespace dueq::queue::model {

enum class St { ready, delayed, taken, buried, done };

struct Task {
    std::string payload;
    St st = St::ready;
    Millis time = 0;
    Millis aux = 0;  // not_before / lease_until / done_until
    std::uint32_t attempts = 0;
    std::uint64_t version = 0, hlc = 0;
    LeaseId lease = 0;
    SessionId owner = 0;
    bool rod = false;
};

struct Queue {
    QueueSettings s;
    std::int64_t credit = 0;
    std::map<std::string, Task> tasks;
};

class Model {
  public:
    QueueSettings defaults;
    StoreLimits limits;
    std::map<std::string, Queue> queues;
    LeaseId next_lease = 1;
    Millis now = INT64_MIN;

    static constexpr Millis kMaxTime = (Millis{1} << 46) - 1;
    static constexpr Millis kMaxDuration = (Millis{1} << 40) - 1;

    void advance(Millis t) {
        if (t <= now) return;
        now = t;
        for (auto& [name, q] : queues) {
            for (auto it = q.tasks.begin(); it != q.tasks.end();) {
                Task& k = it->second;
                if (k.st == St::taken && k.aux <= t) {
                    Millis lease_until = k.aux;
                    fail(q, k, lease_until);
                    bump(k, lease_until);
                } else if (k.st == St::delayed && k.aux <= t) {
                    k.st = St::ready;
                    k.aux = 0;
                } else if (k.st == St::done && k.aux <= t) {
                    it = q.tasks.erase(it);
                    continue;
                }
                ++it;
            }
        }
    }

    Result apply(const Command& c, Millis t) {
        advance(t);
        return std::visit([this](const auto& cmd) { return do_apply(cmd); }, c);
    }

    std::optional<TaskView> get(const std::string& queue, const std::string& key) const {
        auto q = queues.find(queue);
        if (q == queues.end()) return std::nullopt;
        auto it = q->second.tasks.find(key);
        if (it == q->second.tasks.end()) return std::nullopt;
        const Task& k = it->second;
        TaskView v;
        v.queue = queue;
        v.key = key;
        v.payload = k.payload;
        v.status = k.st == St::ready || k.st == St::delayed ? Status::ready
                   : k.st == St::taken                      ? Status::taken
                   : k.st == St::buried                     ? Status::buried
                                                            : Status::done;
        v.time = k.time;
        v.attempts = k.attempts;
        v.version = k.version;
        v.hlc = k.hlc;
        if (k.st == St::taken) {
            v.lease = k.lease;
            v.lease_until = k.aux;
            v.owner = k.owner;
            v.release_on_disconnect = k.rod;
        }
        if (k.st == St::delayed) v.not_before = k.aux;
        if (k.st == St::done) v.done_until = k.aux;
        return v;
    }

    std::size_t task_count() const {
        std::size_t n = 0;
        for (const auto& [name, q] : queues)
            n += q.tasks.size();
        return n;
    }

    // Earliest event strictly after `now` (call right after an apply at `now`).
    std::optional<Millis> next_event(const std::string& queue) const {
        auto qi = queues.find(queue);
        if (qi == queues.end()) return std::nullopt;
        const Queue& q = qi->second;
        std::optional<Millis> best;
        auto consider = [&](Millis t) {
            if (t > now && (!best || t < *best)) best = t;
        };
        for (const auto& [key, k] : q.tasks) {
            if (k.st == St::ready) consider(k.time - q.s.lead_ms);
            if (k.st == St::taken || k.st == St::delayed || k.st == St::done) consider(k.aux);
        }
        return best;
    }

    QueueStats stats(const std::string& queue) const {
        QueueStats st;
        auto qi = queues.find(queue);
        if (qi == queues.end()) return st;
        const Queue& q = qi->second;
        for (const auto& [key, k] : q.tasks) {
            switch (k.st) {
                case St::ready:
                    ++st.ready;
                    if (k.time - q.s.lead_ms <= now) ++st.due_now;
                    if (!st.next_due || k.time - q.s.lead_ms < *st.next_due) {
                        st.next_due = k.time - q.s.lead_ms;
                    }
                    if (k.time < now && (!st.oldest_late || k.time < *st.oldest_late)) {
                        st.oldest_late = k.time;
                    }
                    break;
                case St::delayed:
                    ++st.ready;
                    break;
                case St::taken:
                    ++st.taken;
                    break;
                case St::buried:
                    ++st.buried;
                    break;
                case St::done:
                    ++st.done;
                    break;
            }
        }
        return st;
    }

  private:
    static Result bad() { return Result::error(Code::bad_request, "bad"); }
    static bool time_ok(Millis t) { return t >= 0 && t <= kMaxTime; }
    static bool duration_ok(Millis d) { return d >= 0 && d <= kMaxDuration; }
    static bool lease_len_ok(Millis d) { return d > 0 && d <= kMaxDuration; }
    bool queue_ok(const std::string& q) const {
        return !q.empty() && q.size() <= limits.max_queue_name_bytes;
    }
    bool key_ok(const std::string& q, const std::string& k) const {
        return queue_ok(q) && !k.empty() && k.size() <= limits.max_key_bytes;
    }

    void bump(Task& k, Millis) { ++k.version; }
    // A put or an ack: what a merge orders by.
    void stamp_write(Task& k, Millis at) {
        std::uint64_t stamp = static_cast<std::uint64_t>(std::max<Millis>(at, 0)) << 16;
        k.hlc = std::max(k.hlc + 1, stamp);
    }

    void fail(Queue& q, Task& k, Millis not_before) {
        k.lease = 0;
        k.owner = 0;
        k.rod = false;
        if (q.s.max_attempts != 0 && k.attempts >= q.s.max_attempts) {
            k.st = St::buried;
            k.aux = 0;
        } else if (not_before > now) {
            k.st = St::delayed;
            k.aux = not_before;
        } else {
            k.st = St::ready;
            k.aux = 0;
        }
    }

    Queue& queue(const std::string& name) {
        auto it = queues.find(name);
        if (it != queues.end()) return it->second;
        Queue& q = queues[name];
        q.s = defaults;
        return q;
    }

    Task* find(const std::string& queue, const std::string& key) {
        auto q = queues.find(queue);
        if (q == queues.end()) return nullptr;
        auto it = q->second.tasks.find(key);
        return it == q->second.tasks.end() ? nullptr : &it->second;
    }

    Result leased(const std::string& queue, const std::string& key, LeaseId lease, Task** k) {
        *k = find(queue, key);
        if (*k == nullptr) return Result::error(Code::not_found, "");
        if ((*k)->st != St::taken || (*k)->lease != lease) {
            return Result::error(Code::lease_mismatch, "");
        }
        return Result{};
    }

    Result do_apply(const Declare& c) {
        if (!queue_ok(c.queue)) return bad();
        if (c.lead_ms && !duration_ok(*c.lead_ms)) return bad();
        if (c.ttr_ms && !lease_len_ok(*c.ttr_ms)) return bad();
        if (c.retention_ms && !duration_ok(*c.retention_ms)) return bad();
        if (c.late_share && !(*c.late_share >= 0 && *c.late_share <= 1)) return bad();
        Queue& q = queue(c.queue);
        if (c.lead_ms) q.s.lead_ms = *c.lead_ms;
        if (c.ttr_ms) q.s.ttr_ms = *c.ttr_ms;
        if (c.retention_ms) q.s.retention_ms = *c.retention_ms;
        if (c.max_attempts) q.s.max_attempts = *c.max_attempts;
        if (c.late_share) q.s.late_share = *c.late_share;
        Result r;
        r.settings = q.s;
        return r;
    }

    Result do_apply(const Put& c) {
        if (!key_ok(c.queue, c.key) || c.payload.size() > limits.max_payload_bytes) return bad();
        if (c.time && !time_ok(*c.time)) return bad();
        Task* k = find(c.queue, c.key);
        if (k && c.mode == PutMode::insert) return Result::error(Code::exists, "");
        if (!k && c.mode == PutMode::update) return Result::error(Code::not_found, "");
        Queue& q = queue(c.queue);
        Task& t = q.tasks[c.key];
        Task fresh;
        fresh.version = t.version;
        fresh.hlc = t.hlc;
        fresh.payload = c.payload;
        fresh.time = c.time.value_or(now);
        t = fresh;
        bump(t, now);
        stamp_write(t, now);
        Result r;
        r.version = t.version;
        return r;
    }

    Result do_apply(const Delete& c) {
        if (!key_ok(c.queue, c.key)) return bad();
        if (!find(c.queue, c.key)) return Result::error(Code::not_found, "");
        queues[c.queue].tasks.erase(c.key);
        return Result{};
    }

    Result do_apply(const Take& c) {
        if (!queue_ok(c.queue) || c.count == 0 || c.count > limits.max_take_count) return bad();
        if (c.ttr_ms && !lease_len_ok(*c.ttr_ms)) return bad();
        Result r;
        auto qi = queues.find(c.queue);
        if (qi == queues.end()) return r;
        Queue& q = qi->second;
        const std::int64_t ppm = std::llround(std::clamp(q.s.late_share, 0.0, 1.0) * 1'000'000);
        while (r.tasks.size() < c.count) {
            std::string not_late, late;
            for (auto& [key, k] : q.tasks) {
                if (k.st != St::ready) continue;
                if (k.time >= now && k.time - q.s.lead_ms <= now &&
                    (not_late.empty() || k.time < q.tasks[not_late].time)) {
                    not_late = key;
                }
                if (k.time < now && (late.empty() || k.time < q.tasks[late].time)) late = key;
            }
            if (not_late.empty() && late.empty()) break;
            bool contested = !not_late.empty() && !late.empty();
            bool pick_late = contested ? q.credit + ppm >= 1'000'000 : !late.empty();
            Task& k = q.tasks[pick_late ? late : not_late];
            const std::string& key = pick_late ? late : not_late;
            if (q.s.max_attempts != 0 && k.attempts >= q.s.max_attempts) {
                k.st = St::buried;
                bump(k, now);
                continue;
            }
            if (contested) q.credit += ppm - (pick_late ? 1'000'000 : 0);
            ++k.attempts;
            k.st = St::taken;
            k.aux = now + c.ttr_ms.value_or(q.s.ttr_ms);
            k.lease = next_lease++;
            k.owner = c.session;
            k.rod = c.release_on_disconnect;
            bump(k, now);
            r.tasks.push_back({key, k.payload, k.time, k.lease, k.aux, k.attempts});
        }
        return r;
    }

    Result do_apply(const Touch& c) {
        if (!key_ok(c.queue, c.key)) return bad();
        if (c.ttr_ms && !lease_len_ok(*c.ttr_ms)) return bad();
        Task* k = nullptr;
        if (Result r = leased(c.queue, c.key, c.lease, &k); !r.ok()) return r;
        k->aux = now + c.ttr_ms.value_or(queues[c.queue].s.ttr_ms);
        bump(*k, now);
        Result r;
        r.lease_until = k->aux;
        return r;
    }

    Result do_apply(const Ack& c) {
        if (!key_ok(c.queue, c.key)) return bad();
        if (c.payload && c.payload->size() > limits.max_payload_bytes) return bad();
        if (c.time && !time_ok(*c.time)) return bad();
        Task* k = nullptr;
        if (Result r = leased(c.queue, c.key, c.lease, &k); !r.ok()) return r;
        Queue& q = queues[c.queue];
        k->lease = 0;
        k->owner = 0;
        k->rod = false;
        if (c.payload) k->payload = *c.payload;
        k->attempts = 0;
        if (c.time) {
            k->st = St::ready;
            k->time = *c.time;
            k->aux = 0;
        } else {
            k->st = St::done;
            k->aux = now + q.s.retention_ms;
        }
        bump(*k, now);
        stamp_write(*k, now);
        Result r;
        r.version = k->version;
        if (k->st == St::done && k->aux <= now) q.tasks.erase(c.key);
        return r;
    }

    Result do_apply(const Release& c) {
        if (!key_ok(c.queue, c.key) || !duration_ok(c.delay_ms)) return bad();
        Task* k = nullptr;
        if (Result r = leased(c.queue, c.key, c.lease, &k); !r.ok()) return r;
        fail(queues[c.queue], *k, now + c.delay_ms);
        bump(*k, now);
        return Result{};
    }

    Result do_apply(const Bury& c) {
        if (!key_ok(c.queue, c.key)) return bad();
        Task* k = nullptr;
        if (Result r = leased(c.queue, c.key, c.lease, &k); !r.ok()) return r;
        k->lease = 0;
        k->owner = 0;
        k->rod = false;
        k->st = St::buried;
        k->aux = 0;
        bump(*k, now);
        return Result{};
    }

    Result do_apply(const Kick& c) {
        if (!queue_ok(c.queue) || c.count == 0 || c.count > limits.max_kick_count) return bad();
        Result r;
        auto qi = queues.find(c.queue);
        if (qi == queues.end()) return r;
        std::vector<std::pair<Millis, std::string>> buried;
        for (auto& [key, k] : qi->second.tasks) {
            if (k.st == St::buried) buried.emplace_back(k.time, key);
        }
        std::sort(buried.begin(), buried.end());
        for (const auto& [time, key] : buried) {
            if (r.kicked == c.count) break;
            Task& k = qi->second.tasks[key];
            k.st = St::ready;
            k.attempts = 0;
            bump(k, now);
            ++r.kicked;
        }
        return r;
    }

    // Advance only moves time, which apply() already did.
    Result do_apply(const Advance&) { return Result{}; }
    // Merges are checked against their own reference (merge_test.cpp).
    Result do_apply(const Merge&) { return Result::error(Code::bad_request, "not modeled"); }
    Result do_apply(const MoveBucket&) { return Result::error(Code::bad_request, "not modeled"); }

    Result do_apply(const ReleaseSession& c) {
        for (auto& [name, q] : queues) {
            for (auto& [key, k] : q.tasks) {
                if (k.st == St::taken && k.rod && k.owner == c.session) {
                    fail(q, k, now);
                    bump(k, now);
                }
            }
        }
        return Result{};
    }
};

}  // namespace dueq::queue::model
