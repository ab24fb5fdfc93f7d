// Store: applying commands, and the state transitions they and time cause.
// Reads are in store_query.cpp, persistence in task_codec.cpp; docs/semantics.md is the
// user-facing description of what is implemented here.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "queue/store_impl.h"

namespace dueq::queue {

using detail::kMaxDuration;
using detail::kMaxTime;
using detail::kNoEvent;
using detail::sat_add;
using detail::State;
using Task = detail::Task;
using Queue = detail::Queue;

detail::StoreState::~StoreState() {
    auto dispose = [this](Task* t) { Task::destroy(arena, t); };
    for (Queue* q : queues) {
        q->ready.clear_and_dispose(dispose);
        q->delayed.clear_and_dispose(dispose);
        q->buried.clear_and_dispose(dispose);
        q->taken.clear_and_dispose(dispose);
        q->done.clear_and_dispose(dispose);
    }
}

// ---------------------------------------------------------------- queues

Queue* detail::StoreState::find_queue(std::string_view name) const {
    auto it = queues_by_name.find(name);
    return it == queues_by_name.end() ? nullptr : it->second.get();
}

Queue* detail::StoreState::get_or_create_queue(std::string_view name) {
    if (Queue* q = find_queue(name)) return q;
    if (queues.size() >= detail::kMaxQueues) return nullptr;
    auto q = std::make_unique<Queue>();
    q->name = std::string(name);
    q->id = static_cast<std::uint16_t>(queues.size());
    Queue* raw = q.get();
    queues.push_back(raw);
    queues_by_name.emplace(raw->name, std::move(q));
    recompute_settings(*raw);
    return raw;
}

QueueSettings detail::StoreState::base_settings(std::string_view name) const {
    auto it = configured.find(name);
    return it == configured.end() ? defaults : it->second;
}

void detail::StoreState::recompute_settings(Queue& q) {
    QueueSettings s = base_settings(q.name);
    const auto& d = q.declared;
    if (d.lead_ms) s.lead_ms = *d.lead_ms;
    if (d.ttr_ms) s.ttr_ms = *d.ttr_ms;
    if (d.retention_ms) s.retention_ms = *d.retention_ms;
    if (d.max_attempts) s.max_attempts = *d.max_attempts;
    if (d.late_share) s.late_share = *d.late_share;
    q.settings = s;
    double share = std::clamp(s.late_share, 0.0, 1.0);
    q.late_ppm = static_cast<std::int64_t>(std::llround(share * detail::kShareScale));
}

void detail::StoreState::update_calendar(Queue& q) {
    Millis at = kNoEvent;
    if (!q.taken.empty()) at = std::min(at, q.taken.begin()->aux);
    if (!q.delayed.empty()) at = std::min(at, q.delayed.begin()->aux);
    if (!q.done.empty()) at = std::min(at, q.done.begin()->aux);
    if (at == q.calendar_at) return;
    if (q.calendar_at != kNoEvent) calendar.erase({q.calendar_at, q.id});
    if (at != kNoEvent) calendar.insert({at, q.id});
    q.calendar_at = at;
}

// ---------------------------------------------------------------- tasks

void detail::StoreState::link(Queue& q, Task* t) {
    switch (t->state()) {
        case State::ready:
            q.ready.insert(*t);
            break;
        case State::delayed:
            q.delayed.insert(*t);
            break;
        case State::taken:
            q.taken.insert(*t);
            break;
        case State::buried:
            q.buried.insert(*t);
            break;
        case State::done:
            q.done.insert(*t);
            break;
    }
}

void detail::StoreState::unlink(Queue& q, Task* t) {
    switch (t->state()) {
        case State::ready:
            q.ready.erase(q.ready.iterator_to(*t));
            break;
        case State::delayed:
            q.delayed.erase(q.delayed.iterator_to(*t));
            break;
        case State::taken:
            q.taken.erase(q.taken.iterator_to(*t));
            break;
        case State::buried:
            q.buried.erase(q.buried.iterator_to(*t));
            break;
        case State::done:
            q.done.erase(q.done.iterator_to(*t));
            break;
    }
}

void detail::StoreState::mark_changed(Task* t) {
    if (t->dirty) return;
    t->dirty = 1;
    changes.emplace_back(t->queue_id, std::string(t->key()));
}

void detail::StoreState::bump(Task* t, Millis at) {
    t->version = t->version + 1;
    // Per key, hlc only grows. Stamping with the time of the event (not the time advance()
    // happened to run) keeps advance() commuting with apply().
    std::uint64_t stamp = static_cast<std::uint64_t>(std::max<Millis>(at, 0)) << 16;
    t->hlc = std::max(t->hlc + 1, stamp);
}

void detail::StoreState::grant_lease(Task* t, LeaseRec rec) {
    leases[t] = rec;
    if (rec.release_on_disconnect) session_leases.insert({rec.owner, rec.lease, t});
}

void detail::StoreState::drop_lease(Task* t) {
    auto it = leases.find(t);
    if (it == leases.end()) return;
    if (it->second.release_on_disconnect) {
        session_leases.erase({it->second.owner, it->second.lease, t});
    }
    leases.erase(it);
}

const detail::LeaseRec* detail::StoreState::lease_of(const Task* t) const {
    auto it = leases.find(t);
    return it == leases.end() ? nullptr : &it->second;
}

void detail::StoreState::remove_task(Queue& q, Task* t, bool record_change) {
    unlink(q, t);
    if (t->state() == State::taken) drop_lease(t);
    destroy_unlinked(t, record_change);
}

void detail::StoreState::destroy_unlinked(Task* t, bool record_change) {
    table.erase(t);
    if (record_change && !t->dirty) changes.emplace_back(t->queue_id, std::string(t->key()));
    Task::destroy(arena, t);
}

Task* detail::StoreState::set_payload(Task* t, std::string_view payload) {
    if (payload.size() == t->payload_len) {
        if (!payload.empty()) std::memcpy(t->tail() + t->key_len, payload.data(), payload.size());
        return t;
    }
    Task* n = Task::create(arena, t->queue_id, t->key(), payload);
    n->time = t->time;
    n->aux = t->aux;
    n->hlc = t->hlc;
    n->version = t->version;
    n->attempts = t->attempts;
    n->state_bits = t->state_bits;
    n->dirty = t->dirty;
    table.replace(t, n);
    Task::destroy(arena, t);
    return n;
}

void detail::StoreState::after_failed_attempt(Queue& q, Task* t, Millis not_before) {
    const std::uint32_t max = q.settings.max_attempts;
    if (max != 0 && t->attempts >= max) {
        t->set_state(State::buried);
        t->aux = 0;
    } else if (not_before > now) {
        t->set_state(State::delayed);
        t->aux = not_before;
    } else {
        t->set_state(State::ready);
        t->aux = 0;
    }
    link(q, t);
}

// The refresh order of DESIGN §2: among due tasks (time - lead_ms <= now), first the ones
// not yet late (now <= time) by earliest time, then the late ones (time < now) by earliest
// time. When both kinds are waiting, late_share decides deterministically: each such take
// adds late_ppm to a credit, and a take that finds the credit at a whole unit goes to the
// oldest late task. So late tasks get exactly that share of contested takes.
Task* detail::StoreState::pick_for_take(Queue& q, Millis at, bool* contested, bool* late) const {
    *contested = false;
    *late = false;
    if (q.ready.empty()) return nullptr;
    const Millis horizon = sat_add(at, q.settings.lead_ms);
    auto first_not_late = q.ready.lower_bound(at, detail::TimeProbe{});
    Task* not_late = nullptr;
    if (first_not_late != q.ready.end() && first_not_late->time <= horizon) {
        not_late = &*first_not_late;
    }
    Task* oldest = &*q.ready.begin();
    Task* late_task = oldest->time < at ? oldest : nullptr;
    if (not_late != nullptr && late_task != nullptr) {
        *contested = true;
        *late = q.late_credit + q.late_ppm >= detail::kShareScale;
        return *late ? late_task : not_late;
    }
    *late = late_task != nullptr;
    return not_late != nullptr ? not_late : late_task;
}

// ---------------------------------------------------------------- time

void detail::StoreState::expire(Queue& q, Millis to) {
    while (!q.taken.empty() && q.taken.begin()->aux <= to) {
        Task* t = &*q.taken.begin();
        const Millis lease_until = t->aux;
        q.taken.erase(q.taken.begin());
        drop_lease(t);
        after_failed_attempt(q, t, lease_until);
        bump(t, lease_until);
        mark_changed(t);
    }
    while (!q.delayed.empty() && q.delayed.begin()->aux <= to) {
        // The end of a delay is no write: status stays ready, so no version bump.
        Task* t = &*q.delayed.begin();
        q.delayed.erase(q.delayed.begin());
        t->set_state(State::ready);
        t->aux = 0;
        q.ready.insert(*t);
        mark_changed(t);
    }
    while (!q.done.empty() && q.done.begin()->aux <= to) {
        remove_task(q, &*q.done.begin(), true);
    }
}

void detail::StoreState::advance(Millis to) {
    if (to <= now) return;
    now = to;
    while (!calendar.empty() && calendar.begin()->first <= to) {
        Queue& q = *queues[calendar.begin()->second];
        expire(q, to);
        update_calendar(q);
    }
}

// ---------------------------------------------------------------- commands

namespace {

Result bad(std::string msg) {
    return Result::error(Code::bad_request, std::move(msg));
}

bool valid_time(Millis t) {
    return t >= 0 && t <= kMaxTime;
}
bool valid_duration(Millis d) {
    return d >= 0 && d <= kMaxDuration;
}
bool valid_lease_length(Millis d) {
    return d > 0 && d <= kMaxDuration;
}

class Applier {
  public:
    Applier(detail::StoreState& s, Millis now) : s_(s), now_(now) {}

