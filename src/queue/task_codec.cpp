// Store: persistence. The encodings of a task and of the store's meta record, the change
// list storage drains, and loading both back on restart.
//
// task (queue and key are the storage key, not repeated here):
//   [1, state, time, aux, hlc, version, attempts, payload(bin)]            not taken
//   [1, state, time, aux, hlc, version, attempts, payload, lease, owner, rod]  taken
//   state: 0 ready, 1 taken, 2 buried, 3 done, 4 ready but held back until aux
// a deleted key (a tombstone, kept until `until`):
//   [2, hlc, until]
// meta:
//   [1, now, next_lease, [[queue, lead_ms, ttr_ms, retention_ms, max_attempts,
//                          late_share, late_credit, autonomous], ...],
//    [lead_ms, ttr_ms, retention_ms, max_attempts, late_share, autonomous]]
//   (settings nil = not declared; older metas lack the defaults, and `autonomous`)
#include <algorithm>
#include <array>
#include <stdexcept>

#include "queue/msgpack_fields.h"
#include "queue/store_impl.h"

namespace dueq::queue {

using detail::State;
using Task = detail::Task;
using Queue = detail::Queue;

namespace {

constexpr std::uint64_t kTaskFormat = 1;
constexpr std::uint64_t kTombstoneFormat = 2;

// A tombstone record, or nullopt if `root` is not one.
std::optional<detail::Tombstone> decode_tombstone(const msgpack::object& root) {
    std::uint32_t n = 0;
    const msgpack::object* a = detail::array_items(root, &n);
    std::uint64_t format = 0;
    detail::Tombstone t;
    if (n != 3 || !detail::read_uint(a[0], 255, &format) || format != kTombstoneFormat ||
        !detail::read_uint(a[1], UINT64_MAX, &t.hlc) || !detail::read_int(a[2], &t.until))
        return std::nullopt;
    return t;
}
constexpr std::uint64_t kMetaFormat = 1;
// Loads smaller than this fault their memory in as they go: setting slabs aside pays
// only when there are hundreds of them.
constexpr std::size_t kPrefaultFrom = 64u << 20;

msgpack::unpack_limit task_limits() {
    return msgpack::unpack_limit(/*array=*/16, /*map=*/0, /*str=*/detail::kMaxPayloadBytes,
                                 /*bin=*/detail::kMaxPayloadBytes, /*ext=*/0, /*depth=*/2);
}

msgpack::unpack_limit meta_limits() {
    return msgpack::unpack_limit(/*array=*/detail::kMaxQueues + 1, /*map=*/0,
                                 /*str=*/detail::kMaxKeyBytes, /*bin=*/detail::kMaxKeyBytes,
                                 /*ext=*/0, /*depth=*/4);
}

struct DecodedTask {
    State state = State::ready;
    Millis time = 0, aux = 0;
    std::uint64_t hlc = 0, version = 0, attempts = 0;
    std::string_view payload;
    detail::LeaseRec lease;
};

bool decode_task(const msgpack::object& root, DecodedTask* d) {
    std::uint32_t n = 0;
    const msgpack::object* a = detail::array_items(root, &n);
    if (n != 8 && n != 11) return false;
    std::uint64_t format = 0, state = 0;
    if (!detail::read_uint(a[0], 255, &format) || format != kTaskFormat) return false;
    if (!detail::read_uint(a[1], 4, &state)) return false;
    d->state = static_cast<State>(state);
    if (!detail::read_int(a[2], &d->time) || !detail::read_int(a[3], &d->aux)) return false;
    // Nothing the store keeps lies outside (task.h); a record that does is corrupt.
    for (Millis m : {d->time, d->aux})
        if (m < -detail::kMaxStoredTime || m > detail::kMaxStoredTime) return false;
    if (!detail::read_uint(a[4], UINT64_MAX, &d->hlc)) return false;
    if (!detail::read_uint(a[5], detail::kMaxVersion, &d->version)) return false;
    if (!detail::read_uint(a[6], detail::kMaxAttemptsCount, &d->attempts)) return false;
    if (!detail::read_bytes(a[7], &d->payload)) return false;
    const bool taken = d->state == State::taken;
    if (taken != (n == 11)) return false;
    if (taken) {
        if (!detail::read_uint(a[8], UINT64_MAX, &d->lease.lease) ||
            !detail::read_uint(a[9], UINT64_MAX, &d->lease.owner) ||
            !detail::read_bool(a[10], &d->lease.release_on_disconnect)) {
            return false;
        }
    }
    return true;
}

struct DecodedQueue {
    std::string name;
    detail::DeclaredSettings declared;
    std::int64_t late_credit = 0;
};

// Five fields: lead_ms, ttr_ms, retention_ms, max_attempts, late_share (each nil if unset).
bool decode_declared(const msgpack::object* a, detail::DeclaredSettings& d) {
    // late_share as Declare accepts it (0..1): any other value, NaN included, is corrupt.
    return detail::read_optional(a[0], &d.lead_ms, detail::read_int) &&
           detail::read_optional(a[1], &d.ttr_ms, detail::read_int) &&
           detail::read_optional(a[2], &d.retention_ms, detail::read_int) &&
           detail::read_optional(a[3], &d.max_attempts, detail::read_uint_as<std::uint32_t>) &&
           detail::read_optional(a[4], &d.late_share, detail::read_double) &&
           (!d.late_share || (*d.late_share >= 0.0 && *d.late_share <= 1.0));
}

void pack_declared(detail::Packer& p, const detail::DeclaredSettings& d) {
    detail::pack_optional(p, d.lead_ms);
    detail::pack_optional(p, d.ttr_ms);
    detail::pack_optional(p, d.retention_ms);
    detail::pack_optional(p, d.max_attempts);
    detail::pack_optional(p, d.late_share);
}

bool decode_queue(const msgpack::object& o, DecodedQueue* q) {
    std::uint32_t n = 0;
    const msgpack::object* a = detail::array_items(o, &n);
    if (n != 7 && n != 8) return false;
    return detail::read_string(a[0], &q->name) && !q->name.empty() &&
           decode_declared(a + 1, q->declared) && detail::read_int(a[6], &q->late_credit) &&
           (n == 7 || detail::read_optional(a[7], &q->declared.autonomous, detail::read_bool));
}

}  // namespace

std::string detail::StoreState::encode_task(const Task& t) const {
    std::string out;
    out.reserve(64 + t.payload_len);
    StringSink sink{out};
    detail::Packer p(sink);
    const detail::LeaseRec* rec = t.state() == State::taken ? lease_of(&t) : nullptr;
    p.pack_array(rec ? 11 : 8);
    p.pack(kTaskFormat);
    p.pack(static_cast<std::uint64_t>(t.state()));
    p.pack(t.time);
    p.pack(t.aux);
    p.pack(t.hlc);
    p.pack(static_cast<std::uint64_t>(t.version));
    p.pack(static_cast<std::uint64_t>(t.attempts));
    detail::pack_bytes(p, t.payload());
    if (rec) {
        p.pack(rec->lease);
        p.pack(rec->owner);
        p.pack(rec->release_on_disconnect);
    }
    return out;
}

std::string detail::StoreState::encode_tombstone(const Tombstone& t) {
    std::string out;
    StringSink sink{out};
    detail::Packer p(sink);
    p.pack_array(3);
    p.pack(kTombstoneFormat);
    p.pack(t.hlc);
    p.pack(t.until);
    return out;
}

bool detail::StoreState::load_task(std::string_view queue, std::string_view key,
                                   std::string_view encoded) {
    load_zone.clear();
    auto o = detail::unpack_whole_in(load_zone, encoded, task_limits());
    if (!o) return false;
    auto tomb = decode_tombstone(*o);
    if (!tomb) return install_task(queue, key, *o, false) != nullptr;
    if (queue.empty() || queue.size() > detail::kMaxKeyBytes || key.empty() ||
        key.size() > detail::kMaxKeyBytes)
        return false;
    Queue* q = get_or_create_queue(queue);
    if (q == nullptr) return false;
    if (Task* old = table.find(q->id, key)) {
        link_unlinked();  // `old` may wait there: it must be in its tree to leave it
        remove_task(*q, old, false);
    }
    clear_tombstone(q->id, key);
    tombstones[{q->id, std::string(key)}] = *tomb;
    tombstone_expiry.insert({tomb->until, q->id, std::string(key)});
    return true;
}

detail::Task* detail::StoreState::install_task(std::string_view queue, std::string_view key,
                                               std::string_view encoded, bool record_change) {
    auto oh = detail::unpack_whole(encoded, task_limits());
    return oh ? install_task(queue, key, oh->get(), record_change) : nullptr;
}

detail::Task* detail::StoreState::install_task(std::string_view queue, std::string_view key,
                                               const msgpack::object& unpacked,
                                               bool record_change) {
    if (queue.empty() || queue.size() > detail::kMaxKeyBytes) return nullptr;
    if (key.empty() || key.size() > detail::kMaxKeyBytes) return nullptr;
    DecodedTask d;
    if (!decode_task(unpacked, &d)) return nullptr;
    if (d.payload.size() > detail::kMaxPayloadBytes) return nullptr;
    Queue* q = get_or_create_queue(queue);
    if (q == nullptr) return nullptr;
    if (Task* old = table.find(q->id, key)) {
        link_unlinked();  // `old` may wait there: it must be in its tree to leave it
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
    if (loading && !fork)
        add_unlinked(t);
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
    if (unlinked.empty()) update_calendar(*q);
    return t;
}

void detail::StoreState::add_unlinked(Task* t) {
    if (unlinked.size() >= UINT32_MAX) link_unlinked();  // an item's seq is 32 bits
    const bool by_time = t->state() == State::ready || t->state() == State::buried;
    unlinked_items.push_back({by_time ? t->time : t->aux, std::uint32_t(unlinked.size()),
                              std::uint16_t(t->queue_id), std::uint8_t(t->state())});
    unlinked.push_back(t);
}

void detail::StoreState::link_unlinked() {
    if (unlinked.empty()) return;
    auto& items = unlinked_items;
    std::sort(items.begin(), items.end(), [](const UnlinkedItem& a, const UnlinkedItem& b) {
        return std::tie(a.queue_id, a.state, a.at, a.seq) <
               std::tie(b.queue_id, b.state, b.at, b.seq);
    });
    // Each run of items with one queue and state fills one tree. An empty tree (usually,
    // in a restart) is built from the run at once if the run is in the tree's order (ties
    // on time are in load order, which is key order when RocksDB hands the records).
    // Otherwise the tasks go in one by one, each most likely last. In time order the tasks
    // are all over memory: the pointer of each is asked for a few items ahead, and the
    // tree's build asks for the tasks themselves.
    constexpr std::size_t kAhead = 8;
    auto same_tree = [&](std::size_t a, std::size_t b) {
        return items[a].queue_id == items[b].queue_id && items[a].state == items[b].state;
    };
    // Room for the longest run only: one per task would be 8 more bytes per task at peak.
    std::size_t longest = 0;
    for (std::size_t begin = 0, i = 0; i <= items.size(); ++i)
        if (i == items.size() || !same_tree(i, begin)) {
            longest = std::max(longest, i - begin);
            begin = i;
        }
    std::vector<Task*, HugePageAllocator<Task*>> run;
    run.reserve(longest);
    for (std::size_t begin = 0; begin < items.size();) {
        std::size_t end = begin;
        run.clear();
        for (; end < items.size() && same_tree(end, begin); ++end) {
            if (end + kAhead < items.size()) __builtin_prefetch(&unlinked[items[end + kAhead].seq]);
            run.push_back(unlinked[items[end].seq]);
        }
        with_tree(*queues[items[begin].queue_id], State(items[begin].state), [&](auto& tree) {
            if (tree.assign_sorted(run.data(), run.size())) return;
            for (Task* t : run)
                tree.insert(tree.end(), *t);
        });
        begin = end;
    }
    decltype(run)().swap(run);
    decltype(unlinked)().swap(unlinked);
    decltype(unlinked_items)().swap(unlinked_items);
    for (auto& q : queues)
        if (q) update_calendar(*q);
}

std::string detail::StoreState::encode_meta() const {
    // While forked, the committed state's values: a fork's are never written as applied
    // state (its lease ids, for one, are from the autonomous space).
    std::string out;
    StringSink sink{out};
    detail::Packer p(sink);
    p.pack_array(5);
    p.pack(kMetaFormat);
    p.pack(fork ? fork->now : now);
    p.pack(fork ? fork->next_lease : next_lease);
    p.pack_array(static_cast<std::uint32_t>(queues_by_name.size()));
    for (const auto& [name, q] : queues_by_name) {
        std::int64_t credit = q->late_credit;
        if (fork) credit = q->id < fork->late_credit.size() ? fork->late_credit[q->id] : 0;
        p.pack_array(8);
        detail::pack_text(p, name);
        pack_declared(p, q->declared);
        p.pack(credit);
        detail::pack_optional(p, q->declared.autonomous);
    }
    p.pack_array(6);  // the declared defaults (older metas end before them)
    pack_declared(p, declared_defaults);
    detail::pack_optional(p, declared_defaults.autonomous);
    return out;
}

bool detail::StoreState::load_meta(std::string_view encoded) {
    auto oh = detail::unpack_whole(encoded, meta_limits());
    if (!oh) return false;
    std::uint32_t n = 0;
    const msgpack::object* a = detail::array_items(oh->get(), &n);
    if (n != 4 && n != 5) return false;
    std::uint64_t format = 0, lease = 0;
    Millis at = 0;
    if (!detail::read_uint(a[0], 255, &format) || format != kMetaFormat) return false;
    if (!detail::read_int(a[1], &at) || !detail::read_uint(a[2], UINT64_MAX, &lease)) {
        return false;
    }
    std::uint32_t nq = 0;
    const msgpack::object* qs = detail::array_items(a[3], &nq);
    if (a[3].type != msgpack::type::ARRAY) return false;
    std::vector<DecodedQueue> decoded(nq);
    for (std::uint32_t i = 0; i < nq; ++i) {
        if (!decode_queue(qs[i], &decoded[i])) return false;
    }
    detail::DeclaredSettings defaults;
    if (n == 5) {
        std::uint32_t nd = 0;
        const msgpack::object* d = detail::array_items(a[4], &nd);
        if ((nd != 5 && nd != 6) || !decode_declared(d, defaults)) return false;
        if (nd == 6 && !detail::read_optional(d[5], &defaults.autonomous, detail::read_bool))
            return false;
    }
    // Everything decoded: only now touch the store.
    for (auto& dq : decoded) {
        if (find_queue(dq.name) == nullptr && queues.size() >= detail::kMaxQueues) return false;
    }
    // Log times are clamped on the way in (store_impl.h); a meta written before they
    // were must not bring a larger one back.
    now = std::max(now, std::min(at, detail::kMaxTime));
    next_lease = std::max(next_lease, lease);
    declared_defaults = defaults;
    for (Queue* q : queues)
        recompute_settings(*q);
    for (auto& dq : decoded) {
        Queue* q = get_or_create_queue(dq.name);
        q->declared = dq.declared;
        q->late_credit = dq.late_credit;
        recompute_settings(*q);
    }
    return true;
}

// ---------------------------------------------------------------- Store

void Store::drain_changes(
    const std::function<void(std::string_view queue, std::string_view key,
                             std::optional<std::string>&& encoded_task)>& fn) {
    if (impl_->fork) return;  // the fork's changes are drain_fork's
    std::vector<std::pair<std::uint16_t, std::string>> changes;
    changes.swap(impl_->changes);
    // A key is listed once per time it went from clean to changed; a task that is there
    // and already clean was reported by an earlier entry of this same drain.
    std::set<std::pair<std::uint16_t, std::string_view>> gone;  // reported absent keys
    // The changed tasks were last touched many entries ago and are out of cache: finding
    // each one waited on memory twice, for its table slot and for the task (18% of a
    // follower's event loop at put 16 x 32). Both are asked for some keys ahead.
    constexpr std::size_t kSlotAhead = 8, kTaskAhead = 4;
    std::array<std::uint64_t, kSlotAhead> hashes{};  // by position % kSlotAhead
    auto load_slot = [&](std::size_t i) {
        if (i < changes.size())
            hashes[i % kSlotAhead] = impl_->table.prefetch(changes[i].first, changes[i].second);
    };
    for (std::size_t i = 0; i < std::min(kSlotAhead, changes.size()); ++i)
        load_slot(i);
    for (std::size_t i = 0; i < changes.size(); ++i) {
        if (i + kTaskAhead < changes.size())
            impl_->table.prefetch_task(hashes[(i + kTaskAhead) % kSlotAhead]);
        load_slot(i + kSlotAhead);  // takes entry i's place, whose steps are both done
        const auto& [queue_id, key] = changes[i];
        const Queue& q = *impl_->queues[queue_id];
        Task* t = impl_->table.find(queue_id, key);
        if (t == nullptr) {
            if (!gone.emplace(queue_id, key).second) continue;  // a deletion and its tombstone
            const detail::Tombstone* tomb = impl_->tombstone_of(queue_id, key);
            fn(q.name, key,
               tomb ? std::optional(detail::StoreState::encode_tombstone(*tomb)) : std::nullopt);
        } else if (t->dirty) {
            t->dirty = 0;
            fn(q.name, key, impl_->encode_task(*t));
        }
    }
    // Hand the emptied list back: its capacity serves the next changes (no allocation).
    changes.clear();
    if (impl_->changes.empty()) impl_->changes.swap(changes);
}

std::string Store::encode_meta() const {
    return impl_->encode_meta();
}

bool Store::load_meta(std::string_view encoded) {
    return impl_->load_meta(encoded);
}

void Store::begin_load(std::size_t tasks, std::size_t record_bytes) {
    impl_->table.reserve(tasks);
    impl_->unlinked.reserve(std::min<std::size_t>(tasks, std::size_t{1} << 26));
    impl_->unlinked_items.reserve(impl_->unlinked.capacity());
    impl_->loading = true;
    // A record in memory has a larger header than on disk: set aside a quarter more.
    if (record_bytes >= kPrefaultFrom) impl_->arena.reserve_spares(record_bytes / 4 * 5);
}

void Store::end_load() {
    impl_->arena.drop_spares();
    impl_->link_unlinked();
    impl_->loading = false;
}

void Store::prefetch_load(std::string_view queue, std::string_view key) const {
    prefetch_apply(queue, key);  // the slot is what a load's insert reads first, too
}

std::optional<std::uint64_t> Store::prefetch_apply(std::string_view queue,
                                                   std::string_view key) const {
    const detail::Queue* q = impl_->find_queue(queue);
    if (q == nullptr) return std::nullopt;
    return impl_->table.prefetch(q->id, key);
}

void Store::prefetch_apply_task(std::uint64_t ticket) const {
    impl_->table.prefetch_task(ticket);
}

void Store::prefetch_apply_links(std::uint64_t ticket) const {
    impl_->table.prefetch_links(ticket);
}

void Store::prefault_load() {
    // 64 MiB ahead: a reader hands over about 1 MiB of records at a time, and the memory
    // faulted in but never used stays small.
    impl_->arena.prefault_spares(32);
}

bool Store::load_task(std::string_view queue, std::string_view key, std::string_view encoded) {
    return impl_->load_task(queue, key, encoded);
}

void Store::for_each_task(const std::function<void(std::string_view queue, std::string_view key,
                                                   std::string_view encoded_task)>& fn) const {
    for (const auto& [name, q] : impl_->queues_by_name) {
        auto each = [&](const auto& tree) {
            for (const Task& t : tree)
                fn(name, t.key(), impl_->encode_task(t));
        };
        each(q->ready);
        each(q->delayed);
        each(q->taken);
        each(q->buried);
        each(q->done);
    }
    for (const auto& [qk, tomb] : impl_->tombstones)
        if (impl_->table.find(qk.first, qk.second) == nullptr)  // a fork may have re-created it
            fn(impl_->queues[qk.first]->name, qk.second,
               detail::StoreState::encode_tombstone(tomb));
}

}  // namespace dueq::queue
