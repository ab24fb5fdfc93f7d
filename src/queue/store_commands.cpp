// The commands: what each does to the store's state (detail::apply_command). Each command
// is validated in full before it changes anything. Store::apply (store.cpp) runs one after
// advancing the time; docs/semantics.md describes what is implemented here.
#include <algorithm>
#include <type_traits>

#include "queue/store_impl.h"
#include "shard/bucket_hash.h"

namespace dueq::queue {

using detail::kMaxDuration;
using detail::kMaxTime;
using detail::sat_add;
using detail::State;
using Task = detail::Task;
using Queue = detail::Queue;

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
    Result operator()(const Advance&) { return Result{}; }
    Result operator()(const Merge& c);
    Result operator()(const MoveBucket& c) { return detail::apply_move(s_, c, now_); }

  private:
    std::optional<Result> check_queue(const std::string& q) const;
    std::optional<Result> check_key(const std::string& q, const std::string& key) const;
    // While forked (autonomous mode), only the queues that opt in may change.
    std::optional<Result> check_writable(const std::string& q) const;
    // A key of a bucket that is moving, or has moved, to another shard is not written here.
    std::optional<Result> check_bucket(const std::string& q, const std::string& key) const;
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

std::optional<Result> Applier::check_writable(const std::string& queue) const {
    if (!s_.fork) return std::nullopt;
    const Queue* q = s_.find_queue(queue);
    if (q ? q->settings.autonomous : s_.base_settings().autonomous) return std::nullopt;
    return Result::error(Code::no_quorum,
                         "this node is cut off from the majority and the queue is not "
                         "autonomous; not applied");
}

std::optional<Result> Applier::check_bucket(const std::string& queue,
                                            const std::string& key) const {
    if (s_.moves.empty()) return std::nullopt;
    const std::uint32_t b = shard::bucket_of(queue, key, s_.move_bucket_count);
    if (s_.moves.writable(b)) return std::nullopt;
    const shard::BucketState* st = s_.moves.find(b);
    return Result::error(Code::moving, "bucket " + std::to_string(b) + " is " +
                                           to_string(st->phase) +
                                           (st->peer.empty() ? "" : " (shard " + st->peer + ")") +
                                           "; not applied, retry");
}

Result Applier::find_leased(const std::string& queue, const std::string& key, LeaseId lease,
                            Queue** q, Task** t) const {
    if (auto r = check_key(queue, key)) return *r;
    if (auto r = check_writable(queue)) return *r;
    if (auto r = check_bucket(queue, key)) return *r;
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
    if (c.queue != kDefaultsQueue)
        if (auto r = check_queue(c.queue)) return *r;
    if (c.lead_ms && !valid_duration(*c.lead_ms)) return bad("lead_ms out of range");
    if (c.ttr_ms && !valid_lease_length(*c.ttr_ms)) return bad("ttr_ms out of range");
    if (c.retention_ms && !valid_duration(*c.retention_ms)) return bad("retention_ms out of range");
    if (c.late_share && !(*c.late_share >= 0.0 && *c.late_share <= 1.0)) {
        return bad("late_share must be within 0..1");
    }
    Queue* q = nullptr;
    if (c.queue != kDefaultsQueue) {
        q = s_.get_or_create_queue(c.queue);
        if (q == nullptr) return bad("too many queues");
    }
    auto& d = q ? q->declared : s_.declared_defaults;
    if (c.lead_ms) d.lead_ms = c.lead_ms;
    if (c.ttr_ms) d.ttr_ms = c.ttr_ms;
    if (c.retention_ms) d.retention_ms = c.retention_ms;
    if (c.max_attempts) d.max_attempts = c.max_attempts;
    if (c.late_share) d.late_share = c.late_share;
    if (c.autonomous) d.autonomous = c.autonomous;
    Result r;
    if (q) {
        s_.recompute_settings(*q);
        r.settings = q->settings;
    } else {
        for (Queue* each : s_.queues)
            s_.recompute_settings(*each);
        r.settings = s_.base_settings();
    }
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
    if (auto r = check_writable(c.queue)) return *r;
    if (auto r = check_bucket(c.queue, c.key)) return *r;
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
        if (s_.fork) s_.journal(q->id, c.key, nullptr);
        t = Task::create(s_.arena, q->id, c.key, c.payload);
        s_.table.insert(t);
    }
    t->time = c.time.value_or(now_);
    t->aux = 0;
    t->attempts = 0;
    t->set_state(State::ready);
    s_.link(*q, t);
    s_.bump(t);
    s_.stamp_write(t, now_);
    // Per key, the stamp only grows: past a deletion too, one made in a fork included (a
    // put after it, stamped by a clock that runs behind, would otherwise lose the merge to
    // writes older than itself: simulator seed 5000352, 3 nodes, 60 s of faults).
    if (const auto deleted = s_.deletion_hlc(q->id, c.key)) {
        t->hlc = std::max(t->hlc, *deleted + 1);
        if (!s_.fork) s_.clear_tombstone(q->id, c.key);
    }
    s_.mark_changed(t);
    s_.update_calendar(*q);
    ++q->counters.puts;
    Result r;
    r.version = t->version;
    r.hlc = t->hlc;
    return r;
}

