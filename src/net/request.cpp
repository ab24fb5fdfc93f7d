#include "net/request.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <utility>

#include "wire/msgpack_reader.h"

namespace dueq::net {
namespace {

using queue::Code;
using wire::FieldType;
using wire::kRequestFields;
namespace field = wire::field;

struct Fail {
    Code code;
    std::string message;
};

// A field's value as its type in wire::kRequestFields was checked; strings are views
// into the frame, copied once into the typed request.
struct Word {
    std::size_t index;  // into the field's words
};
using Value =
    std::variant<std::monostate, std::string_view, std::int64_t, std::uint64_t, double, bool, Word>;

// A field's position in wire::kRequestFields, found while compiling.
consteval std::size_t at(std::string_view name) {
    const std::size_t i = wire::request_field_index(name);
    if (i == kRequestFields.size()) throw "not a request field";
    return i;
}

// Every field of the request, by its position in wire::kRequestFields.
class Fields {
  public:
    Value& operator[](std::size_t i) { return values_[i]; }
    template <class T>
    std::optional<T> get(std::size_t i) const {
        if (const T* v = std::get_if<T>(&values_[i])) return *v;
        return std::nullopt;
    }
    std::optional<std::string> text(std::size_t i) const {
        if (auto v = get<std::string_view>(i)) return std::string(*v);
        return std::nullopt;
    }

