// Log encoding of commands: [format, tag, fields...], one msgpack array per command.
// Optional fields are nil when absent. Keys and payloads are bin, queue names str.
//
//   1 Declare        queue, lead_ms, ttr_ms, retention_ms, max_attempts, late_share,
//                    autonomous (older entries end before it)
//   2 Put            queue, key, payload, time, mode
//   3 Delete         queue, key
//   4 Take           queue, count, ttr_ms, session, release_on_disconnect
//   5 Touch          queue, key, lease, ttr_ms
//   6 Ack            queue, key, lease, payload, time
//   7 Release        queue, key, lease, delay_ms
//   8 Bury           queue, key, lease
//   9 Kick           queue, count, only_key (absent: entries end before it)
//  10 ReleaseSession session
//  11 Advance        (no fields)
//  12 Merge          queue, key, task (bin, nil = deleted), hlc, base_hlc, origin
//  13 MoveBucket     step, bucket, gen, peer, chunk, last, bucket_count, records (bin:
//                    [queue (str), key (bin), record (bin)] arrays one after another),
//                    lease_floor, sent_at
//
// Tags are stable forever. A new field goes at the end of its command, and decode keeps
// reading entries written before it (oldest_field_count); anything else needs a new
// format number.
#include "queue/command_codec.h"

#include "queue/msgpack_fields.h"
#include "queue/task.h"