Result Applier::operator()(const Delete& c) {
    if (auto r = check_key(c.queue, c.key)) return *r;
    if (auto r = check_writable(c.queue)) return *r;
    if (auto r = check_bucket(c.queue, c.key)) return *r;
    Queue* q = s_.find_queue(c.queue);
    Task* t = q ? s_.table.find(q->id, c.key) : nullptr;
    if (t == nullptr) return Result::error(Code::not_found, "no such task");
    const detail::Tombstone tomb{detail::StoreState::next_hlc(t->hlc, now_),
                                 sat_add(now_, q->settings.retention_ms)};
    s_.remove_task(*q, t, true);
    // A fork keeps its deletions in its journal; retention 0 remembers nothing.
    if (!s_.fork && tomb.until > now_) s_.set_tombstone(q->id, c.key, tomb);
    s_.update_calendar(*q);
    Result r;
    r.hlc = tomb.hlc;
    return r;
}

Result Applier::operator()(const Take& c) {
    if (auto r = check_queue(c.queue)) return *r;
    if (c.count == 0 || c.count > s_.limits.max_take_count) return bad("count out of range");
    if (c.ttr_ms && !valid_lease_length(*c.ttr_ms)) return bad("ttr_ms out of range");
    if (auto r = check_writable(c.queue)) return *r;
    Result r;
    Queue* q = s_.find_queue(c.queue);
    if (q == nullptr) return r;  // reading an unknown queue does not create it
    const Millis ttr = c.ttr_ms.value_or(q->settings.ttr_ms);
    const std::uint32_t max = q->settings.max_attempts;
    while (r.tasks.size() < c.count) {
        bool contested = false, late = false;
        Task* t = s_.pick_for_take(*q, now_, &contested, &late);
        if (t == nullptr) break;
        s_.before_change(t);
        q->ready.erase(q->ready.iterator_to(*t));
        if (max != 0 && t->attempts >= max) {
            // Only reachable when max_attempts was lowered after the task failed: it
            // has had its attempts, so it goes where a failure would have sent it.
            t->set_state(State::buried);
            q->buried.insert(*t);
            s_.bump(t);
            s_.mark_changed(t);
            ++q->counters.buries;
            continue;
        }
        if (contested) {
            q->late_credit += q->late_ppm - (late ? detail::kShareScale : 0);
        }
        ++q->counters.takes;
        if (t->time < now_) ++q->counters.late_takes;
        if (t->attempts < detail::kMaxAttemptsCount) t->attempts = t->attempts + 1;
        t->set_state(State::taken);
        t->aux = sat_add(now_, ttr);
        detail::LeaseRec rec{s_.next_lease++, c.session, c.release_on_disconnect};
        s_.grant_lease(t, rec);
        q->taken.insert(*t);
        s_.bump(t);
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
    s_.bump(t);
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
    const Millis margin = t->time - now_;
    s_.unlink(*q, t);
    s_.drop_lease(t);
    ++q->counters.acks;
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
    s_.bump(t);
    s_.stamp_write(t, now_);
    Result r;
    r.version = t->version;
    r.hlc = t->hlc;
    r.ack_margin = margin;
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
    s_.bump(t);
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
    ++q->counters.buries;
    s_.link(*q, t);
    s_.bump(t);
    s_.mark_changed(t);
    s_.update_calendar(*q);
    return Result{};
}

Result Applier::operator()(const Kick& c) {
    if (auto r = check_queue(c.queue)) return *r;
    if (c.count == 0 || c.count > s_.limits.max_kick_count) return bad("count out of range");
    if (auto r = check_writable(c.queue)) return *r;
    Result r;
    Queue* q = s_.find_queue(c.queue);
    auto kick = [&](Task* t) {
        s_.before_change(t);
        q->buried.erase(q->buried.iterator_to(*t));
        t->attempts = 0;  // a kicked task gets a fresh set of attempts
        t->set_state(State::ready);
        q->ready.insert(*t);
        s_.bump(t);
        s_.mark_changed(t);
        ++r.kicked;
    };
    if (c.only_key) {
        if (auto refused = check_bucket(c.queue, *c.only_key)) return *refused;
        Task* t = q ? s_.table.find(q->id, *c.only_key) : nullptr;
        if (t == nullptr) return Result::error(Code::not_found, "no such task");
        if (t->state() == State::buried) kick(t);  // otherwise nothing to do: kicked 0
        return r;
    }
    if (q == nullptr) return r;
    for (auto it = q->buried.begin(); r.kicked < c.count && it != q->buried.end();) {
        Task* t = &*it;
        ++it;  // before kick() moves t to another tree
        if (!s_.hidden_from_take(*q, *t)) kick(t);
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
        if (!s_.writable(q)) continue;  // forked: the majority releases it
        s_.unlink(q, t);
        s_.drop_lease(t);
        // As if the lease ran out now: the take already counted the attempt.
        s_.after_failed_attempt(q, t, now_);
        s_.bump(t);
        s_.mark_changed(t);
        if (std::find(touched.begin(), touched.end(), q.id) == touched.end()) {
            touched.push_back(q.id);
        }
    }
    for (std::uint16_t id : touched)
        s_.update_calendar(*s_.queues[id]);
    return Result{};
}

// For the planted defect merge_older_finish_wins only.
bool finished(const Merge& c) {
    detail::StoreState one(kApplyLimits);
    if (!c.task || !one.load_task(c.queue, c.key, *c.task)) return false;
    const Task* t = one.table.find(one.find_queue(c.queue)->id, c.key);
    return t != nullptr && t->state() == State::done;
}

// Per key, the write with the larger hlc wins (docs/autonomy.md). The merged record is
// put in place as that node left it, lease included: its lease id is from that node's
// own space, so its holder may still ack it here, and nobody else's lease matches it.
Result Applier::operator()(const Merge& c) {
    if (auto r = check_key(c.queue, c.key)) return *r;
    if (auto r = check_bucket(c.queue, c.key)) return *r;  // the merging node sends it again
    Queue* q = s_.find_queue(c.queue);
    Task* t = q ? s_.table.find(q->id, c.key) : nullptr;
    const detail::Tombstone* tomb = q && !t ? s_.tombstone_of(q->id, c.key) : nullptr;
    const std::uint64_t here = t ? t->hlc : tomb ? tomb->hlc : 0;
    Result r;
    r.both_sides_wrote = here > c.base_hlc && c.hlc > c.base_hlc;
    if (c.hlc <= here && !(s_.planted == StoreDefect::merge_older_finish_wins && finished(c))) {
        r.merge = MergeOutcome::kept;
        return r;
    }
    if (c.task) {
        const std::uint64_t version = t ? t->version : 0;
        Task* n = s_.install_task(c.queue, c.key, *c.task, true);
        if (n == nullptr) return bad("the merged task does not decode");
        s_.clear_tombstone(n->queue_id, c.key);
        n->hlc = c.hlc;
        n->version = std::min<std::uint64_t>(std::max<std::uint64_t>(n->version, version + 1),
                                             detail::kMaxVersion);
        r.version = n->version;
        // A lease, delay or retention that ended before now ends now, as advance() would
        // have ended it here (and not only once a later entry moves the time).
        Queue* mq = s_.find_queue(c.queue);
        s_.expire(*mq, now_);
        s_.update_calendar(*mq);
    } else {
        if (q == nullptr && (q = s_.get_or_create_queue(c.queue)) == nullptr)
            return bad("too many queues");
        if (t != nullptr) s_.remove_task(*q, t, true);
        // The deletion is remembered as one made here would be.
        const Millis until = sat_add(now_, q->settings.retention_ms);
        if (until > now_) s_.set_tombstone(q->id, c.key, detail::Tombstone{c.hlc, until});
        s_.update_calendar(*q);
    }
    r.merge = MergeOutcome::taken_over;
    return r;
}

}  // namespace

Result detail::apply_command(StoreState& s, const Command& cmd, Millis now) {
    return std::visit(Applier(s, now), cmd);
}

}  // namespace dueq::queue
