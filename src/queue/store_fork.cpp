// Store: the fork an autonomous node serves from while it is cut off (docs/autonomy.md).
//
// The fork is the committed state, changed in place by the node's own commands, with a
// journal that keeps the state before the fork of every task it touches. Rolling back
// puts those tasks back, so the store is again exactly the replica the majority's log
// continues from; what the fork did lives on in the node's overlay until it is merged.
// This costs memory only for what the fork touches, and nothing when no fork is on.
//
// overlay record: [1, task (bin) | nil, hlc, base_hlc]
#include "queue/msgpack_fields.h"
#include "queue/store_impl.h"

namespace dueq::queue {

using Task = detail::Task;
using Queue = detail::Queue;

namespace {
constexpr std::uint64_t kOverlayFormat = 1;
}  // namespace

std::string encode_overlay_record(const OverlayRecord& r) {
    std::string out;
    StringSink sink{out};
    detail::Packer p(sink);
    p.pack_array(4);
    p.pack(kOverlayFormat);
    if (r.task) {
        detail::pack_bytes(p, *r.task);
    } else {
        p.pack_nil();
    }
    p.pack(r.hlc);
    p.pack(r.base_hlc);
    return out;
}

std::optional<OverlayRecord> decode_overlay_record(std::string_view bytes) {
    const msgpack::unpack_limit limit(
        /*array=*/4, /*map=*/0, /*str=*/0,
        /*bin=*/limits::kRecordPayloadBytes + limits::kRecordTaskBytes, /*ext=*/0,
        /*depth=*/1);
    auto oh = detail::unpack_whole(bytes, limit);
    if (!oh) return std::nullopt;
    std::uint32_t n = 0;
    const msgpack::object* a = detail::array_items(oh->get(), &n);
    std::uint64_t format = 0;
    if (n != 4 || !detail::read_uint(a[0], 255, &format) || format != kOverlayFormat)
        return std::nullopt;
    OverlayRecord r;
    if (!detail::read_optional(a[1], &r.task, detail::read_string) ||
        !detail::read_uint(a[2], UINT64_MAX, &r.hlc) ||
        !detail::read_uint(a[3], UINT64_MAX, &r.base_hlc))
        return std::nullopt;
    return r;
}

void detail::StoreState::journal(std::uint16_t queue_id, std::string_view key, const Task* t) {
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

bool Store::fork(LeaseId lease_base) {
    auto& s = *impl_;
    if (s.fork || !s.changes.empty() || (lease_base & kAutonomousLeases) == 0) return false;
    auto j = std::make_unique<detail::ForkJournal>();
    j->now = s.now;
    j->next_lease = s.next_lease;
    for (const Queue* q : s.queues)
        j->late_credit.push_back(q->late_credit);
    s.fork = std::move(j);
    s.next_lease = lease_base;
    return true;
}

bool Store::forked() const {
    return impl_->fork != nullptr;
}

std::optional<std::uint64_t> Store::tombstone_hlc(std::string_view queue,
                                                  std::string_view key) const {
    const Queue* q = impl_->find_queue(queue);
    if (q == nullptr || impl_->table.find(q->id, key)) return std::nullopt;
    return impl_->deletion_hlc(q->id, key);
}

void Store::drain_fork(const std::function<void(std::string_view queue, std::string_view key,
                                                const OverlayRecord&)>& fn) {
    auto& s = *impl_;
    if (!s.fork) return;
    std::vector<std::pair<std::uint16_t, std::string>> changes;
    changes.swap(s.changes);
    for (auto& entry : changes) {
        const auto& [queue_id, key] = entry;
        const Queue& q = *s.queues[queue_id];
        Task* t = s.table.find(queue_id, key);
        OverlayRecord r;
        auto before = s.fork->before.find(entry);
        if (before != s.fork->before.end()) r.base_hlc = before->second.hlc;
        if (t == nullptr) {
            auto at = s.fork->deleted_at.find(entry);
            r.hlc = at != s.fork->deleted_at.end() ? at->second : r.base_hlc + 1;
        } else if (t->dirty) {
            t->dirty = 0;
            r.task = s.encode_task(*t);
            r.hlc = t->hlc;
        } else {
            continue;  // listed twice: reported already
        }
        fn(q.name, key, r);
    }
    changes.clear();  // as drain_changes: the capacity serves the next command
    if (s.changes.empty()) s.changes.swap(changes);
}

void Store::rollback() {
    auto& s = *impl_;
    if (!s.fork) return;
    std::unique_ptr<detail::ForkJournal> j = std::move(s.fork);
    for (auto& [qk, before] : j->before) {
        Queue& q = *s.queues[qk.first];
        if (Task* t = s.table.find(qk.first, qk.second)) s.remove_task(q, t, false);
        if (before.task) s.load_task(q.name, qk.second, *before.task);
    }
    for (auto& [queue_id, key] : s.changes)
        if (Task* t = s.table.find(queue_id, key)) t->dirty = 0;
    s.changes.clear();
    s.now = j->now;
    s.next_lease = j->next_lease;
    for (std::size_t id = 0; id < s.queues.size(); ++id) {
        s.queues[id]->late_credit = id < j->late_credit.size() ? j->late_credit[id] : 0;
        s.update_calendar(*s.queues[id]);
    }
}

bool Store::load_overlay(std::string_view queue, std::string_view key, const OverlayRecord& r) {
    auto& s = *impl_;
    if (!s.fork) return false;
    if (r.task) {
        Task* t = s.install_task(queue, key, *r.task, true);
        if (t == nullptr) return false;
        t->hlc = r.hlc;
        return true;
    }
    Queue* q = s.find_queue(queue);
    Task* t = q ? s.table.find(q->id, key) : nullptr;
    if (t == nullptr) return true;
    s.remove_task(*q, t, true);
    s.fork->deleted_at[{q->id, std::string(key)}] = r.hlc;
    s.update_calendar(*q);
    return true;
}

}  // namespace dueq::queue
