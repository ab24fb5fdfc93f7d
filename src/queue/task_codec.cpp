// The encodings of the store's records (task_codec.h).
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
// overlay record (an autonomous node's write, docs/autonomy.md):
//   [1, task (bin) | nil, hlc, base_hlc]
#include "queue/task_codec.h"

#include "queue/msgpack_fields.h"

namespace dueq::queue {

namespace detail {

namespace {

constexpr std::uint64_t kTaskFormat = 1;
constexpr std::uint64_t kTombstoneFormat = 2;
constexpr std::uint64_t kMetaFormat = 1;
constexpr std::uint64_t kOverlayFormat = 1;

// The move table's bin in meta: kMaxBuckets entries with shard names, with room to spare.
constexpr std::size_t kMoveTableBytes = 16u << 20;

msgpack::unpack_limit meta_limits() {
    // The bin may be the move table: up to kMaxBuckets entries of a few bytes each.
    return msgpack::unpack_limit(/*array=*/kMaxQueues + 1, /*map=*/0,
                                 /*str=*/kMaxKeyBytes, /*bin=*/kMoveTableBytes,
                                 /*ext=*/0, /*depth=*/4);
}

// Five fields: lead_ms, ttr_ms, retention_ms, max_attempts, late_share (each nil if unset).
bool decode_declared(const msgpack::object* a, DeclaredSettings& d) {
    // late_share as Declare accepts it (0..1): any other value, NaN included, is corrupt.
    return read_optional(a[0], &d.lead_ms, read_int) && read_optional(a[1], &d.ttr_ms, read_int) &&
           read_optional(a[2], &d.retention_ms, read_int) &&
           read_optional(a[3], &d.max_attempts, read_uint_as<std::uint32_t>) &&
           read_optional(a[4], &d.late_share, read_double) &&
           (!d.late_share || (*d.late_share >= 0.0 && *d.late_share <= 1.0));
}

void pack_declared(Packer& p, const DeclaredSettings& d) {
    pack_optional(p, d.lead_ms);
    pack_optional(p, d.ttr_ms);
    pack_optional(p, d.retention_ms);
    pack_optional(p, d.max_attempts);
    pack_optional(p, d.late_share);
}

bool decode_queue(const msgpack::object& o, DecodedQueue* q) {
    std::uint32_t n = 0;
    const msgpack::object* a = array_items(o, &n);
    if (n != 7 && n != 8) return false;
    return read_string(a[0], &q->name) && !q->name.empty() && decode_declared(a + 1, q->declared) &&
           read_int(a[6], &q->late_credit) &&
           (n == 7 || read_optional(a[7], &q->declared.autonomous, read_bool));
}

// The declared defaults (a meta's fifth field).
bool decode_defaults(const msgpack::object& o, DeclaredSettings* defaults) {
    std::uint32_t nd = 0;
    const msgpack::object* d = array_items(o, &nd);
    if ((nd != 5 && nd != 6) || !decode_declared(d, *defaults)) return false;
    return nd == 5 || read_optional(d[5], &defaults->autonomous, read_bool);
}

}  // namespace

msgpack::unpack_limit task_limits() {
    return msgpack::unpack_limit(/*array=*/16, /*map=*/0, /*str=*/kMaxPayloadBytes,
                                 /*bin=*/kMaxPayloadBytes, /*ext=*/0, /*depth=*/2);
}

bool decode_task(const msgpack::object& root, DecodedTask* d) {
    std::uint32_t n = 0;
    const msgpack::object* a = array_items(root, &n);
    if (n != 8 && n != 11) return false;
    std::uint64_t format = 0, state = 0;
    if (!read_uint(a[0], 255, &format) || format != kTaskFormat) return false;
    if (!read_uint(a[1], 4, &state)) return false;
    d->state = static_cast<State>(state);
    if (!read_int(a[2], &d->time) || !read_int(a[3], &d->aux)) return false;
    // Nothing the store keeps lies outside (task.h); a record that does is corrupt.
    for (Millis m : {d->time, d->aux})
        if (m < -kMaxStoredTime || m > kMaxStoredTime) return false;
    if (!read_uint(a[4], UINT64_MAX, &d->hlc)) return false;
    if (!read_uint(a[5], kMaxVersion, &d->version)) return false;
    if (!read_uint(a[6], kMaxAttemptsCount, &d->attempts)) return false;
    if (!read_bytes(a[7], &d->payload)) return false;
    const bool taken = d->state == State::taken;
    if (taken != (n == 11)) return false;
    if (taken) {
        if (!read_uint(a[8], UINT64_MAX, &d->lease.lease) ||
            !read_uint(a[9], UINT64_MAX, &d->lease.owner) ||
            !read_bool(a[10], &d->lease.release_on_disconnect)) {
            return false;
        }
    }
    return true;
}

std::optional<Tombstone> decode_tombstone(const msgpack::object& root) {
    std::uint32_t n = 0;
    const msgpack::object* a = array_items(root, &n);
    std::uint64_t format = 0;
    Tombstone t;
    if (n != 3 || !read_uint(a[0], 255, &format) || format != kTombstoneFormat ||
        !read_uint(a[1], UINT64_MAX, &t.hlc) || !read_int(a[2], &t.until))
        return std::nullopt;
    return t;
}

std::string encode_task(const Task& t, const LeaseRec* lease) {
    std::string out;
    out.reserve(64 + t.payload_len);
    StringSink sink{out};
    Packer p(sink);
    p.pack_array(lease ? 11 : 8);
    p.pack(kTaskFormat);
    p.pack(static_cast<std::uint64_t>(t.state()));
    p.pack(t.time);
    p.pack(t.aux);
    p.pack(t.hlc);
    p.pack(static_cast<std::uint64_t>(t.version));
    p.pack(static_cast<std::uint64_t>(t.attempts));
    pack_bytes(p, t.payload());
    if (lease) {
        p.pack(lease->lease);
        p.pack(lease->owner);
        p.pack(lease->release_on_disconnect);
    }
    return out;
}

std::string encode_tombstone(const Tombstone& t) {
    std::string out;
    StringSink sink{out};
    Packer p(sink);
    p.pack_array(3);
    p.pack(kTombstoneFormat);
    p.pack(t.hlc);
    p.pack(t.until);
    return out;
}

namespace {

// The move table: [bucket_count] then [bucket, phase, peer (str), gen, next_chunk] per
// bucket, one msgpack value after another in one bin.
std::string encode_moves(const StoreState& s) {
    std::string out;
    if (s.move_bucket_count == 0) return out;
    StringSink sink{out};
    Packer p(sink);
    p.pack(s.move_bucket_count);
    for (const auto& [bucket, st] : s.moves.states()) {
        p.pack_array(5);
        p.pack(bucket);
        p.pack(static_cast<std::uint64_t>(st.phase));
        pack_text(p, st.peer);
        p.pack(st.gen);
        p.pack(st.next_chunk);
    }
    return out;
}

bool decode_moves(std::string_view bytes, DecodedMeta* m) {
    const msgpack::unpack_limit limit(/*array=*/5, /*map=*/0, /*str=*/kMaxKeyBytes, /*bin=*/0,
                                      /*ext=*/0, /*depth=*/1);
    return for_each_packed(bytes, limit, [&](const msgpack::object& o) {
        if (m->move_bucket_count == 0) {  // the first value: the bucket count
            std::uint64_t count = 0;
            if (!read_uint(o, 65536, &count) || count == 0) return false;
            m->move_bucket_count = std::uint32_t(count);
            return true;
        }
        std::uint32_t n = 0;
        const msgpack::object* a = array_items(o, &n);
        std::uint64_t bucket = 0, phase = 0, gen = 0, next = 0;
        std::string_view peer;
        if (n != 5 || !read_uint(a[0], m->move_bucket_count - 1, &bucket) ||
            !read_uint(a[1], std::uint64_t(shard::BucketPhase::dropped), &phase) ||
            !read_bytes(a[2], &peer) || !read_uint(a[3], UINT64_MAX, &gen) ||
            !read_uint(a[4], UINT32_MAX, &next))
            return false;
        m->moves[std::uint32_t(bucket)] = {static_cast<shard::BucketPhase>(phase),
                                           std::string(peer), gen, std::uint32_t(next)};
        return true;
    });
}

}  // namespace

std::string encode_meta(const StoreState& s) {
    std::string out;
    StringSink sink{out};
    Packer p(sink);
    const std::string moves = encode_moves(s);
    p.pack_array(moves.empty() ? 6 : 7);
    p.pack(kMetaFormat);
    p.pack(s.fork ? s.fork->now : s.now);
    p.pack(s.fork ? s.fork->next_lease : s.next_lease);
    p.pack_array(static_cast<std::uint32_t>(s.queues_by_name.size()));
    for (const auto& [name, q] : s.queues_by_name) {
        std::int64_t credit = q->late_credit;
        if (s.fork) credit = q->id < s.fork->late_credit.size() ? s.fork->late_credit[q->id] : 0;
        p.pack_array(8);
        pack_text(p, name);
        pack_declared(p, q->declared);
        p.pack(credit);
        pack_optional(p, q->declared.autonomous);
    }
    p.pack_array(6);  // the declared defaults (older metas end before them)
    pack_declared(p, s.declared_defaults);
    pack_optional(p, s.declared_defaults.autonomous);
    pack_bytes(p, s.membership);  // older metas end before it
    if (!moves.empty()) pack_bytes(p, moves);  // without moves, metas end before it
    return out;
}

std::optional<DecodedMeta> decode_meta(std::string_view encoded) {
    auto oh = unpack_whole(encoded, meta_limits());
    if (!oh) return std::nullopt;
    std::uint32_t n = 0;
    const msgpack::object* a = array_items(oh->get(), &n);
    if (n < 4 || n > 7) return std::nullopt;
    std::uint64_t format = 0;
    DecodedMeta m;
    if (!read_uint(a[0], 255, &format) || format != kMetaFormat) return std::nullopt;
    if (!read_int(a[1], &m.now) || !read_uint(a[2], UINT64_MAX, &m.next_lease)) return std::nullopt;
    std::uint32_t nq = 0;
    const msgpack::object* qs = array_items(a[3], &nq);
    if (a[3].type != msgpack::type::ARRAY) return std::nullopt;
    m.queues.resize(nq);
    for (std::uint32_t i = 0; i < nq; ++i)
        if (!decode_queue(qs[i], &m.queues[i])) return std::nullopt;
    if (n >= 5 && !decode_defaults(a[4], &m.defaults)) return std::nullopt;
    std::string_view membership;
    if (n >= 6 && !read_bytes(a[5], &membership)) return std::nullopt;
    m.membership = std::string(membership);
    std::string_view moves;
    if (n >= 7 && (!read_bytes(a[6], &moves) || !decode_moves(moves, &m))) return std::nullopt;
    return m;
}

}  // namespace detail

std::string encode_overlay_record(const OverlayRecord& r) {
    std::string out;
    StringSink sink{out};
    detail::Packer p(sink);
    p.pack_array(4);
    p.pack(detail::kOverlayFormat);
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
    if (n != 4 || !detail::read_uint(a[0], 255, &format) || format != detail::kOverlayFormat)
        return std::nullopt;
    OverlayRecord r;
    if (!detail::read_optional(a[1], &r.task, detail::read_string) ||
        !detail::read_uint(a[2], UINT64_MAX, &r.hlc) ||
        !detail::read_uint(a[3], UINT64_MAX, &r.base_hlc))
        return std::nullopt;
    return r;
}

}  // namespace dueq::queue
