#include "net/request.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "net/msgpack_reader.h"

namespace dueq::net {
namespace {

using queue::Code;

constexpr std::array<std::pair<std::string_view, Op>, 15> kOps{{
    {"ping", Op::ping},
    {"hello", Op::hello},
    {"declare", Op::declare},
    {"put", Op::put},
    {"get", Op::get},
    {"delete", Op::del},
    {"take", Op::take},
    {"touch", Op::touch},
    {"ack", Op::ack},
    {"release", Op::release},
    {"bury", Op::bury},
    {"kick", Op::kick},
    {"stats", Op::stats},
    {"status", Op::status},
    {"shards", Op::shards},
}};

using limits::kMaxTakeTimeoutMs;

struct Fail {
    Code code;
    std::string message;
};

// Every field a request may carry, as read; build() turns them into the typed request.
struct Fields {
    std::string queue = "default";
    bool queue_given = false;  // stats without a queue covers every queue
    std::optional<std::string> key;
    std::optional<std::string> payload;  // one msgpack value, encoded, verbatim
    std::optional<std::int64_t> time, ttr_ms, timeout_ms, delay_ms, lead_ms, retention_ms;
    std::optional<std::uint64_t> lease, session, count, max_attempts;
    std::optional<double> late_share;
    std::optional<bool> release_on_disconnect, autonomous;
    std::optional<queue::PutMode> mode;
    bool consistency_leader = false;
    std::optional<std::string> token;
    bool redirect = false, forwarded = false;
};

// Reads one field into the request; returns a failure naming the field.
std::optional<Fail> read_field(std::string_view name, const MsgValue& v, Fields& r,
                               const Limits& lim) {
    auto bad_type = [&](const std::string& want) {
        return Fail{Code::bad_request, "field '" + std::string(name) + "' must be " + want};
    };
    auto as_ms = [&](std::optional<std::int64_t>& out, bool non_negative) -> std::optional<Fail> {
        auto i = v.as_int();
        if (!i) return bad_type("an integer (ms)");
        if (non_negative && *i < 0) return bad_type("a non-negative integer (ms)");
        out = *i;
        return std::nullopt;
    };
    auto as_u = [&](std::optional<std::uint64_t>& out) -> std::optional<Fail> {
        auto u = v.as_uint();
        if (!u) return bad_type("a non-negative integer");
        out = *u;
        return std::nullopt;
    };
    if (name == "queue") {
        auto s = v.as_str_or_bin();
        if (!s || s->empty()) return bad_type("a non-empty string");
        if (s->size() > lim.max_queue_name_bytes)
            return Fail{Code::too_large, "queue name longer than " +
                                             std::to_string(lim.max_queue_name_bytes) + " bytes"};
        r.queue.assign(*s);
        r.queue_given = true;
    } else if (name == "key") {
        auto s = v.as_str_or_bin();
        if (!s || s->empty()) return bad_type("a non-empty string or binary");
        if (s->size() > lim.max_key_bytes)
            return Fail{Code::too_large,
                        "key longer than " + std::to_string(lim.max_key_bytes) + " bytes"};
        r.key.emplace(*s);
    } else if (name == "payload") {
        if (v.encoded.size() > lim.max_payload_bytes)
            return Fail{Code::too_large,
                        "payload larger than " + std::to_string(lim.max_payload_bytes) + " bytes"};
        r.payload.emplace(v.encoded);
    } else if (name == "time") {
        return as_ms(r.time, false);
    } else if (name == "ttr_ms") {
        return as_ms(r.ttr_ms, true);
    } else if (name == "timeout_ms") {
        if (auto f = as_ms(r.timeout_ms, true)) return f;
        if (*r.timeout_ms > kMaxTakeTimeoutMs)
            return bad_type("at most " + std::to_string(kMaxTakeTimeoutMs) + " (one day)");
    } else if (name == "delay_ms") {
        return as_ms(r.delay_ms, true);
    } else if (name == "lead_ms") {
        return as_ms(r.lead_ms, true);
    } else if (name == "retention_ms") {
        return as_ms(r.retention_ms, true);
    } else if (name == "lease") {
        return as_u(r.lease);
    } else if (name == "session") {
        return as_u(r.session);
    } else if (name == "count") {
        return as_u(r.count);
    } else if (name == "max_attempts") {
        return as_u(r.max_attempts);
    } else if (name == "late_share") {
        auto d = v.as_number();
        if (!d || !std::isfinite(*d) || *d < 0 || *d > 1) return bad_type("a number in 0..1");
        r.late_share = *d;
    } else if (name == "autonomous") {
        auto b = v.as_bool();
        if (!b) return bad_type("a boolean");
        r.autonomous = *b;
    } else if (name == "release_on_disconnect") {
        auto b = v.as_bool();
        if (!b) return bad_type("a boolean");
        r.release_on_disconnect = *b;
    } else if (name == "mode") {
        auto s = v.as_str();
        if (s == "upsert")
            r.mode = queue::PutMode::upsert;
        else if (s == "insert")
            r.mode = queue::PutMode::insert;
        else if (s == "update")
            r.mode = queue::PutMode::update;
        else
            return bad_type("one of \"upsert\", \"insert\", \"update\"");
    } else if (name == "consistency") {
        auto s = v.as_str();
        if (s == "leader")
            r.consistency_leader = true;
        else if (s != "local")
            return bad_type("\"local\" or \"leader\"");
    } else if (name == "redirect" || name == "forwarded") {
        auto b = v.as_bool();
        if (!b) return bad_type("a boolean");
        (name == "redirect" ? r.redirect : r.forwarded) = *b;
    } else if (name == "token") {
        auto s = v.as_str();
        if (!s) return bad_type("a string");
        r.token.emplace(*s);
    }
    return std::nullopt;  // unknown fields are ignored
}

Fail missing(const char* field) {
    return Fail{Code::bad_request, std::string("missing required field '") + field + "'"};
}

// The typed request for `op`, or the required field that is missing or out of range.
std::variant<Body, Fail> build_body(Op op, Fields&& r, const Limits& lim) {
    using namespace queue;
    const bool keyed = op == Op::put || op == Op::get || op == Op::del || op == Op::touch ||
                       op == Op::ack || op == Op::release || op == Op::bury;
    if (keyed && !r.key) return missing("key");
    const bool leased = op == Op::touch || op == Op::ack || op == Op::release || op == Op::bury;
    if (leased && !r.lease) return missing("lease");
    std::string key = r.key ? std::move(*r.key) : std::string();
    switch (op) {
        case Op::ping:
            return Ping{};
        case Op::hello:
            return Hello{std::move(r.token), r.session};
        case Op::get:
            return GetTask{std::move(r.queue), std::move(key), r.consistency_leader};
        case Op::stats:
            return GetStats{r.queue_given ? std::optional(std::move(r.queue)) : std::nullopt,
                            r.consistency_leader};
        case Op::status:
            return GetStatus{};
        case Op::shards:
            return GetShards{};
        case Op::declare:
            if (r.max_attempts && *r.max_attempts > UINT32_MAX)
                return Fail{Code::bad_request, "field 'max_attempts' is too large"};
            return Write{Declare{
                std::move(r.queue), r.lead_ms, r.ttr_ms, r.retention_ms,
                r.max_attempts ? std::optional(std::uint32_t(*r.max_attempts)) : std::nullopt,
                r.late_share, r.autonomous}};
        case Op::put:
            if (!r.payload) return missing("payload");
            return Write{Put{std::move(r.queue), std::move(key), std::move(*r.payload), r.time,
                             r.mode.value_or(PutMode::upsert)}};
        case Op::del:
            return Write{Delete{std::move(r.queue), std::move(key)}};
        case Op::take:
            if (r.count && (*r.count == 0 || *r.count > lim.max_take_count))
                return Fail{Code::bad_request,
                            "field 'count' must be in 1.." + std::to_string(lim.max_take_count)};
            return Write{Take{std::move(r.queue), std::uint32_t(r.count.value_or(1)), r.ttr_ms, 0,
                              r.release_on_disconnect.value_or(true)},
                         r.timeout_ms.value_or(0)};
        case Op::touch:
            return Write{Touch{std::move(r.queue), std::move(key), *r.lease, r.ttr_ms}};
        case Op::ack:
            return Write{
                Ack{std::move(r.queue), std::move(key), *r.lease, std::move(r.payload), r.time}};
        case Op::release:
            return Write{
                Release{std::move(r.queue), std::move(key), *r.lease, r.delay_ms.value_or(0)}};
        case Op::bury:
            return Write{Bury{std::move(r.queue), std::move(key), *r.lease}};
        case Op::kick:
            if (!r.count) return missing("count");
            if (*r.count == 0) return Fail{Code::bad_request, "field 'count' must be at least 1"};
            if (*r.count > UINT32_MAX) return Fail{Code::bad_request, "field 'count' is too large"};
            return Write{Kick{std::move(r.queue), std::uint32_t(*r.count)}};
    }
    return Fail{Code::bad_request, "unknown op"};
}

}  // namespace

const char* to_string(Op op) {
    for (const auto& [name, o] : kOps)
        if (o == op) return name.data();
    return "?";
}

std::optional<std::pair<std::string_view, std::string_view>> request_key(const Request& req) {
    using Key = std::pair<std::string_view, std::string_view>;
    if (const auto* get = std::get_if<GetTask>(&req.body)) return Key(get->queue, get->key);
    const auto* write = std::get_if<Write>(&req.body);
    if (!write) return std::nullopt;
    return std::visit(
        [](const auto& c) -> std::optional<Key> {
            if constexpr (requires { c.key; })
                return Key(c.queue, c.key);
            else
                return std::nullopt;
        },
        write->command);
}

std::variant<Request, RequestError> decode_request(std::string_view frame, const Limits& limits) {
    std::string why;
    if (frame.empty()) return RequestError{Code::bad_request, "empty frame", 0};
    if (!validate(frame, limits.max_depth, why))
        return RequestError{Code::bad_request, "malformed msgpack: " + why, 0};
    const MsgValue top = read_value(frame);
    if (top.type != MsgType::map)
        return RequestError{Code::bad_request, "a request must be a msgpack map", 0};

    Request req;
    Fields fields;
    std::optional<std::string_view> op_name;
    bool have_id = false;
    // The id is read first so that every later error can carry it.
    for (MapReader m(top); auto e = m.next();) {
        if (e->first.as_str() == "id") {
            auto id = e->second.as_uint();
            if (!id)
                return RequestError{Code::bad_request, "field 'id' must be an unsigned integer", 0};
            req.id = *id;
            have_id = true;
        }
    }
    if (!have_id) return RequestError{Code::bad_request, "missing required field 'id'", 0};
    for (MapReader m(top); auto e = m.next();) {
        auto name = e->first.as_str();
        if (!name) return RequestError{Code::bad_request, "field names must be strings", req.id};
        if (*name == "id") continue;
        if (*name == "op") {
            op_name = e->second.as_str();
            if (!op_name)
                return RequestError{Code::bad_request, "field 'op' must be a string", req.id};
            continue;
        }
        if (auto f = read_field(*name, e->second, fields, limits))
            return RequestError{f->code, std::move(f->message), req.id};
    }
    if (!op_name) return RequestError{Code::bad_request, "missing required field 'op'", req.id};
    auto known = std::find_if(kOps.begin(), kOps.end(),
                              [&](const auto& named) { return named.first == *op_name; });
    if (known == kOps.end())
        return RequestError{Code::bad_request,
                            "unknown op '" + std::string(op_name->substr(0, 64)) + "'", req.id};
    req.op = known->second;
    req.redirect = fields.redirect;
    req.forwarded = fields.forwarded;
    auto body = build_body(req.op, std::move(fields), limits);
    if (auto* f = std::get_if<Fail>(&body))
        return RequestError{f->code, std::move(f->message), req.id};
    req.body = std::move(std::get<Body>(body));
    return req;
}

}  // namespace dueq::net
