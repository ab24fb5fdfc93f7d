#include "net/request.h"

#include <array>
#include <cmath>
#include <utility>

#include "net/msgpack_reader.h"

namespace dueq::net {
namespace {

using queue::Code;

constexpr std::array<std::pair<std::string_view, Op>, 14> kOps{{
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
}};

constexpr std::int64_t kMaxTakeTimeoutMs = 86'400'000;

struct Fail {
    Code code;
    std::string message;
};

// Reads one field into the request; returns a failure naming the field.
std::optional<Fail> read_field(std::string_view name, const MsgValue& v, Request& r,
                               const Limits& lim) {
    auto bad_type = [&](const char* want) {
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
        if (*r.timeout_ms > kMaxTakeTimeoutMs) return bad_type("at most 86400000 (one day)");
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
    } else if (name == "token") {
        auto s = v.as_str();
        if (!s) return bad_type("a string");
        r.token.emplace(*s);
    }
    return std::nullopt;  // unknown fields are ignored
}

std::optional<Fail> check_required(const Request& r, const Limits& lim) {
    auto missing = [](const char* f) {
        return Fail{Code::bad_request, std::string("missing required field '") + f + "'"};
    };
    switch (r.op) {
        case Op::put:
            if (!r.key) return missing("key");
            if (!r.payload) return missing("payload");
            break;
        case Op::get:
        case Op::del:
            if (!r.key) return missing("key");
            break;
        case Op::touch:
        case Op::ack:
        case Op::release:
        case Op::bury:
            if (!r.key) return missing("key");
            if (!r.lease) return missing("lease");
            break;
        case Op::kick:
            if (!r.count) return missing("count");
            if (*r.count == 0) return Fail{Code::bad_request, "field 'count' must be at least 1"};
            if (*r.count > UINT32_MAX) return Fail{Code::bad_request, "field 'count' is too large"};
            break;
        case Op::take:
            if (r.count && (*r.count == 0 || *r.count > lim.max_take_count))
                return Fail{Code::bad_request,
                            "field 'count' must be in 1.." + std::to_string(lim.max_take_count)};
            break;
        case Op::declare:
            if (r.max_attempts && *r.max_attempts > UINT32_MAX)
                return Fail{Code::bad_request, "field 'max_attempts' is too large"};
            break;
        default:
            break;
    }
    return std::nullopt;
}

}  // namespace

const char* to_string(Op op) {
    for (const auto& [name, o] : kOps)
        if (o == op) return name.data();
    return "?";
}

bool is_mutating(Op op) {
    switch (op) {
        case Op::declare:
        case Op::put:
        case Op::del:
        case Op::take:
        case Op::touch:
        case Op::ack:
        case Op::release:
        case Op::bury:
        case Op::kick:
            return true;
        default:
            return false;
    }
}

std::variant<Request, RequestError> decode_request(std::string_view frame, const Limits& limits) {
    std::string why;
    if (frame.empty()) return RequestError{Code::bad_request, "empty frame", 0};
    if (!validate(frame, limits.max_depth, why))
        return RequestError{Code::bad_request, "malformed msgpack: " + why, 0};
    const MsgValue top = read_value(frame);
    if (top.type != MsgType::map)
        return RequestError{Code::bad_request, "a request must be a msgpack map", 0};

    Request r;
    bool have_id = false, have_op = false;
    std::optional<std::string_view> op_name;
    // The id is read first so that every later error can carry it.
    for (MapReader m(top); auto e = m.next();) {
        if (e->first.as_str() == "id") {
            auto id = e->second.as_uint();
            if (!id)
                return RequestError{Code::bad_request, "field 'id' must be an unsigned integer", 0};
            r.id = *id;
            have_id = true;
        }
    }
    if (!have_id) return RequestError{Code::bad_request, "missing required field 'id'", 0};
    for (MapReader m(top); auto e = m.next();) {
        auto name = e->first.as_str();
        if (!name) return RequestError{Code::bad_request, "field names must be strings", r.id};
        if (*name == "id") continue;
        if (*name == "op") {
            op_name = e->second.as_str();
            if (!op_name)
                return RequestError{Code::bad_request, "field 'op' must be a string", r.id};
            continue;
        }
        if (auto f = read_field(*name, e->second, r, limits))
            return RequestError{f->code, std::move(f->message), r.id};
    }
    if (!op_name) return RequestError{Code::bad_request, "missing required field 'op'", r.id};
    for (const auto& [n, o] : kOps) {
        if (n == *op_name) {
            r.op = o;
            have_op = true;
        }
    }
    if (!have_op)
        return RequestError{Code::bad_request,
                            "unknown op '" + std::string(op_name->substr(0, 64)) + "'", r.id};
    if (auto f = check_required(r, limits))
        return RequestError{f->code, std::move(f->message), r.id};
    return r;
}

}  // namespace dueq::net