    Result operator()(const Declare& c);
    Result operator()(const Put& c);
    Result operator()(const Delete& c);
    Result operator()(const Take& c);
    Result operator()(const Touch& c);
    Result operator()(const Ack& c);
    Result operator()(const Release& c);
    Result operator()(const Bury& c);
    Result operator()(const Kick& c);
    Result operator()(const ReleaseSession& c);

  private:
    std::optional<Result> check_queue(const std::string& q) const;
    std::optional<Result> check_key(const std::string& q, const std::string& key) const;
    // Finds a taken task by key and lease, or says why not.
    Result find_leased(const std::string& queue, const std::string& key, LeaseId lease, Queue** q,
                       Task** t) const;

    detail::StoreState& s_;
    Millis now_;
};

std::optional<Result> Applier::check_queue(const std::string& q) const {
    if (q.empty()) return bad("queue name is empty");
    if (q.size() > s_.limits.max_queue_name_bytes) return bad("queue name is too long");
    return std::nullopt;
}

std::optional<Result> Applier::check_key(const std::string& q, const std::string& key) const {
    if (auto r = check_queue(q)) return r;
    if (key.empty()) return bad("key is empty");
    if (key.size() > std::min(s_.limits.max_key_bytes, detail::kMaxKeyBytes)) {
        return bad("key is too long");
    }
    return std::nullopt;
}

Result Applier::find_leased(const std::string& queue, const std::string& key, LeaseId lease,
                            Queue** q, Task** t) const {
    if (auto r = check_key(queue, key)) return *r;
    *q = s_.find_queue(queue);
    *t = *q ? s_.table.find((*q)->id, key) : nullptr;
    if (*t == nullptr) return Result::error(Code::not_found, "no such task");
    const detail::LeaseRec* rec = s_.lease_of(*t);
    if ((*t)->state() != State::taken || rec == nullptr || rec->lease != lease) {
        return Result::error(Code::lease_mismatch, "the task is not held under this lease");
    }
    return Result{};
}

Result Applier::operator()(const Declare& c) {
    if (auto r = check_queue(c.queue)) return *r;
    if (c.lead_ms && !valid_duration(*c.lead_ms)) return bad("lead_ms out of range");
    if (c.ttr_ms && !valid_lease_length(*c.ttr_ms)) return bad("ttr_ms out of range");
    if (c.retention_ms && !valid_duration(*c.retention_ms)) return bad("retention_ms out of range");
    if (c.late_share && !(*c.late_share >= 0.0 && *c.late_share <= 1.0)) {
        return bad("late_share must be within 0..1");
    }
    Queue* q = s_.get_or_create_queue(c.queue);
    if (q == nullptr) return bad("too many queues");
    auto& d = q->declared;
    if (c.lead_ms) d.lead_ms = c.lead_ms;
    if (c.ttr_ms) d.ttr_ms = c.ttr_ms;
    if (c.retention_ms) d.retention_ms = c.retention_ms;
    if (c.max_attempts) d.max_attempts = c.max_attempts;
    if (c.late_share) d.late_share = c.late_share;
    s_.recompute_settings(*q);
    Result r;
    r.settings = q->settings;
    return r;
}

Result Applier::operator()(const Put& c) {
    if (auto r = check_key(c.queue, c.key)) return *r;
    if (c.payload.size() > std::min(s_.limits.max_payload_bytes, detail::kMaxPayloadBytes)) {
        return bad("payload is too large");
    }
    if (c.time && !valid_time(*c.time)) return bad("time out of range");
    if (c.mode != PutMode::upsert && c.mode != PutMode::insert && c.mode != PutMode::update) {
        return bad("unknown put mode");
    }
    Queue* q = s_.find_queue(c.queue);
    Task* t = q ? s_.table.find(q->id, c.key) : nullptr;
    if (t != nullptr && c.mode == PutMode::insert) {
        return Result::error(Code::exists, "the task exists");
    }
    if (t == nullptr && c.mode == PutMode::update) {
        return Result::error(Code::not_found, "no such task");
    }
    if (q == nullptr && (q = s_.get_or_create_queue(c.queue)) == nullptr) {
        return bad("too many queues");
    }
    if (t != nullptr) {
        // Replacing a taken task voids its lease: the holder's ack will be refused.
        s_.unlink(*q, t);
        if (t->state() == State::taken) s_.drop_lease(t);
        t = s_.set_payload(t, c.payload);
    } else {
        t = Task::create(s_.arena, q->id, c.key, c.payload);
        s_.table.insert(t);
    }
    t->time = c.time.value_or(now_);
    t->aux = 0;
    t->attempts = 0;
    t->set_state(State::ready);
    s_.link(*q, t);
    s_.bump(t, now_);
    s_.mark_changed(t);
    s_.update_calendar(*q);
    Result r;
    r.version = t->version;
    return r;
}

Result Applier::operator()(const Delete& c) {
    if (auto r = check_key(c.queue, c.key)) return *r;
    Queue* q = s_.find_queue(c.queue);
    Task* t = q ? s_.table.find(q->id, c.key) : nullptr;
    if (t == nullptr) return Result::error(Code::not_found, "no such task");
    s_.remove_task(*q, t, true);
    s_.update_calendar(*q);
    return Result{};
}

Result Applier::operator()(const Take& c) {
    if (auto r = check_queue(c.queue)) return *r;
    if (c.count == 0 || c.count > s_.limits.max_take_count) return bad("count out of range");
    if (c.ttr_ms && !valid_lease_length(*c.ttr_ms)) return bad("ttr_ms out of range");
    Result r;
    Queue* q = s_.find_queue(c.queue);
    if (q == nullptr) return r;  // reading an unknown queue does not create it
    const Millis ttr = c.ttr_ms.value_or(q->settings.ttr_ms);
    const std::uint32_t max = q->settings.max_attempts;
    while (r.tasks.size() < c.count) {
        bool contested = false, late = false;
        Task* t = s_.pick_for_take(*q, now_, &contested, &late);
        if (t == nullptr) break;
        q->ready.erase(q->ready.iterator_to(*t));
        if (max != 0 && t->attempts >= max) {
            // Only reachable when max_attempts was lowered after the task failed: it
            // has had its attempts, so it goes where a failure would have sent it.
            t->set_state(State::buried);
            q->buried.insert(*t);
            s_.bump(t, now_);
            s_.mark_changed(t);
            continue;
        }
        if (contested) {
            q->late_credit += q->late_ppm - (late ? detail::kShareScale : 0);
        }
        if (t->attempts < detail::kMaxAttemptsCount) t->attempts = t->attempts + 1;
        t->set_state(State::taken);
        t->aux = sat_add(now_, ttr);
        detail::LeaseRec rec{s_.next_lease++, c.session, c.release_on_disconnect};
        s_.grant_lease(t, rec);
        q->taken.insert(*t);
        s_.bump(t, now_);
        s_.mark_changed(t);
        TakenTask out;
        out.key = std::string(t->key());
        out.payload = std::string(t->payload());
        out.time = t->time;
        out.lease = rec.lease;
        out.lease_until = t->aux;
        out.attempts = static_cast<std::uint32_t>(t->attempts);
        r.tasks.push_back(std::move(out));
    }
    s_.update_calendar(*q);
    return r;
}

Result Applier::operator()(const Touch& c) {
    if (c.ttr_ms && !valid_lease_length(*c.ttr_ms)) return bad("ttr_ms out of range");
    Queue* q = nullptr;
    Task* t = nullptr;
    if (Result r = find_leased(c.queue, c.key, c.lease, &q, &t); !r.ok()) return r;
    s_.unlink(*q, t);
    t->aux = sat_add(now_, c.ttr_ms.value_or(q->settings.ttr_ms));
    s_.link(*q, t);
    s_.bump(t, now_);
    s_.mark_changed(t);
    s_.update_calendar(*q);
    Result r;
    r.lease_until = t->aux;
    return r;
}

Result Applier::operator()(const Ack& c) {
    if (c.payload &&
        c.payload->size() > std::min(s_.limits.max_payload_bytes, detail::kMaxPayloadBytes)) {
        return bad("payload is too large");
    }
    if (c.time && !valid_time(*c.time)) return bad("time out of range");
    Queue* q = nullptr;
    Task* t = nullptr;
    if (Result r = find_leased(c.queue, c.key, c.lease, &q, &t); !r.ok()) return r;
    s_.unlink(*q, t);
    s_.drop_lease(t);
    if (c.payload) t = s_.set_payload(t, *c.payload);
    t->attempts = 0;
    if (c.time) {
        t->time = *c.time;
        t->aux = 0;
        t->set_state(State::ready);
    } else {
        t->aux = sat_add(now_, q->settings.retention_ms);
        t->set_state(State::done);
    }
    s_.bump(t, now_);
    Result r;
    r.version = t->version;
    if (t->state() == State::done && t->aux <= now_) {
        s_.destroy_unlinked(t, true);  // retention_ms = 0: nothing to keep it for
    } else {
        s_.link(*q, t);
        s_.mark_changed(t);
    }
    s_.update_calendar(*q);
    return r;
}

Result Applier::operator()(const Release& c) {
    if (!valid_duration(c.delay_ms)) return bad("delay_ms out of range");
    Queue* q = nullptr;
    Task* t = nullptr;
    if (Result r = find_leased(c.queue, c.key, c.lease, &q, &t); !r.ok()) return r;
    s_.unlink(*q, t);
    s_.drop_lease(t);
    s_.after_failed_attempt(*q, t, sat_add(now_, c.delay_ms));
    s_.bump(t, now_);
    s_.mark_changed(t);
    s_.update_calendar(*q);
    return Result{};
}

Result Applier::operator()(const Bury& c) {
    Queue* q = nullptr;
    Task* t = nullptr;
    if (Result r = find_leased(c.queue, c.key, c.lease, &q, &t); !r.ok()) return r;
    s_.unlink(*q, t);
    s_.drop_lease(t);
    t->set_state(State::buried);
    t->aux = 0;
    s_.link(*q, t);
    s_.bump(t, now_);
    s_.mark_changed(t);
    s_.update_calendar(*q);
    return Result{};
}

Result Applier::operator()(const Kick& c) {
    if (auto r = check_queue(c.queue)) return *r;
    if (c.count == 0 || c.count > s_.limits.max_kick_count) return bad("count out of range");
    Result r;
    Queue* q = s_.find_queue(c.queue);
    if (q == nullptr) return r;
    while (r.kicked < c.count && !q->buried.empty()) {
        Task* t = &*q->buried.begin();
        q->buried.erase(q->buried.begin());
        t->attempts = 0;  // a kicked task gets a fresh set of attempts
        t->set_state(State::ready);
        q->ready.insert(*t);
        s_.bump(t, now_);
        s_.mark_changed(t);
        ++r.kicked;
    }
    return r;
}

Result Applier::operator()(const ReleaseSession& c) {
    auto it = s_.session_leases.lower_bound({c.session, 0, nullptr});
    std::vector<std::uint16_t> touched;
    while (it != s_.session_leases.end() && it->session == c.session) {
        Task* t = it->task;
        ++it;  // drop_lease erases the current entry
        Queue& q = *s_.queues[t->queue_id];
        s_.unlink(q, t);
        s_.drop_lease(t);
        // As if the lease ran out now: the take already counted the attempt.
        s_.after_failed_attempt(q, t, now_);
        s_.bump(t, now_);
        s_.mark_changed(t);
        if (std::find(touched.begin(), touched.end(), q.id) == touched.end()) {
            touched.push_back(q.id);
        }
    }
    for (std::uint16_t id : touched)
        s_.update_calendar(*s_.queues[id]);
    return Result{};
}

}  // namespace

// ---------------------------------------------------------------- Store

Store::Store(StoreLimits limits) : impl_(std::make_unique<Impl>(limits)) {}
Store::~Store() = default;

Result Store::apply(const Command& cmd, Millis now) {
    impl_->advance(now);
    // A log time behind an earlier one (it should not happen: the leader keeps its clock
    // monotonic) is taken as the latest time seen, so state never moves back in time.
    Applier applier(*impl_, std::max(now, impl_->now));
    return std::visit(applier, cmd);
}

void Store::advance(Millis now) {
    impl_->advance(now);
}

void Store::set_default_settings(const QueueSettings& s) {
    impl_->defaults = s;
    for (Queue* q : impl_->queues)
        impl_->recompute_settings(*q);
}

void Store::configure_queue(const std::string& queue, const QueueSettings& s) {
    impl_->configured[queue] = s;
    if (Queue* q = impl_->find_queue(queue)) impl_->recompute_settings(*q);
}

}  // namespace dueq::queue
