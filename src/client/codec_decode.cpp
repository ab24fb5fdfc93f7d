// Response decoding: the envelope, then one typed extractor per result shape.
#include <cstring>
#include <limits>

#include "client/codec.h"
#include "wire/msgpack_reader.h"
#include "wire/protocol.h"

namespace dueq::client {

namespace field = wire::field;
namespace {

Error bad(std::string_view what) {
    return Error(Code::internal, "malformed response: " + std::string(what));
}

bool key_is(const msgpack::object& k, std::string_view name) {
    return k.type == msgpack::type::STR && std::string_view(k.via.str.ptr, k.via.str.size) == name;
}

// nullptr when absent or nil: optional fields may be sent either way.
const msgpack::object* find(const msgpack::object& map, std::string_view name) {
    if (map.type != msgpack::type::MAP) return nullptr;
    for (uint32_t i = 0; i < map.via.map.size; ++i) {
        const auto& kv = map.via.map.ptr[i];
        if (key_is(kv.key, name)) return kv.val.type == msgpack::type::NIL ? nullptr : &kv.val;
    }
    return nullptr;
}

Status get_u64(const msgpack::object& map, std::string_view name, uint64_t* out, bool required) {
    const msgpack::object* v = find(map, name);
    if (!v) return required ? Status(bad("missing '" + std::string(name) + "'")) : ok_status();
    if (v->type != msgpack::type::POSITIVE_INTEGER) {
        return bad("'" + std::string(name) + "' is not an unsigned integer");
    }
    *out = v->via.u64;
    return ok_status();
}

Status get_i64(const msgpack::object& map, std::string_view name, int64_t* out, bool required) {
    const msgpack::object* v = find(map, name);
    if (!v) return required ? Status(bad("missing '" + std::string(name) + "'")) : ok_status();
    if (v->type == msgpack::type::NEGATIVE_INTEGER) {
        *out = v->via.i64;
    } else if (v->type == msgpack::type::POSITIVE_INTEGER &&
               v->via.u64 <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        *out = static_cast<int64_t>(v->via.u64);
    } else {
        return bad("'" + std::string(name) + "' is not an int64");
    }
    return ok_status();
}

Status get_opt_i64(const msgpack::object& map, std::string_view name, std::optional<int64_t>* out) {
    if (!find(map, name)) return ok_status();
    int64_t v = 0;
    if (Status st = get_i64(map, name, &v, true); !st.ok()) return st;
    *out = v;
    return ok_status();
}

// Absent: `out` keeps its value.
Status get_bool(const msgpack::object& map, std::string_view name, bool* out) {
    const msgpack::object* v = find(map, name);
    if (!v) return ok_status();
    if (v->type != msgpack::type::BOOLEAN) return bad("'" + std::string(name) + "' is not a boolean");
    *out = v->via.boolean;
    return ok_status();
}

Status get_double(const msgpack::object& map, std::string_view name, double* out) {
    const msgpack::object* v = find(map, name);
    if (!v) return ok_status();
    switch (v->type) {
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64: *out = v->via.f64; break;
        case msgpack::type::POSITIVE_INTEGER: *out = static_cast<double>(v->via.u64); break;
        case msgpack::type::NEGATIVE_INTEGER: *out = static_cast<double>(v->via.i64); break;
        default: return bad("'" + std::string(name) + "' is not a number");
    }
    return ok_status();
}

// Keys and other byte strings arrive as str or bin.
Status get_bytes(const msgpack::object& map, std::string_view name, std::string* out,
                 bool required) {
    const msgpack::object* v = find(map, name);
    if (!v) return required ? Status(bad("missing '" + std::string(name) + "'")) : ok_status();
    if (v->type == msgpack::type::STR) {
        out->assign(v->via.str.ptr, v->via.str.size);
    } else if (v->type == msgpack::type::BIN) {
        out->assign(v->via.bin.ptr, v->via.bin.size);
    } else {
        return bad("'" + std::string(name) + "' is not a string");
    }
    return ok_status();
}

// Like get_bytes, but an integer is accepted and rendered in decimal: node ids are names
// for humans and a server may well number its nodes.
Status get_text(const msgpack::object& map, std::string_view name, std::string* out) {
    const msgpack::object* v = find(map, name);
    if (v && v->type == msgpack::type::POSITIVE_INTEGER) {
        *out = std::to_string(v->via.u64);
        return ok_status();
    }
    return get_bytes(map, name, out, false);
}

std::string repack(const msgpack::object& obj) {
    msgpack::sbuffer buf;
    msgpack::pack(buf, obj);
    return std::string(buf.data(), buf.size());
}

// The payload is any msgpack value (nil included), re-encoded as bytes for the caller.
Status get_payload(const msgpack::object& map, std::string_view name, std::string* out) {
    if (map.type != msgpack::type::MAP) return bad("result is not a map");
    for (uint32_t i = 0; i < map.via.map.size; ++i) {
        const auto& kv = map.via.map.ptr[i];
        if (key_is(kv.key, name)) {
            *out = repack(kv.val);
            return ok_status();
        }
    }
    return bad("missing '" + std::string(name) + "'");
}

#define DUEQ_TRY(expr)                       \
    do {                                     \
        ::dueq::client::Status st_ = (expr); \
        if (!st_.ok()) return st_;           \
    } while (0)

Status decode_error(const msgpack::object& map, Error* out) {
    const msgpack::object* e = find(map, field::error);
    if (!e || e->type != msgpack::type::MAP) return bad("ok:false without an error map");
    std::string code;
    DUEQ_TRY(get_bytes(*e, field::code, &code, true));
    DUEQ_TRY(get_bytes(*e, field::message, &out->message, false));
    DUEQ_TRY(get_bytes(*e, field::leader, &out->leader, false));
    out->code = code_from_name(code);
    out->code_name = code;
    return ok_status();
}

Status decode_task(const msgpack::object& t, Task* out) {
    if (t.type != msgpack::type::MAP) return bad("task is not a map");
    DUEQ_TRY(get_bytes(t, field::key, &out->key, true));
    DUEQ_TRY(get_payload(t, field::payload, &out->payload));
    DUEQ_TRY(get_i64(t, field::time, &out->time, true));
    DUEQ_TRY(get_u64(t, field::lease, &out->lease, true));
    DUEQ_TRY(get_i64(t, field::lease_until, &out->lease_until, false));
    DUEQ_TRY(get_u64(t, field::attempts, &out->attempts, false));
    return ok_status();
}

Status decode_queue_stats(const msgpack::object& m, QueueStats* out) {
    if (m.type != msgpack::type::MAP) return bad("queue stats is not a map");
    DUEQ_TRY(get_bytes(m, field::queue, &out->queue, false));
    DUEQ_TRY(get_u64(m, field::ready, &out->ready, false));
    DUEQ_TRY(get_u64(m, field::taken, &out->taken, false));
    DUEQ_TRY(get_u64(m, field::buried, &out->buried, false));
    DUEQ_TRY(get_u64(m, field::done, &out->done, false));
    DUEQ_TRY(get_u64(m, field::due_now, &out->due_now, false));
    DUEQ_TRY(get_opt_i64(m, field::next_due, &out->next_due));
    DUEQ_TRY(get_opt_i64(m, field::oldest_late, &out->oldest_late));
    return ok_status();
}

Status decode_peers(const msgpack::object& map, std::vector<PeerInfo>* out) {
    const msgpack::object* peers = find(map, field::peers);
    if (!peers) return ok_status();
    if (peers->type != msgpack::type::ARRAY) return bad("'peers' is not an array");
    out->resize(peers->via.array.size);
    for (uint32_t i = 0; i < peers->via.array.size; ++i) {
        const msgpack::object& p = peers->via.array.ptr[i];
        if (p.type != msgpack::type::MAP) return bad("a peer is not a map");
        PeerInfo& info = (*out)[i];
        DUEQ_TRY(get_text(p, field::id, &info.id));
        DUEQ_TRY(get_bytes(p, field::peer, &info.peer, false));
        DUEQ_TRY(get_bool(p, field::connected, &info.connected));
        DUEQ_TRY(get_u64(p, field::match, &info.match, false));
        DUEQ_TRY(get_u64(p, field::lag, &info.lag, false));
    }
    return ok_status();
}

}  // namespace

Result<ResponseHead> peek_response(std::string_view body, const DecodeLimits& limits) {
    if (body.size() > limits.max_frame_bytes) {
        return Error(Code::too_large, "response frame of " + std::to_string(body.size()) +
                                          " bytes exceeds the limit");
    }
    if (Status st = check_msgpack_value(body, limits.max_depth); !st.ok()) {
        return bad(st.error().message);
    }
    const wire::MsgValue top = wire::read_value(body);
    if (top.type != wire::MsgType::map) return bad("frame is not a msgpack map");
    ResponseHead head;
    // As msgpack-c's lookup (find) would: the first entry of a name counts.
    std::optional<wire::MsgValue> id, ok;
    for (wire::MapReader m(top); auto e = m.next();) {
        const auto name = e->first.as_str();
        if (name && *name == field::id && !id) id = e->second;
        if (name && *name == field::ok && !ok) ok = e->second;
    }
    if (!id) return bad("missing 'id'");
    const auto id_value = id->as_uint();
    if (!id_value) return bad("'id' is not an unsigned integer");
    const auto ok_value = ok ? ok->as_bool() : std::nullopt;
    if (!ok_value) return bad("missing boolean 'ok'");
    head.id = *id_value;
    head.ok = *ok_value;
    return head;
}

Result<ResponseFrame> decode_response(std::string_view body, const DecodeLimits& limits) {
    auto head = peek_response(body, limits);
    if (!head.ok()) return head.error();
    return decode_peeked_response(body, *head, limits);
}

Result<ResponseFrame> decode_peeked_response(std::string_view body, const ResponseHead& head,
                                             const DecodeLimits& limits) {
    ResponseFrame frame;
    frame.id = head.id;
    frame.ok = head.ok;
    try {
        // peek_response's check bounds every count by the body size; the limit is a backstop.
        const msgpack::unpack_limit cap(body.size(), body.size(), body.size(), body.size(),
                                        body.size(), limits.max_depth + 1);
        frame.handle = std::make_shared<msgpack::object_handle>(
            msgpack::unpack(body.data(), body.size(), nullptr, nullptr, cap));
    } catch (const std::exception& e) {
        return bad(e.what());
    }
    const msgpack::object& map = frame.handle->get();
    frame.map = &map;
    if (!frame.ok) {
        if (Status st = decode_error(map, &frame.error); !st.ok()) return st.error();
    }
    return frame;
}

std::string repack_with_id(const msgpack::object& map, uint64_t id,
                           const std::vector<std::pair<std::string, bool>>& extra_bools) {
    // Packed straight into the frame's string: a relay does this twice per request.
    struct StringBuffer {
        std::string bytes;
        void write(const char* data, std::size_t n) { bytes.append(data, n); }
    } buf;
    buf.bytes.assign(4, '\0');
    msgpack::packer<StringBuffer> pk(buf);
    // "id" and the extra fields are written anew, so a copy of the sender's would repeat
    // a key in the map.
    auto rewritten = [&](const msgpack::object_kv& kv) {
        if (kv.key.type != msgpack::type::STR) return false;
        const std::string_view k(kv.key.via.str.ptr, kv.key.via.str.size);
        if (k == field::id) return true;
        for (const auto& extra : extra_bools)
            if (k == extra.first) return true;
        return false;
    };
    const std::uint32_t entries = map.type == msgpack::type::MAP ? map.via.map.size : 0;
    std::uint32_t kept = 0;
    for (std::uint32_t i = 0; i < entries; ++i)
        if (!rewritten(map.via.map.ptr[i])) ++kept;
    pk.pack_map(kept + 1 + std::uint32_t(extra_bools.size()));
    auto str = [&](std::string_view v) {
        pk.pack_str(std::uint32_t(v.size()));
        pk.pack_str_body(v.data(), std::uint32_t(v.size()));
    };
    str(field::id);
    pk.pack_uint64(id);
    for (std::uint32_t i = 0; i < entries; ++i) {
        const auto& kv = map.via.map.ptr[i];
        if (rewritten(kv)) continue;
        pk.pack(kv.key);
        pk.pack(kv.val);
    }
    for (const auto& [name, value] : extra_bools) {
        str(name);
        pk.pack(value);
    }
    std::string& frame = buf.bytes;
    const auto n = std::uint32_t(frame.size() - 4);
    frame[0] = char(n >> 24), frame[1] = char(n >> 16), frame[2] = char(n >> 8), frame[3] = char(n);
    return std::move(frame);
}

Result<std::shared_ptr<msgpack::object_handle>> unpack_request(std::string_view body) {
    if (body.empty() || !((static_cast<unsigned char>(body[0]) & 0xf0) == 0x80 ||
                          body[0] == '\xde' || body[0] == '\xdf'))
        return Error(Code::bad_request, "a request must be a msgpack map");
    try {
        const msgpack::unpack_limit cap(body.size(), body.size(), body.size(), body.size(),
                                        body.size(), 64);
        return std::make_shared<msgpack::object_handle>(
            msgpack::unpack(body.data(), body.size(), nullptr, nullptr, cap));
    } catch (const std::exception& e) {
        return Error(Code::bad_request, std::string("request does not unpack: ") + e.what());
    }
}

Status decode_result(const msgpack::object&, Empty*) { return ok_status(); }

Status decode_result(const msgpack::object& map, HelloResponse* out) {
    DUEQ_TRY(get_u64(map, field::session, &out->session, true));
    DUEQ_TRY(get_text(map, field::node_id, &out->node_id));
    DUEQ_TRY(get_bytes(map, field::leader, &out->leader, false));
    DUEQ_TRY(get_i64(map, field::protocol, &out->protocol, false));
    DUEQ_TRY(get_bytes(map, field::mode, &out->mode, false));
    DUEQ_TRY(get_bytes(map, field::version, &out->version, false));
    return ok_status();
}

Status decode_result(const msgpack::object& map, DeclareResponse* out) {
    const msgpack::object* s = find(map, field::settings);
    if (!s || s->type != msgpack::type::MAP) return bad("missing map 'settings'");
    QueueSettings& q = out->settings;
    DUEQ_TRY(get_i64(*s, field::lead_ms, &q.lead_ms, false));
    DUEQ_TRY(get_i64(*s, field::ttr_ms, &q.ttr_ms, false));
    DUEQ_TRY(get_i64(*s, field::max_attempts, &q.max_attempts, false));
    DUEQ_TRY(get_i64(*s, field::retention_ms, &q.retention_ms, false));
    DUEQ_TRY(get_double(*s, field::late_share, &q.late_share));
    DUEQ_TRY(get_bool(*s, field::autonomous, &q.autonomous));
    return ok_status();
}

Status decode_result(const msgpack::object& map, PutResponse* out) {
    return get_u64(map, field::version, &out->version, true);
}

Status decode_result(const msgpack::object& map, GetResponse* out) {
    const msgpack::object* t = find(map, field::task);
    if (!t || t->type != msgpack::type::MAP) return bad("missing map 'task'");
    TaskInfo& task = out->task;
    DUEQ_TRY(get_bytes(*t, field::key, &task.key, true));
    DUEQ_TRY(get_payload(*t, field::payload, &task.payload));
    DUEQ_TRY(get_bytes(*t, field::status, &task.status, true));
    DUEQ_TRY(get_i64(*t, field::time, &task.time, true));
    DUEQ_TRY(get_u64(*t, field::attempts, &task.attempts, false));
    DUEQ_TRY(get_u64(*t, field::version, &task.version, false));
    DUEQ_TRY(get_opt_i64(*t, field::lease_until, &task.lease_until));
    return ok_status();
}

Status decode_result(const msgpack::object& map, TakeResponse* out) {
    const msgpack::object* tasks = find(map, field::tasks);
    if (!tasks) return ok_status();  // an empty take may omit the array
    if (tasks->type != msgpack::type::ARRAY) return bad("'tasks' is not an array");
    out->tasks.resize(tasks->via.array.size);
    for (uint32_t i = 0; i < tasks->via.array.size; ++i) {
        DUEQ_TRY(decode_task(tasks->via.array.ptr[i], &out->tasks[i]));
    }
    return ok_status();
}

Status decode_result(const msgpack::object& map, TouchResponse* out) {
    return get_i64(map, field::lease_until, &out->lease_until, true);
}

Status decode_result(const msgpack::object& map, AckResponse* out) {
    return get_u64(map, field::version, &out->version, true);
}

Status decode_result(const msgpack::object& map, KickResponse* out) {
    return get_u64(map, field::kicked, &out->kicked, true);
}

Status decode_result(const msgpack::object& map, StatsResponse* out) {
    out->raw = repack(map);
    if (const msgpack::object* qs = find(map, field::queues)) {
        if (qs->type != msgpack::type::ARRAY) return bad("'queues' is not an array");
        out->queues.resize(qs->via.array.size);
        for (uint32_t i = 0; i < qs->via.array.size; ++i) {
            DUEQ_TRY(decode_queue_stats(qs->via.array.ptr[i], &out->queues[i]));
        }
        return ok_status();
    }
    out->queues.resize(1);
    return decode_queue_stats(map, &out->queues[0]);
}

Status decode_result(const msgpack::object& map, ListResponse* out) {
    const msgpack::object* tasks = find(map, field::tasks);
    if (!tasks || tasks->type != msgpack::type::ARRAY) return bad("'tasks' is not an array");
    out->tasks.resize(tasks->via.array.size);
    for (uint32_t i = 0; i < tasks->via.array.size; ++i) {
        const msgpack::object& t = tasks->via.array.ptr[i];
        ListedTask& lt = out->tasks[i];
        if (t.type != msgpack::type::MAP) return bad("listed task is not a map");
        DUEQ_TRY(get_bytes(t, field::key, &lt.key, true));
        DUEQ_TRY(get_bytes(t, field::status, &lt.status, true));
        DUEQ_TRY(get_i64(t, field::time, &lt.time, true));
        DUEQ_TRY(get_u64(t, field::attempts, &lt.attempts, true));
        DUEQ_TRY(get_i64(t, field::lease_until, &lt.lease_until, lt.status == wire::word::taken));
    }
    if (find(map, field::after)) {
        out->after.emplace();
        DUEQ_TRY(get_bytes(map, field::after, &*out->after, true));
        DUEQ_TRY(get_i64(map, field::after_time, &out->after_time, true));
    }
    return ok_status();
}

Status decode_result(const msgpack::object& map, BackupResponse* out) {
    uint64_t seq = 0;
    DUEQ_TRY(get_u64(map, field::backup, &out->backup, true));
    DUEQ_TRY(get_u64(map, field::seq, &seq, true));
    if (seq > UINT32_MAX) return bad("'seq' is out of range");
    out->seq = uint32_t(seq);
    DUEQ_TRY(get_u64(map, field::index, &out->index, true));
    DUEQ_TRY(get_u64(map, field::term, &out->term, true));
    DUEQ_TRY(get_i64(map, field::time, &out->time, true));
    DUEQ_TRY(get_bytes(map, field::cluster_id, &out->cluster, true));
    DUEQ_TRY(get_text(map, field::node_id, &out->node_id));
    DUEQ_TRY(get_bytes(map, field::version, &out->version, false));
    DUEQ_TRY(get_bytes(map, field::records, &out->data, true));
    const msgpack::object* last = find(map, field::last);
    if (!last || last->type != msgpack::type::BOOLEAN) return bad("'last' is not a boolean");
    out->last = last->via.boolean;
    return ok_status();
}

Status decode_result(const msgpack::object& map, StatusResponse* out) {
    out->raw = repack(map);
    DUEQ_TRY(get_bytes(map, field::version, &out->version, false));
    DUEQ_TRY(get_text(map, field::node_id, &out->node_id));
    DUEQ_TRY(get_bytes(map, field::role, &out->role, false));
    DUEQ_TRY(get_u64(map, field::term, &out->term, false));
    DUEQ_TRY(get_bytes(map, field::leader, &out->leader, false));
    DUEQ_TRY(get_text(map, field::leader_id, &out->leader_id));
    DUEQ_TRY(get_u64(map, field::commit_index, &out->commit_index, false));
    DUEQ_TRY(get_u64(map, field::applied_index, &out->applied_index, false));
    DUEQ_TRY(get_u64(map, field::last_index, &out->last_index, false));
    DUEQ_TRY(decode_peers(map, &out->peers));
    DUEQ_TRY(get_bytes(map, field::mode, &out->mode, false));
    DUEQ_TRY(get_i64(map, field::mode_ms, &out->mode_ms, false));
    if (const msgpack::object* a = find(map, field::autonomy)) {
        if (a->type != msgpack::type::MAP) return bad("'autonomy' is not a map");
        AutonomyInfo& x = out->autonomy;
        DUEQ_TRY(get_u64(*a, field::overlay, &x.overlay, false));
        DUEQ_TRY(get_u64(*a, field::served, &x.served, false));
        DUEQ_TRY(get_u64(*a, field::merged, &x.merged, false));
        DUEQ_TRY(get_u64(*a, field::taken_over, &x.taken_over, false));
        DUEQ_TRY(get_u64(*a, field::kept, &x.kept, false));
        DUEQ_TRY(get_u64(*a, field::both_sides, &x.both_sides, false));
    }
    DUEQ_TRY(get_u64(map, field::tasks, &out->tasks, false));
    DUEQ_TRY(get_u64(map, field::pending, &out->pending, false));
    DUEQ_TRY(get_u64(map, field::peer_input_dropped, &out->peer_input_dropped, false));
    return ok_status();
}

Status decode_result(const msgpack::object& map, MembersResponse* out) {
    const msgpack::object* ms = find(map, field::members);
    if (!ms || ms->type != msgpack::type::ARRAY) return bad("'members' is not an array");
    out->members.resize(ms->via.array.size);
    for (uint32_t i = 0; i < ms->via.array.size; ++i) {
        const msgpack::object& m = ms->via.array.ptr[i];
        if (m.type != msgpack::type::MAP) return bad("a member is not a map");
        MemberInfo& x = out->members[i];
        DUEQ_TRY(get_text(m, field::name, &x.name));
        DUEQ_TRY(get_u64(m, field::raft_id, &x.raft_id, true));
        DUEQ_TRY(get_bytes(m, field::role, &x.role, true));
        DUEQ_TRY(get_bytes(m, field::peer, &x.peer, false));
        DUEQ_TRY(get_bytes(m, field::client, &x.client, false));
        DUEQ_TRY(get_bytes(m, field::admin, &x.admin, false));
        DUEQ_TRY(get_bool(m, field::connected, &x.connected));
        DUEQ_TRY(get_u64(m, field::match, &x.match, false));
        DUEQ_TRY(get_u64(m, field::lag, &x.lag, false));
    }
    DUEQ_TRY(get_text(map, field::leader_id, &out->leader_id));
    DUEQ_TRY(get_u64(map, field::membership_index, &out->membership_index, false));
    DUEQ_TRY(get_bool(map, field::pending, &out->pending));
    return ok_status();
}

Status decode_result(const msgpack::object& map, MemberChangeResponse* out) {
    DUEQ_TRY(get_text(map, field::name, &out->name));
    return get_u64(map, field::raft_id, &out->raft_id, true);
}

}  // namespace dueq::client
