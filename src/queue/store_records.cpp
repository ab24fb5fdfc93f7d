// StoreState: tasks as records. Loading a task or the meta record back, the change lists
// that storage (drain_changes) and an autonomous node's overlay (drain_fork) take, every
// task for a snapshot, and the fork's journal that keeps the records it changed so that a
// rollback can put them back. The encodings themselves are in task_codec.cpp.
#include <array>
#include <set>

#include "queue/msgpack_fields.h"
#include "queue/store_impl.h"
#include "queue/task_codec.h"

namespace dueq::queue::detail {

std::string StoreState::encode_task(const Task& t) const {
    return detail::encode_task(t, t.state() == State::taken ? lease_of(&t) : nullptr);
}

// ---------------------------------------------------------------- loading

bool StoreState::load_task(std::string_view queue, std::string_view key, std::string_view encoded) {
    load_zone.clear();
    auto o = unpack_whole_in(load_zone, encoded, task_limits());
    if (!o) return false;
    auto tomb = decode_tombstone(*o);
    if (!tomb) return install_task(queue, key, *o, false) != nullptr;
    if (queue.empty() || queue.size() > kMaxKeyBytes || key.empty() || key.size() > kMaxKeyBytes)
        return false;
    Queue* q = get_or_create_queue(queue);
    if (q == nullptr) return false;
    if (Task* old = table.find(q->id, key)) {
        if (bulk)
            bulk->link_all(*this);  // `old` may wait there: it must be in its tree to leave it
        remove_task(*q, old, false);
    }
    clear_tombstone(q->id, key);
    tombstones[{q->id, std::string(key)}] = *tomb;
    tombstone_expiry.insert({tomb->until, q->id, std::string(key)});
    return true;
}

Task* StoreState::install_task(std::string_view queue, std::string_view key,
                               std::string_view encoded, bool record_change) {
    auto oh = unpack_whole(encoded, task_limits());
    return oh ? install_task(queue, key, oh->get(), record_change) : nullptr;
}

Task* StoreState::install_task(std::string_view queue, std::string_view key,
                               const msgpack::object& unpacked, bool record_change) {
    if (queue.empty() || queue.size() > kMaxKeyBytes) return nullptr;
    if (key.empty() || key.size() > kMaxKeyBytes) return nullptr;
    DecodedTask d;
    if (!decode_task(unpacked, &d)) return nullptr;
    if (d.payload.size() > kMaxPayloadBytes) return nullptr;
    Queue* q = get_or_create_queue(queue);
    if (q == nullptr) return nullptr;
    if (Task* old = table.find(q->id, key)) {
        if (bulk)
            bulk->link_all(*this);  // `old` may wait there: it must be in its tree to leave it
        remove_task(*q, old, false);
    } else if (fork) {
        journal(q->id, key, nullptr);
    }
    Task* t = Task::create(arena, q->id, key, d.payload);
    t->time = d.time;
    t->aux = d.aux;
    t->hlc = d.hlc;
    t->version = d.version;
    t->attempts = d.attempts;
    t->set_state(d.state);
    table.insert(t);
    if (bulk && !fork)
        bulk->add(*this, t);
    else
        link(*q, t);
    if (d.state == State::taken) {
        grant_lease(t, d.lease);
        // Meta and tasks are written together, so this only matters for a meta that is
        // missing: lease ids must never be handed out twice. A lease an autonomous node
        // granted is from its own space, which the majority's counter never reaches.
        if (d.lease.lease >= next_lease && d.lease.lease < kAutonomousLeases)
            next_lease = d.lease.lease + 1;
    }
    if (record_change) mark_changed(t);
    if (!bulk || bulk->empty()) update_calendar(*q);
    return t;
}

bool StoreState::load_meta(std::string_view encoded) {
    auto m = decode_meta(encoded);
    if (!m) return false;
    // Everything decoded: only now touch the store.
    for (auto& dq : m->queues) {
        if (find_queue(dq.name) == nullptr && queues.size() >= kMaxQueues) return false;
    }
    // Log times are clamped on the way in (store_impl.h); a meta written before they
    // were must not bring a larger one back.
    now = std::max(now, std::min(m->now, kMaxTime));
    next_lease = std::max(next_lease, m->next_lease);
    declared_defaults = m->defaults;
    membership = std::move(m->membership);
    move_bucket_count = m->move_bucket_count;
    moves.reset(std::move(m->moves));
    for (Queue* q : queues)
        recompute_settings(*q);
    for (auto& dq : m->queues) {
        Queue* q = get_or_create_queue(dq.name);
        q->declared = dq.declared;
        q->late_credit = dq.late_credit;
        recompute_settings(*q);
    }
    return true;
}

// ---------------------------------------------------------------- handing records out

void StoreState::drain_changes(
    const std::function<void(std::string_view queue, std::string_view key,
                             std::optional<std::string>&& encoded)>& fn) {
    if (fork) return;  // the fork's changes are drain_fork's
    std::vector<std::pair<std::uint16_t, std::string>> list;
    list.swap(changes);
    // A key is listed once per time it went from clean to changed; a task that is there
    // and already clean was reported by an earlier entry of this same drain.
    std::set<std::pair<std::uint16_t, std::string_view>> gone;  // reported absent keys
    // The changed tasks were last touched many entries ago and are out of cache: finding
    // each one waited on memory twice, for its table slot and for the task (18% of a
    // follower's event loop at put 16 x 32). Both are asked for some keys ahead.
    constexpr std::size_t kSlotAhead = 8, kTaskAhead = 4;
    std::array<std::uint64_t, kSlotAhead> hashes{};  // by position % kSlotAhead
    auto load_slot = [&](std::size_t i) {
        if (i < list.size()) hashes[i % kSlotAhead] = table.prefetch(list[i].first, list[i].second);
    };
    for (std::size_t i = 0; i < std::min(kSlotAhead, list.size()); ++i)
        load_slot(i);
    for (std::size_t i = 0; i < list.size(); ++i) {
        if (i + kTaskAhead < list.size())
            table.prefetch_task(hashes[(i + kTaskAhead) % kSlotAhead]);
        load_slot(i + kSlotAhead);  // takes entry i's place, whose steps are both done
        const auto& [queue_id, key] = list[i];
        const Queue& q = *queues[queue_id];
        Task* t = table.find(queue_id, key);
        if (t == nullptr) {
            if (!gone.emplace(queue_id, key).second) continue;  // a deletion and its tombstone
            const Tombstone* tomb = tombstone_of(queue_id, key);
            fn(q.name, key, tomb ? std::optional(encode_tombstone(*tomb)) : std::nullopt);
        } else if (t->dirty) {
            t->dirty = 0;
            fn(q.name, key, encode_task(*t));
        }
    }
    // Hand the emptied list back: its capacity serves the next changes (no allocation).
    list.clear();
    if (changes.empty()) changes.swap(list);
}

void StoreState::for_each_task(
    const std::function<void(std::string_view queue, std::string_view key,
                             std::string_view encoded_task)>& fn) const {
    visit_tasks([&](const Queue& q, const Task& t) { fn(q.name, t.key(), encode_task(t)); });
    for (const auto& [qk, tomb] : tombstones)
        if (table.find(qk.first, qk.second) == nullptr)  // a fork may have re-created it
            fn(queues[qk.first]->name, qk.second, encode_tombstone(tomb));
}

// ---------------------------------------------------------------- the fork

void StoreState::journal(std::uint16_t queue_id, std::string_view key, const Task* t) {
    auto k = std::make_pair(queue_id, std::string(key));
    if (fork->before.count(k) != 0) return;  // only the state before the fork counts
    ForkJournal::Before b;
    if (t != nullptr) {
        b.task = encode_task(*t);
        b.hlc = t->hlc;
    } else if (const Tombstone* tomb = tombstone_of(queue_id, key)) {
        b.hlc = tomb->hlc;  // deleted before the fork: that deletion is the key's base
    }
    fork->before.emplace(std::move(k), std::move(b));
}

bool StoreState::start_fork(LeaseId lease_base) {
    if (fork || !changes.empty() || (lease_base & kAutonomousLeases) == 0) return false;
    auto j = std::make_unique<ForkJournal>();
    j->now = now;
    j->next_lease = next_lease;
    for (const Queue* q : queues)
        j->late_credit.push_back(q->late_credit);
    fork = std::move(j);
    next_lease = lease_base;
    return true;
}

void StoreState::drain_fork(const std::function<void(std::string_view queue, std::string_view key,
                                                     const OverlayRecord&)>& fn) {
    if (!fork) return;
    std::vector<std::pair<std::uint16_t, std::string>> list;
    list.swap(changes);
    for (auto& entry : list) {
        const auto& [queue_id, key] = entry;
        const Queue& q = *queues[queue_id];
        Task* t = table.find(queue_id, key);
        OverlayRecord r;
        auto before = fork->before.find(entry);
        if (before != fork->before.end()) r.base_hlc = before->second.hlc;
        if (t == nullptr) {
            auto at = fork->deleted_at.find(entry);
            r.hlc = at != fork->deleted_at.end() ? at->second : r.base_hlc + 1;
        } else if (t->dirty) {
            t->dirty = 0;
            r.task = encode_task(*t);
            r.hlc = t->hlc;
        } else {
            continue;  // listed twice: reported already
        }
        fn(q.name, key, r);
    }
    list.clear();  // as drain_changes: the capacity serves the next command
    if (changes.empty()) changes.swap(list);
}

void StoreState::rollback() {
    if (!fork) return;
    std::unique_ptr<ForkJournal> j = std::move(fork);
    for (auto& [qk, before] : j->before) {
        Queue& q = *queues[qk.first];
        if (Task* t = table.find(qk.first, qk.second)) remove_task(q, t, false);
        if (before.task) load_task(q.name, qk.second, *before.task);
    }
    for (auto& [queue_id, key] : changes)
        if (Task* t = table.find(queue_id, key)) t->dirty = 0;
    changes.clear();
    now = j->now;
    next_lease = j->next_lease;
    for (std::size_t id = 0; id < queues.size(); ++id) {
        queues[id]->late_credit = id < j->late_credit.size() ? j->late_credit[id] : 0;
        update_calendar(*queues[id]);
    }
}

bool StoreState::load_overlay(std::string_view queue, std::string_view key,
                              const OverlayRecord& r) {
    if (!fork) return false;
    if (r.task) {
        Task* t = install_task(queue, key, *r.task, true);
        if (t == nullptr) return false;
        t->hlc = r.hlc;
        return true;
    }
    Queue* q = find_queue(queue);
    Task* t = q ? table.find(q->id, key) : nullptr;
    if (t == nullptr) return true;
    remove_task(*q, t, true);
    fork->deleted_at[{q->id, std::string(key)}] = r.hlc;
    update_calendar(*q);
    return true;
}

}  // namespace dueq::queue::detail
