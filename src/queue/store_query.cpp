// Store: reads. None of these change state; the ones that take `now` answer as if
// advance(now) had run where that is cheap to do (see each one).
#include <algorithm>

#include "queue/store_impl.h"

namespace dueq::queue {

using detail::kNoEvent;
using detail::sat_add;
using detail::State;
using Task = detail::Task;
using Queue = detail::Queue;

QueueSettings Store::settings(std::string_view queue) const {
    if (const Queue* q = impl_->find_queue(queue)) return q->settings;
    return impl_->base_settings();
}

QueueSettings Store::default_settings() const {
    return impl_->base_settings();
}

std::optional<TaskView> Store::get(std::string_view queue, std::string_view key) const {
    const Queue* q = impl_->find_queue(queue);
    if (q == nullptr) return std::nullopt;
    const Task* t = impl_->table.find(q->id, key);
    if (t == nullptr) return std::nullopt;
    TaskView v;
    v.queue = q->name;
    v.key = std::string(t->key());
    v.payload = std::string(t->payload());
    v.status = detail::status_of(t->state());
    v.time = t->time;
    v.attempts = static_cast<std::uint32_t>(t->attempts);
    v.version = t->version;
    v.hlc = t->hlc;
    switch (t->state()) {
        case State::taken:
            if (const detail::LeaseRec* rec = impl_->lease_of(t)) {
                v.lease = rec->lease;
                v.owner = rec->owner;
                v.release_on_disconnect = rec->release_on_disconnect;
            }
            v.lease_until = t->aux;
            break;
        case State::delayed:
            v.not_before = t->aux;
            break;
        case State::done:
            v.done_until = t->aux;
            break;
        case State::ready:
        case State::buried:
            break;
    }
    return v;
}

// Counts reflect the last apply()/advance(); the due figures are computed at `now`.
QueueStats Store::stats(std::string_view queue, Millis now, std::uint64_t count_cap) const {
    QueueStats st;
    const Queue* q = impl_->find_queue(queue);
    if (q == nullptr) return st;
    st.ready = q->ready.size() + q->delayed.size();
    st.taken = q->taken.size();
    st.buried = q->buried.size();
    st.done = q->done.size();
    if (q->ready.empty()) return st;
    const Task& first = *q->ready.begin();
    st.next_due = first.time - q->settings.lead_ms;
    if (first.time < now) st.oldest_late = first.time;
    // Without order statistics in the tree this is a walk; the cap keeps a stats call on a
    // ten-million-task store from costing a full scan.
    const Millis horizon = sat_add(now, q->settings.lead_ms);
    for (auto it = q->ready.begin(); it != q->ready.end() && it->time <= horizon; ++it) {
        if (st.due_now == count_cap) {
            st.due_now_capped = true;
            break;
        }
        ++st.due_now;
        // Late tasks are the front of the due order, so they are counted on the way.
        if (it->time < now) ++st.late_now;
    }
    st.late_now_capped = st.due_now_capped && st.late_now == st.due_now;
    return st;
}

namespace {
// Taken tasks are listed by lease_until and done ones by when retention removes them
// (both kept in `aux`); the others by time.
Millis list_order(const Task& t, ListStatus status) {
    return status == ListStatus::taken || status == ListStatus::done ? Millis(t.aux) : t.time;
}

// Whether `t` is in the listing of `status` at `now`.
bool listed(const Task& t, ListStatus status, Millis now) {
    switch (status) {
        case ListStatus::ready:
            return t.state() == State::ready;
        case ListStatus::late:
            return t.state() == State::ready && t.time < now;
        case ListStatus::taken:
            return t.state() == State::taken;
        case ListStatus::buried:
            return t.state() == State::buried;
        case ListStatus::done:
            return t.state() == State::done;
    }
    return false;
}

// Calls fn with the tree `status` lists from.
template <class Fn>
void with_list_tree(const Queue& q, ListStatus status, Fn&& fn) {
    switch (status) {
        case ListStatus::taken:
            return fn(q.taken);
        case ListStatus::done:
            return fn(q.done);
        case ListStatus::buried:
            return fn(q.buried);
        case ListStatus::ready:
        case ListStatus::late:
            return fn(q.ready);
    }
}
}  // namespace

ListPage Store::list(std::string_view queue, ListStatus status,
                     const std::optional<std::pair<Millis, std::string>>& after, std::size_t limit,
                     Millis now) const {
    ListPage page;
    const Queue* q = impl_->find_queue(queue);
    if (q == nullptr || limit == 0) return page;
    with_list_tree(*q, status, [&](const auto& tree) {
        using Probe = typename std::decay_t<decltype(tree)>::probe_type;
        auto it = after ? tree.upper_bound(detail::OrderKey{after->first, after->second}, Probe{})
                        : tree.begin();
        for (; it != tree.end(); ++it) {
            if (status == ListStatus::late && it->time >= now) break;
            if (page.tasks.size() == limit) {
                page.more = true;
                break;
            }
            const bool taken = it->state() == State::taken;
            page.tasks.push_back(ListedTask{std::string(it->key()), detail::status_of(it->state()),
                                            it->time, static_cast<std::uint32_t>(it->attempts),
                                            taken ? Millis(it->aux) : 0, list_order(*it, status)});
        }
    });
    return page;
}

std::optional<Millis> Store::list_position(std::string_view queue, ListStatus status,
                                           std::string_view key, Millis now) const {
    const Task* t = impl_->find_task(queue, key);
    if (t == nullptr || !listed(*t, status, now)) return std::nullopt;
    return list_order(*t, status);
}

QueueCounters Store::counters(std::string_view queue) const {
    const Queue* q = impl_->find_queue(queue);
    return q ? q->counters : QueueCounters{};
}

std::vector<std::string> Store::queue_names() const {
    std::vector<std::string> names;
    names.reserve(impl_->queues_by_name.size());
    for (const auto& [name, q] : impl_->queues_by_name)
        names.push_back(name);
    return names;
}

std::size_t Store::task_count() const {
    return impl_->table.size();
}

namespace {

// Earliest event in one queue strictly after `now`. Transitions already due at `now`
// but not yet applied by advance() are not events "after now"; has_due() sees them.
Millis next_event_in(const Queue& q, Millis now) {
    Millis at = kNoEvent;
    const Millis horizon = sat_add(now, q.settings.lead_ms);
    auto r = q.ready.upper_bound(horizon, detail::TimeProbe{});
    if (r != q.ready.end()) at = std::min(at, r->time - q.settings.lead_ms);
    for (const detail::AuxTree* tree : {&q.taken, &q.delayed, &q.done}) {
        auto it = tree->upper_bound(now, detail::AuxProbe{});
        if (it != tree->end()) at = std::min(at, it->aux);
    }
    return at;
}

}  // namespace

std::optional<Millis> Store::next_event(std::string_view queue, Millis now) const {
    const Queue* q = impl_->find_queue(queue);
    if (q == nullptr) return std::nullopt;
    Millis at = next_event_in(*q, now);
    if (at == kNoEvent) return std::nullopt;
    return at;
}

std::optional<Millis> Store::next_event_any(Millis now) const {
    Millis at = kNoEvent;
    for (const Queue* q : impl_->queues)
        at = std::min(at, next_event_in(*q, now));
    if (at == kNoEvent) return std::nullopt;
    return at;
}

std::vector<SessionId> Store::lease_holders() const {
    std::vector<SessionId> holders;
    const auto& leases = impl_->session_leases;
    for (auto it = leases.begin(); it != leases.end();) {
        holders.push_back(it->session);
        if (it->session == ~SessionId(0)) break;
        it = leases.lower_bound({it->session + 1, 0, nullptr});
    }
    return holders;
}

bool Store::holds_leases(SessionId session) const {
    auto it = impl_->session_leases.lower_bound({session, 0, nullptr});
    return it != impl_->session_leases.end() && it->session == session;
}

bool Store::has_due(std::string_view queue, Millis now) const {
    const Queue* q = impl_->find_queue(queue);
    if (q == nullptr) return false;
    now = std::max(now, impl_->now);
    const Millis horizon = sat_add(now, q->settings.lead_ms);
    if (!q->ready.empty() && q->ready.begin()->time <= horizon) return true;
    // Transitions advance(now) would make first. After advance(now) both loops end at
    // once; before it they cost one step per pending transition, which the next apply
    // pays anyway.
    const std::uint32_t max = q->settings.max_attempts;
    for (auto it = q->taken.begin(); it != q->taken.end() && it->aux <= now; ++it) {
        bool buries = max != 0 && it->attempts >= max;
        if (!buries && it->time <= horizon) return true;
    }
    for (auto it = q->delayed.begin(); it != q->delayed.end() && it->aux <= now; ++it) {
        if (it->time <= horizon) return true;
    }
    return false;
}

std::uint64_t Store::count_due(std::string_view queue, Millis now, std::uint64_t limit) const {
    const Queue* q = impl_->find_queue(queue);
    if (q == nullptr) return 0;
    now = std::max(now, impl_->now);
    const Millis horizon = sat_add(now, q->settings.lead_ms);
    // Tasks of a moving bucket are not counted: a take passes over them, so a parked take
    // woken for them would find nothing and park again, over and over.
    auto hidden = [&](const Task& t) { return impl_->hidden_from_take(*q, t); };
    std::uint64_t n = 0;
    for (auto it = q->ready.begin(); n < limit && it != q->ready.end() && it->time <= horizon;
         ++it)
        n += !hidden(*it);
    const std::uint32_t max = q->settings.max_attempts;
    for (auto it = q->taken.begin(); n < limit && it != q->taken.end() && it->aux <= now; ++it)
        if (!(max != 0 && it->attempts >= max) && it->time <= horizon && !hidden(*it)) ++n;
    for (auto it = q->delayed.begin(); n < limit && it != q->delayed.end() && it->aux <= now;
         ++it)
        if (it->time <= horizon && !hidden(*it)) ++n;
    return n;
}

namespace {
// Node sizes of the standard containers are estimates (three pointers and a color for a
// tree node, one pointer plus the hash for an unordered node).
constexpr std::size_t kTreeNode = 32;
constexpr std::size_t kHashNode = 16;

// What the store holds beside its task records: the key table, leases, sessions, the
// calendar and the queues. O(queues).
std::size_t index_bytes(const detail::StoreState& s) {
    std::size_t bytes = sizeof(detail::StoreState) + s.table.memory_bytes();
    bytes += s.leases.size() * (kHashNode + sizeof(const Task*) + sizeof(detail::LeaseRec));
    bytes += s.leases.bucket_count() * sizeof(void*);
    bytes += s.session_leases.size() * (kTreeNode + sizeof(detail::SessionLease));
    bytes += s.calendar.size() * (kTreeNode + sizeof(std::pair<Millis, std::uint16_t>));
    for (const Queue* q : s.queues)
        bytes += sizeof(Queue) + q->name.capacity() + kTreeNode + sizeof(void*);
    // Keys of deleted tasks are remembered for a while; their bytes are not counted (that
    // would walk them), which deleting the task's record more than makes up for.
    bytes += s.tombstones.size() *
             (2 * kTreeNode + sizeof(*s.tombstones.begin()) + sizeof(*s.tombstone_expiry.begin()));
    return bytes;
}
}  // namespace

std::size_t Store::overhead_bytes() const {
    const auto& s = *impl_;
    // Task records: what the arena reserved minus the key and payload bytes in it
    // (so rounding, free blocks and unused slab tails count as overhead).
    std::size_t bytes = index_bytes(s) + s.arena.reserved_bytes() - s.arena.content_bytes;
    bytes += s.changes.capacity() * sizeof(s.changes[0]);
    for (const auto& c : s.changes)
        bytes += c.second.capacity() > 15 ? c.second.capacity() : 0;
    return bytes;
}

// Unlike overhead_bytes(), constant time in the number of tasks and of changes: the
// leader asks before every write it admits.
std::size_t Store::memory_bytes() const {
    return index_bytes(*impl_) + impl_->arena.used_bytes();
}

std::size_t Store::region_bytes() const {
    return impl_->region.slab_bytes_in_use();
}

std::size_t Store::region_limit_bytes() const {
    const std::size_t reserved = impl_->region.reserved_bytes();
    return reserved != 0 ? reserved : detail::TaskRegion::kMaxBytes;
}

std::optional<std::size_t> Store::content_bytes(std::string_view queue,
                                                std::string_view key) const {
    const Task* t = impl_->find_task(queue, key);
    if (t == nullptr) return std::nullopt;
    return t->key().size() + t->payload().size();
}

}  // namespace dueq::queue