  private:
    std::array<Value, kRequestFields.size()> values_;
};

std::string quoted_words(std::span<const std::string_view> words) {
    std::string out;
    for (std::size_t i = 0; i < words.size(); ++i)
        out += (i == 0                  ? ""
                : i + 1 == words.size() ? " or "
                                        : ", ") +
               ("\"" + std::string(words[i]) + "\"");
    return out;
}

// Checks one field's value against its entry in the table; the failure names the field.
std::optional<Fail> read_field(const wire::RequestField& spec, const wire::MsgValue& v, Value& out,
                               const Limits& lim) {
    auto bad = [&](const std::string& want) {
        return Fail{Code::bad_request, "field '" + std::string(spec.name) + "' must be " + want};
    };
    auto too_large = [&](const char* what, std::size_t max) {
        return Fail{Code::too_large, "field '" + std::string(spec.name) + "' " + what + " " +
                                         std::to_string(max) + " bytes"};
    };
    switch (spec.type) {
        case FieldType::name:
        case FieldType::task_key: {
            auto s = v.as_str_or_bin();
            if (!s || s->empty()) return bad("a non-empty string or binary");
            const std::size_t max =
                spec.type == FieldType::name ? lim.max_queue_name_bytes : lim.max_key_bytes;
            if (s->size() > max) return too_large("is longer than", max);
            out = *s;
            break;
        }
        case FieldType::payload:
            if (v.encoded.size() > lim.max_payload_bytes)
                return too_large("is larger than", lim.max_payload_bytes);
            out = v.encoded;
            break;
        case FieldType::time:
        case FieldType::duration: {
            auto i = v.as_int();
            if (!i) return bad("an integer (ms)");
            if (spec.type == FieldType::duration && *i < 0)
                return bad("a non-negative integer (ms)");
            if (*i > 0 && std::uint64_t(*i) > spec.max)
                return bad("at most " + std::to_string(spec.max));
            out = *i;
            break;
        }
        case FieldType::count: {
            auto u = v.as_uint();
            if (!u) return bad("a non-negative integer");
            if (*u > spec.max) return bad("at most " + std::to_string(spec.max));
            out = *u;
            break;
        }
        case FieldType::boolean:
            if (auto b = v.as_bool()) return out = *b, std::nullopt;
            return bad("a boolean");
        case FieldType::share: {
            auto d = v.as_number();
            if (!d || !std::isfinite(*d) || *d < 0 || *d > 1) return bad("a number in 0..1");
            out = *d;
            break;
        }
        case FieldType::word: {
            auto s = v.as_str();
            auto it = s ? std::find(spec.words.begin(), spec.words.end(), *s) : spec.words.end();
            if (it == spec.words.end()) return bad(quoted_words(spec.words));
            out = Word{std::size_t(it - spec.words.begin())};
            break;
        }
        case FieldType::text:
            if (auto s = v.as_str()) return out = *s, std::nullopt;
            return bad("a string");
        case FieldType::blob: {
            auto s = v.as_str_or_bin();
            if (!s) return bad("binary");
            if (s->size() > spec.max) return too_large("is longer than", spec.max);
            out = *s;
            break;
        }
    }
    return std::nullopt;
}

Fail missing(std::string_view field) {
    return Fail{Code::bad_request, "missing required field '" + std::string(field) + "'"};
}

// wire::kPutModes, in order.
constexpr std::array<queue::PutMode, 3> kPutModes{queue::PutMode::upsert, queue::PutMode::insert,
                                                  queue::PutMode::update};
static_assert(wire::kPutModes[1] == wire::word::insert && wire::kPutModes[2] == wire::word::update);
static_assert(wire::kConsistencies[1] == wire::word::leader);
static_assert(wire::kListStatuses[std::size_t(queue::ListStatus::late)] == wire::word::late &&
              wire::kListStatuses[std::size_t(queue::ListStatus::done)] == wire::word::done);

std::variant<Body, Fail> list_body(const Fields& r, std::string q,
                                   std::optional<std::uint64_t> count, bool leader_only) {
    auto status = r.get<Word>(at(field::status));
    if (!status) return missing(field::status);
    const auto n = count.value_or(limits::kDefaultListCount);
    if (n == 0 || n > limits::kMaxListCount)
        return Fail{Code::bad_request,
                    "'count' must be 1.." + std::to_string(limits::kMaxListCount)};
    auto after = r.text(at(field::after));
    auto after_time = r.get<std::int64_t>(at(field::after_time));
    if (after_time && !after) return Fail{Code::bad_request, "'after_time' needs 'after'"};
    return ListTasks{std::move(q),     queue::ListStatus(status->index),
                     std::uint32_t(n), std::move(after),
                     after_time,       leader_only};
}

// backup: a new one (no `backup`), or chunk `seq` (1, 2, ...) of one.
std::variant<Body, Fail> backup_body(const Fields& r) {
    const auto backup = r.get<std::uint64_t>(at(field::backup)).value_or(0);
    const auto seq = r.get<std::uint64_t>(at(field::seq)).value_or(0);
    if (backup == 0 && seq != 0)
        return Fail{Code::bad_request, "'seq' needs the 'backup' the first chunk named"};
    if (backup != 0 && seq == 0) return missing(field::seq);
    return BackupChunk{backup, std::uint32_t(seq)};
}

// move and move_cancel: buckets [bucket, bucket + count), count 1 when absent.
std::variant<Body, Fail> move_body(Op op, const Fields& r, std::optional<std::uint64_t> count) {
    auto bucket = r.get<std::uint64_t>(at(field::bucket));
    if (!bucket) return missing(field::bucket);
    const auto n = count.value_or(1);
    if (n == 0 || n > limits::kMaxMoveBuckets)
        return Fail{Code::bad_request,
                    "'count' must be 1.." + std::to_string(limits::kMaxMoveBuckets)};
    if (*bucket + n > limits::kMaxBuckets)
        return Fail{Code::bad_request,
                    "the buckets end past " + std::to_string(limits::kMaxBuckets - 1)};
    StartMove m{std::uint32_t(*bucket), std::uint32_t(n), op == Op::move_cancel, {}};
    if (op == Op::move) {
        auto shard = r.text(at(field::shard));
        if (!shard) return missing(field::shard);
        m.to = std::move(*shard);
    }
    return m;
}

std::variant<Body, Fail> move_step_body(const Fields& r) {
    auto step = r.text(at(field::step));
    auto mac = r.text(at(field::mac));
    if (!step) return missing(field::step);
    if (!mac) return missing(field::mac);
    return MoveStepRequest{std::move(*step), std::move(*mac)};
}

// member_add, member_promote, member_remove.
std::variant<Body, Fail> change_member_body(Op op, const Fields& r) {
    auto name = r.text(at(field::name));
    if (!name) return missing(field::name);
    ChangeMember c{op, std::move(*name)};
    if (op == Op::member_add) {
        auto peer = r.text(at(field::peer));
        auto client = r.text(at(field::client));
        if (!peer) return missing(field::peer);
        if (!client) return missing(field::client);
        c.peer = std::move(*peer);
        c.client = std::move(*client);
        c.admin = r.text(at(field::admin)).value_or("");
    }
    return c;
}

// The typed request for `op`, or the required field that is missing or out of range.
std::variant<Body, Fail> build_body(Op op, const Fields& r, const Limits& lim) {
    using namespace queue;
    const auto& info = wire::op_info(op);
    auto key = r.text(at(field::key));
    if (info.names_task && !key) return missing(field::key);
    auto lease = r.get<std::uint64_t>(at(field::lease));
    if (info.needs_lease && !lease) return missing(field::lease);
    auto queue = r.text(at(field::queue));
    std::string q = queue.value_or(std::string(wire::kDefaultQueue));
    std::string k = key.value_or(std::string());
    const bool leader_only = r.get<Word>(at(field::consistency)).value_or(Word{0}).index == 1;
    auto count = r.get<std::uint64_t>(at(field::count));
    auto ms = [&](std::size_t i) { return r.get<std::int64_t>(i); };
    switch (op) {
        case Op::ping:
            return Ping{};
        case Op::hello:
            return Hello{r.text(at(field::token)), r.get<std::uint64_t>(at(field::session))};
        case Op::get:
            return GetTask{std::move(q), std::move(k), leader_only};
        case Op::stats:
            return GetStats{std::move(queue), leader_only};
        case Op::list:
            return list_body(r, std::move(q), count, leader_only);
        case Op::status:
            return GetStatus{};
        case Op::shards:
            return GetShards{};
        case Op::members:
            return GetMembers{};
        case Op::backup:
            return backup_body(r);
        case Op::move:
        case Op::move_cancel:
            return move_body(op, r, count);
        case Op::move_step:
            return move_step_body(r);
        case Op::member_add:
        case Op::member_promote:
        case Op::member_remove:
            return change_member_body(op, r);
        case Op::declare: {
            auto attempts = r.get<std::uint64_t>(at(field::max_attempts));
            return Write{Declare{std::move(q), ms(at(field::lead_ms)), ms(at(field::ttr_ms)),
                                 ms(at(field::retention_ms)),
                                 attempts ? std::optional(std::uint32_t(*attempts)) : std::nullopt,
                                 r.get<double>(at(field::late_share)),
                                 r.get<bool>(at(field::autonomous))}};
        }
        case Op::put: {
            auto payload = r.text(at(field::payload));
            if (!payload) return missing(field::payload);
            auto mode = r.get<Word>(at(field::mode));
            return Write{Put{std::move(q), std::move(k), std::move(*payload), ms(at(field::time)),
                             kPutModes[mode.value_or(Word{0}).index]}};
        }
        case Op::del:
            return Write{Delete{std::move(q), std::move(k)}};
        case Op::take:
            if (count && (*count == 0 || *count > lim.max_take_count))
                return Fail{Code::bad_request,
                            "field 'count' must be in 1.." + std::to_string(lim.max_take_count)};
            return Write{Take{std::move(q), std::uint32_t(count.value_or(1)), ms(at(field::ttr_ms)),
                              0, r.get<bool>(at(field::release_on_disconnect)).value_or(true)},
                         ms(at(field::timeout_ms)).value_or(0)};
        case Op::touch:
            return Write{Touch{std::move(q), std::move(k), *lease, ms(at(field::ttr_ms))}};
        case Op::ack:
            return Write{Ack{std::move(q), std::move(k), *lease, r.text(at(field::payload)),
                             ms(at(field::time))}};
        case Op::release:
            return Write{
                Release{std::move(q), std::move(k), *lease, ms(at(field::delay_ms)).value_or(0)}};
        case Op::bury:
            return Write{Bury{std::move(q), std::move(k), *lease}};
        case Op::kick:
            if (key) return Write{Kick{std::move(q), 1, std::move(key)}};
            if (!count) return missing(field::count);
            if (*count == 0) return Fail{Code::bad_request, "field 'count' must be at least 1"};
            return Write{Kick{std::move(q), std::uint32_t(*count)}};
    }
    return Fail{Code::bad_request, "unknown op"};
}

}  // namespace

const char* to_string(Op op) {
    return wire::op_name(op).data();
}

std::optional<std::pair<std::string_view, std::string_view>> request_key(const Request& req) {
    using Key = std::pair<std::string_view, std::string_view>;
    if (const auto* get = std::get_if<GetTask>(&req.body)) return Key(get->queue, get->key);
    const auto* write = std::get_if<Write>(&req.body);
    if (!write) return std::nullopt;
    if (const auto* kick = std::get_if<queue::Kick>(&write->command))
        return kick->only_key ? std::optional(Key(kick->queue, *kick->only_key)) : std::nullopt;
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
    using wire::MapReader;
    std::string why;
    if (frame.empty()) return RequestError{Code::bad_request, "empty frame", 0};
    if (!wire::validate(frame, limits.max_depth, why))
        return RequestError{Code::bad_request, "malformed msgpack: " + why, 0};
    const wire::MsgValue top = wire::read_value(frame);
    if (top.type != wire::MsgType::map)
        return RequestError{Code::bad_request, "a request must be a msgpack map", 0};

    Request req;
    Fields fields;
    std::optional<std::string_view> op_name;
    bool have_id = false;
    // The id is read first so that every later error can carry it.
    for (MapReader m(top); auto e = m.next();) {
        if (e->first.as_str() == field::id) {
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
        if (*name == field::id) continue;
        if (*name == field::op) {
            op_name = e->second.as_str();
            if (!op_name)
                return RequestError{Code::bad_request, "field 'op' must be a string", req.id};
            continue;
        }
        const std::size_t i = wire::request_field_index(*name);
        if (i == kRequestFields.size()) continue;  // unknown fields are ignored
        if (auto f = read_field(kRequestFields[i], e->second, fields[i], limits))
            return RequestError{f->code, std::move(f->message), req.id};
    }
    if (!op_name) return RequestError{Code::bad_request, "missing required field 'op'", req.id};
    auto op = wire::op_from_name(*op_name);
    if (!op)
        return RequestError{Code::bad_request,
                            "unknown op '" + std::string(op_name->substr(0, 64)) + "'", req.id};
    req.op = *op;
    req.redirect = fields.get<bool>(at(field::redirect)).value_or(false);
    req.forwarded = fields.get<bool>(at(field::forwarded)).value_or(false);
    auto body = build_body(req.op, fields, limits);
    if (auto* f = std::get_if<Fail>(&body))
        return RequestError{f->code, std::move(f->message), req.id};
    req.body = std::move(std::get<Body>(body));
    return req;
}

}  // namespace dueq::net
