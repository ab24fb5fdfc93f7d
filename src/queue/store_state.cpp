// Store internals: queues, task records and their trees, leases, and the transitions
// time causes (advance). The commands that drive them are in store_commands.cpp; tasks
// as records (loading, drains, the fork's journal) are in store_records.cpp.
#include <algorithm>
#include <cmath>

#include "queue/store_impl.h"
#include "shard/bucket_hash.h"

namespace dueq::queue {

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

const Task* detail::StoreState::find_task(std::string_view queue, std::string_view key) const {
    const Queue* q = find_queue(queue);
    return q ? table.find(q->id, key) : nullptr;
}

Queue* detail::StoreState::get_or_create_queue(std::string_view name) {
    if (Queue* q = find_queue(name)) return q;
    if (queues.size() >= detail::kMaxQueues) return nullptr;
    auto q = std::make_unique<Queue>(region);
    q->name = std::string(name);
    q->id = static_cast<std::uint16_t>(queues.size());
    Queue* raw = q.get();
    queues.push_back(raw);
    queues_by_name.emplace(raw->name, std::move(q));
    recompute_settings(*raw);
    return raw;
}

namespace {
void overlay(QueueSettings& s, const detail::DeclaredSettings& d) {
    if (d.lead_ms) s.lead_ms = *d.lead_ms;
    if (d.ttr_ms) s.ttr_ms = *d.ttr_ms;
    if (d.retention_ms) s.retention_ms = *d.retention_ms;
    if (d.max_attempts) s.max_attempts = *d.max_attempts;
    if (d.late_share) s.late_share = *d.late_share;
    if (d.autonomous) s.autonomous = *d.autonomous;
}
}  // namespace

QueueSettings detail::StoreState::base_settings() const {
    QueueSettings s;
    overlay(s, declared_defaults);
    return s;
}

void detail::StoreState::recompute_settings(Queue& q) {
    QueueSettings s = base_settings();
    overlay(s, q.declared);
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

void detail::StoreState::link(Queue& q, Task* t, bool hint_last) {
    // With hint_last the tree first checks whether t goes last (one comparison), and
    // searches from the root only if not.
    with_tree(q, t->state(), [&](auto& tree) {
        if (hint_last)
            tree.insert(tree.end(), *t);
        else
            tree.insert(*t);
    });
}

void detail::StoreState::unlink(Queue& q, Task* t) {
    before_change(t);
    with_tree(q, t->state(), [&](auto& tree) { tree.erase(tree.iterator_to(*t)); });
}

void detail::StoreState::mark_changed(Task* t) {
    if (t->dirty) return;
    t->dirty = 1;
    changes.emplace_back(std::uint16_t(t->queue_id), std::string(t->key()));
}

void detail::StoreState::bump(Task* t) {
    t->version = t->version + 1;
}

void detail::StoreState::stamp_write(Task* t, Millis at) {
    t->hlc = next_hlc(t->hlc, at);
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
    if (fork && record_change)
        fork->deleted_at[{std::uint16_t(t->queue_id), std::string(t->key())}] =
            next_hlc(t->hlc, now);
    table.erase(t);
    if (record_change && !t->dirty)
        changes.emplace_back(std::uint16_t(t->queue_id), std::string(t->key()));
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
        ++q.counters.buries;
    } else if (not_before > now) {
        t->set_state(State::delayed);
        t->aux = not_before;
    } else {
        t->set_state(State::ready);
        t->aux = 0;
    }
    link(q, t);
}

// The refresh order (docs/semantics.md): among due tasks (time - lead_ms <= now), first the ones
// not yet late (now <= time) by earliest time, then the late ones (time < now) by earliest
// time. When both kinds are waiting, late_share decides deterministically: each such take
// adds late_ppm to a credit, and a take that finds the credit at a whole unit goes to the
// oldest late task. So late tasks get exactly that share of contested takes.
Task* detail::StoreState::pick_for_take(Queue& q, Millis at, bool* contested, bool* late) const {
    *contested = false;
    *late = false;
    if (q.ready.empty()) return nullptr;
    const Millis horizon = sat_add(at, q.settings.lead_ms);
    // Tasks of a moving bucket are passed over (at most one bucket's worth of them).
    auto skip_hidden = [&](auto it) {
        if (moves.hides_tasks())
            while (it != q.ready.end() && hidden_from_take(q, *it))
                ++it;
        return it;
    };
    auto first_not_late = skip_hidden(q.ready.lower_bound(at, detail::TimeProbe{}));
    Task* not_late = nullptr;
    if (first_not_late != q.ready.end() && first_not_late->time <= horizon) {
        not_late = &*first_not_late;
    }
    auto first = skip_hidden(q.ready.begin());
    Task* late_task = first != q.ready.end() && first->time < at ? &*first : nullptr;
    if (not_late != nullptr && late_task != nullptr) {
        *contested = true;
        *late = q.late_credit + q.late_ppm >= detail::kShareScale;
        return *late ? late_task : not_late;
    }
    *late = late_task != nullptr;
    return not_late != nullptr ? not_late : late_task;
}

bool detail::StoreState::hidden_from_take(const Queue& q, const Task& t) const {
    return moves.hides_tasks() &&
           !moves.writable(shard::bucket_of(q.name, t.key(), move_bucket_count));
}

// ---------------------------------------------------------------- tombstones

const detail::Tombstone* detail::StoreState::tombstone_of(std::uint16_t queue_id,
                                                          std::string_view key) const {
    if (tombstones.empty()) return nullptr;
    auto it = tombstones.find({queue_id, std::string(key)});
    return it == tombstones.end() ? nullptr : &it->second;
}

std::optional<std::uint64_t> detail::StoreState::deletion_hlc(std::uint16_t queue_id,
                                                              std::string_view key) const {
    if (fork && !fork->deleted_at.empty() && planted != StoreDefect::fork_put_below_deletion) {
        auto it = fork->deleted_at.find({queue_id, std::string(key)});
        if (it != fork->deleted_at.end()) return it->second;
    }
    if (const Tombstone* t = tombstone_of(queue_id, key)) return t->hlc;
    return std::nullopt;
}

void detail::StoreState::set_tombstone(std::uint16_t queue_id, std::string_view key, Tombstone t) {
    clear_tombstone(queue_id, key);
    tombstones[{queue_id, std::string(key)}] = t;
    tombstone_expiry.insert({t.until, queue_id, std::string(key)});
    changes.emplace_back(queue_id, std::string(key));
}

void detail::StoreState::clear_tombstone(std::uint16_t queue_id, std::string_view key) {
    auto it = tombstones.find({queue_id, std::string(key)});
    if (it == tombstones.end()) return;
    tombstone_expiry.erase({it->second.until, queue_id, it->first.second});
    tombstones.erase(it);
}

void detail::StoreState::expire_tombstones(Millis to) {
    while (!tombstone_expiry.empty() && std::get<0>(*tombstone_expiry.begin()) <= to) {
        auto [until, queue_id, key] = *tombstone_expiry.begin();
        tombstone_expiry.erase(tombstone_expiry.begin());
        tombstones.erase({queue_id, key});
        if (table.find(queue_id, key) == nullptr) changes.emplace_back(queue_id, std::move(key));
    }
}

// ---------------------------------------------------------------- time

void detail::StoreState::expire(Queue& q, Millis to) {
    while (!q.taken.empty() && q.taken.begin()->aux <= to) {
        Task* t = &*q.taken.begin();
        before_change(t);
        const Millis lease_until = t->aux;
        q.taken.erase(q.taken.begin());
        drop_lease(t);
        ++q.counters.lease_expiries;
        after_failed_attempt(q, t, lease_until);
        bump(t);
        mark_changed(t);
    }
    while (!q.delayed.empty() && q.delayed.begin()->aux <= to) {
        // The end of a delay is no write: status stays ready, so no version bump.
        Task* t = &*q.delayed.begin();
        before_change(t);
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
    if (fork) {
        // A fork leaves the queues that do not opt in as they are: their time moves on
        // when the majority's entries arrive.
        std::vector<std::uint16_t> due;
        for (auto it = calendar.begin(); it != calendar.end() && it->first <= to; ++it)
            if (queues[it->second]->settings.autonomous) due.push_back(it->second);
        for (std::uint16_t id : due) {
            expire(*queues[id], to);
            update_calendar(*queues[id]);
        }
        return;
    }
    while (!calendar.empty() && calendar.begin()->first <= to) {
        Queue& q = *queues[calendar.begin()->second];
        expire(q, to);
        update_calendar(q);
    }
    expire_tombstones(to);
}

}  // namespace dueq::queue