namespace dueq::queue {

namespace {

using detail::Packer;
constexpr std::uint64_t kFormat = 1;

template <class T>
constexpr std::uint64_t tag_of() {
    using namespace std;
    if constexpr (is_same_v<T, Declare>) return 1;
    if constexpr (is_same_v<T, Put>) return 2;
    if constexpr (is_same_v<T, Delete>) return 3;
    if constexpr (is_same_v<T, Take>) return 4;
    if constexpr (is_same_v<T, Touch>) return 5;
    if constexpr (is_same_v<T, Ack>) return 6;
    if constexpr (is_same_v<T, Release>) return 7;
    if constexpr (is_same_v<T, Bury>) return 8;
    if constexpr (is_same_v<T, Kick>) return 9;
    if constexpr (is_same_v<T, ReleaseSession>) return 10;
    if constexpr (is_same_v<T, Advance>) return 11;
    if constexpr (is_same_v<T, Merge>) return 12;
    if constexpr (is_same_v<T, MoveBucket>) return 13;
}

// Number of fields after [format, tag].
constexpr std::uint32_t field_count(std::uint64_t tag) {
    constexpr std::uint32_t counts[] = {0, 7, 5, 2, 5, 4, 5, 4, 3, 3, 1, 0, 6, 10};
    return tag < std::size(counts) ? counts[tag] : 0;
}
// The field count of the oldest entries still read (Declare had no `autonomous`, Kick no
// `only_key`, MoveBucket neither `lease_floor` nor `sent_at`); the same as field_count for
// commands never extended. Every count in between is read too.
// A Kick without only_key is still written the old way, so that a replica of an older
// version reads it.
constexpr std::uint32_t oldest_field_count(std::uint64_t tag) {
    return tag == 1 ? 6 : tag == 9 ? 2 : tag == 13 ? 8 : field_count(tag);
}
constexpr bool known_tag(std::uint64_t tag) {
    return tag >= 1 && tag <= 13;
}

void pack_fields(Packer& p, const Declare& c) {
    detail::pack_text(p, c.queue);
    detail::pack_optional(p, c.lead_ms);
    detail::pack_optional(p, c.ttr_ms);
    detail::pack_optional(p, c.retention_ms);
    detail::pack_optional(p, c.max_attempts);
    detail::pack_optional(p, c.late_share);
    detail::pack_optional(p, c.autonomous);
}
void pack_fields(Packer& p, const Put& c) {
    detail::pack_text(p, c.queue);
    detail::pack_bytes(p, c.key);
    detail::pack_bytes(p, c.payload);
    detail::pack_optional(p, c.time);
    p.pack(static_cast<std::uint64_t>(c.mode));
}
void pack_fields(Packer& p, const Delete& c) {
    detail::pack_text(p, c.queue);
    detail::pack_bytes(p, c.key);
}
void pack_fields(Packer& p, const Take& c) {
    detail::pack_text(p, c.queue);
    p.pack(c.count);
    detail::pack_optional(p, c.ttr_ms);
    p.pack(c.session);
    p.pack(c.release_on_disconnect);
}
void pack_fields(Packer& p, const Touch& c) {
    detail::pack_text(p, c.queue);
    detail::pack_bytes(p, c.key);
    p.pack(c.lease);
    detail::pack_optional(p, c.ttr_ms);
}
void pack_fields(Packer& p, const Ack& c) {
    detail::pack_text(p, c.queue);
    detail::pack_bytes(p, c.key);
    p.pack(c.lease);
    if (c.payload) {
        detail::pack_bytes(p, *c.payload);
    } else {
        p.pack_nil();
    }
    detail::pack_optional(p, c.time);
}
void pack_fields(Packer& p, const Release& c) {
    detail::pack_text(p, c.queue);
    detail::pack_bytes(p, c.key);
    p.pack(c.lease);
    p.pack(c.delay_ms);
}
void pack_fields(Packer& p, const Bury& c) {
    detail::pack_text(p, c.queue);
    detail::pack_bytes(p, c.key);
    p.pack(c.lease);
}
void pack_fields(Packer& p, const Kick& c) {
    detail::pack_text(p, c.queue);
    p.pack(c.count);
    if (c.only_key) detail::pack_bytes(p, *c.only_key);
}
void pack_fields(Packer& p, const ReleaseSession& c) {
    p.pack(c.session);
}
void pack_fields(Packer&, const Advance&) {}
void pack_fields(Packer& p, const Merge& c) {
    detail::pack_text(p, c.queue);
    detail::pack_bytes(p, c.key);
    if (c.task) {
        detail::pack_bytes(p, *c.task);
    } else {
        p.pack_nil();
    }
    p.pack(c.hlc);
    p.pack(c.base_hlc);
    p.pack(c.origin);
}

// A chunk's records as one bin, so that the command's own array stays small and shallow.
void pack_fields(Packer& p, const MoveBucket& c) {
    p.pack(static_cast<std::uint64_t>(c.step.step));
    p.pack(c.step.bucket);
    p.pack(c.step.gen);
    detail::pack_text(p, c.step.peer);
    p.pack(c.step.chunk);
    p.pack(c.step.last);
    p.pack(c.bucket_count);
    std::string records;
    StringSink sink{records};
    Packer rp(sink);
    for (const MovedRecord& r : c.records) {
        rp.pack_array(3);
        detail::pack_text(rp, r.queue);
        detail::pack_bytes(rp, r.key);
        detail::pack_bytes(rp, r.record);
    }
    detail::pack_bytes(p, records);
    p.pack(c.lease_floor);
    p.pack(c.sent_at);
}

using detail::read_bool;
using detail::read_double;
using detail::read_int;
using detail::read_optional;
using detail::read_string;
using detail::read_uint_as;

bool read_payload(const msgpack::object& o, std::string* out) {
    return read_string(o, out);
}

bool read_fields(const msgpack::object* f, std::uint32_t n, Declare& c) {
    return read_string(f[0], &c.queue) && read_optional(f[1], &c.lead_ms, read_int) &&
           read_optional(f[2], &c.ttr_ms, read_int) &&
           read_optional(f[3], &c.retention_ms, read_int) &&
           read_optional(f[4], &c.max_attempts, read_uint_as<std::uint32_t>) &&
           read_optional(f[5], &c.late_share, read_double) &&
           (n < 7 || read_optional(f[6], &c.autonomous, read_bool));
}
bool read_fields(const msgpack::object* f, Put& c) {
    std::uint8_t mode = 0;
    bool ok = read_string(f[0], &c.queue) && read_string(f[1], &c.key) &&
              read_string(f[2], &c.payload) && read_optional(f[3], &c.time, read_int) &&
              read_uint_as(f[4], &mode) && mode <= static_cast<std::uint8_t>(PutMode::update);
    c.mode = static_cast<PutMode>(mode);
    return ok;
}
bool read_fields(const msgpack::object* f, Delete& c) {
    return read_string(f[0], &c.queue) && read_string(f[1], &c.key);
}
bool read_fields(const msgpack::object* f, Take& c) {
    return read_string(f[0], &c.queue) && read_uint_as(f[1], &c.count) &&
           read_optional(f[2], &c.ttr_ms, read_int) && read_uint_as(f[3], &c.session) &&
           read_bool(f[4], &c.release_on_disconnect);
}
bool read_fields(const msgpack::object* f, Touch& c) {
    return read_string(f[0], &c.queue) && read_string(f[1], &c.key) &&
           read_uint_as(f[2], &c.lease) && read_optional(f[3], &c.ttr_ms, read_int);
}
bool read_fields(const msgpack::object* f, Ack& c) {
    return read_string(f[0], &c.queue) && read_string(f[1], &c.key) &&
           read_uint_as(f[2], &c.lease) && read_optional(f[3], &c.payload, read_payload) &&
           read_optional(f[4], &c.time, read_int);
}
bool read_fields(const msgpack::object* f, Release& c) {
    return read_string(f[0], &c.queue) && read_string(f[1], &c.key) &&
           read_uint_as(f[2], &c.lease) && read_int(f[3], &c.delay_ms);
}
bool read_fields(const msgpack::object* f, Bury& c) {
    return read_string(f[0], &c.queue) && read_string(f[1], &c.key) && read_uint_as(f[2], &c.lease);
}
bool read_fields(const msgpack::object* f, std::uint32_t n, Kick& c) {
    if (!read_string(f[0], &c.queue) || !read_uint_as(f[1], &c.count)) return false;
    if (n < 3) return true;
    c.only_key.emplace();
    return read_string(f[2], &*c.only_key);
}
bool read_fields(const msgpack::object* f, ReleaseSession& c) {
    return read_uint_as(f[0], &c.session);
}
bool read_fields(const msgpack::object*, Advance&) {
    return true;
}
bool read_fields(const msgpack::object* f, Merge& c) {
    return read_string(f[0], &c.queue) && read_string(f[1], &c.key) &&
           read_optional(f[2], &c.task, read_payload) && read_uint_as(f[3], &c.hlc) &&
           read_uint_as(f[4], &c.base_hlc) && read_uint_as(f[5], &c.origin);
}
bool read_records(std::string_view bytes, std::vector<MovedRecord>* out) {
    const msgpack::unpack_limit limit(
        /*array=*/3, /*map=*/0, /*str=*/limits::kRecordKeyBytes,
        /*bin=*/limits::kRecordPayloadBytes + limits::kRecordTaskBytes,
        /*ext=*/0, /*depth=*/1);
    return detail::for_each_packed(bytes, limit, [&](const msgpack::object& o) {
        std::uint32_t n = 0;
        const msgpack::object* a = detail::array_items(o, &n);
        MovedRecord r;
        if (n != 3 || !read_string(a[0], &r.queue) || !read_string(a[1], &r.key) ||
            !read_string(a[2], &r.record))
            return false;
        out->push_back(std::move(r));
        return true;
    });
}
bool read_fields(const msgpack::object* f, std::uint32_t n, MoveBucket& c) {
    std::uint8_t step = 0;
    std::string records;
    if (!read_uint_as(f[0], &step) || step > static_cast<std::uint8_t>(shard::MoveStep::forget) ||
        !read_uint_as(f[1], &c.step.bucket) || !read_uint_as(f[2], &c.step.gen) ||
        !read_string(f[3], &c.step.peer) || !read_uint_as(f[4], &c.step.chunk) ||
        !read_bool(f[5], &c.step.last) || !read_uint_as(f[6], &c.bucket_count) ||
        !read_string(f[7], &records))
        return false;
    c.step.step = static_cast<shard::MoveStep>(step);
    if (n > 8 && !read_uint_as(f[8], &c.lease_floor)) return false;
    if (n > 9 && !read_int(f[9], &c.sent_at)) return false;
    return read_records(records, &c.records);
}
// Commands that never gained a field read the same whatever the count (checked by the
// caller).
template <class T>
bool read_fields(const msgpack::object* f, std::uint32_t, T& c) {
    return read_fields(f, c);
}

template <std::size_t I = 0>
std::optional<Command> decode_alternative(std::uint64_t tag, const msgpack::object* fields,
                                          std::uint32_t n) {
    if constexpr (I < std::variant_size_v<Command>) {
        using T = std::variant_alternative_t<I, Command>;
        if (tag != tag_of<T>()) return decode_alternative<I + 1>(tag, fields, n);
        T c;
        if (!read_fields(fields, n, c)) return std::nullopt;
        return Command(std::move(c));
    } else {
        return std::nullopt;
    }
}

}  // namespace

std::string encode_command(const Command& cmd) {
    std::string out;
    StringSink sink{out};
    Packer p(sink);
    std::visit(
        [&p, &out](const auto& c) {
            using T = std::decay_t<decltype(c)>;
            // Room for all of it at once: the fixed fields and headers fit in 64 bytes.
            std::size_t size = 64;
            if constexpr (requires { c.queue.size(); }) size += c.queue.size();
            if constexpr (requires { c.key.size(); }) size += c.key.size();
            if constexpr (requires { c.payload.size(); }) size += c.payload.size();
            if constexpr (requires { c.payload->size(); })
                size += c.payload ? c.payload->size() : 0;
            if constexpr (requires { c.task->size(); }) size += c.task ? c.task->size() : 0;
            out.reserve(size);
            std::uint32_t fields = field_count(tag_of<T>());
            if constexpr (std::is_same_v<T, Kick>)
                if (!c.only_key) fields = oldest_field_count(tag_of<T>());
            p.pack_array(2 + fields);
            p.pack(kFormat);
            p.pack(tag_of<T>());
            pack_fields(p, c);
        },
        cmd);
    return out;
}

namespace {
// Reads a msgpack unsigned integer of one byte (fixint or uint8) at `at`.
bool peek_small_uint(std::string_view b, std::size_t& at, std::uint64_t& v) {
    if (at >= b.size()) return false;
    const auto c = std::uint8_t(b[at]);
    if (c < 0x80) {
        v = c;
        at += 1;
        return true;
    }
    if (c != 0xcc || at + 1 >= b.size()) return false;
    v = std::uint8_t(b[at + 1]);
    at += 2;
    return true;
}

// Reads a str (`text`) or bin header at `at`, then its bytes.
bool peek_string(std::string_view b, std::size_t& at, bool text, std::string_view& out) {
    if (at >= b.size()) return false;
    const auto c = std::uint8_t(b[at++]);
    std::size_t width = 0, n = 0;
    if (text && (c & 0xe0) == 0xa0)
        n = c & 0x1f;
    else if (c == (text ? 0xd9 : 0xc4))
        width = 1;
    else if (c == (text ? 0xda : 0xc5))
        width = 2;
    else if (c == (text ? 0xdb : 0xc6))
        width = 4;
    else
        return false;
    if (b.size() - at < width) return false;
    for (std::size_t i = 0; i < width; ++i)
        n = n << 8 | std::uint8_t(b[at++]);
    if (b.size() - at < n) return false;
    out = b.substr(at, n);
    at += n;
    return true;
}
}  // namespace

std::optional<TaskName> peek_task_name(std::string_view bytes) {
    if (bytes.empty() || (std::uint8_t(bytes[0]) & 0xf0) != 0x90) return std::nullopt;
    std::size_t at = 1;
    std::uint64_t format = 0, tag = 0;
    if (!peek_small_uint(bytes, at, format) || format != kFormat) return std::nullopt;
    if (!peek_small_uint(bytes, at, tag)) return std::nullopt;
    if (tag != 2 && tag != 3 && !(tag >= 5 && tag <= 8) && tag != 12) return std::nullopt;
    TaskName name;
    if (!peek_string(bytes, at, true, name.queue) || !peek_string(bytes, at, false, name.key))
        return std::nullopt;
    return name;
}

bool fits_log_record(std::string_view bytes) {
    return bytes.size() <= limits::kRecordPayloadBytes || decode_command(bytes).has_value();
}

std::optional<Command> decode_command(std::string_view bytes) {
    // A Merge carries a whole task record (its payload and a few fields) as one bin.
    const msgpack::unpack_limit limit(
        /*array=*/16, /*map=*/0,
        /*str=*/limits::kRecordPayloadBytes,
        /*bin=*/limits::kRecordPayloadBytes + limits::kRecordTaskBytes,
        /*ext=*/0, /*depth=*/2);
    // Every replica decodes every entry it applies: a zone of its own per call cost a
    // chunk's allocation and a copy of each string, which the Command copies again.
    thread_local msgpack::zone zone;
    zone.clear();
    auto o = detail::unpack_whole_in(zone, bytes, limit);
    if (!o) return std::nullopt;
    std::uint32_t n = 0;
    const msgpack::object* a = detail::array_items(*o, &n);
    std::uint64_t format = 0, tag = 0;
    if (n < 2 || !detail::read_uint(a[0], 255, &format) || format != kFormat) return std::nullopt;
    if (!detail::read_uint(a[1], 255, &tag) || !known_tag(tag)) return std::nullopt;
    if (n < 2 + oldest_field_count(tag) || n > 2 + field_count(tag)) return std::nullopt;
    return decode_alternative(tag, a + 2, n - 2);
}

}  // namespace dueq::queue
