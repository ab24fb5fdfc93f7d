#include "client/codec.h"

#include <limits>

#include "net/utf8.h"
#include "wire/msgpack_reader.h"
#include "wire/protocol.h"

namespace dueq::client {

namespace field = wire::field;
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

// Collects the fields of one request map; the map header needs the count up front.
class RequestWriter {
public:
    RequestWriter(std::string_view op, uint64_t id) : pk_(fields_) {
        str(field::op, op);
        uint(field::id, id);
    }

    void str(std::string_view name, std::string_view value) {
        key(name);
        pk_.pack_str(static_cast<uint32_t>(value.size()));
        pk_.pack_str_body(value.data(), static_cast<uint32_t>(value.size()));
    }
    void uint(std::string_view name, uint64_t value) {
        key(name);
        pk_.pack_uint64(value);
    }
    void int64(std::string_view name, int64_t value) {
        key(name);
        pk_.pack_int64(value);
    }
    void boolean(std::string_view name, bool value) {
        key(name);
        if (value) pk_.pack_true(); else pk_.pack_false();
    }
    void real(std::string_view name, double value) {
        key(name);
        pk_.pack_double(value);
    }
    // Keys are bytes: sent as str when they are valid UTF-8, as bin otherwise, so that a
    // strict decoder on the other side never sees invalid UTF-8 in a str.
    bool key_field(std::string_view name, std::string_view k) {
        if (k.empty()) return false;
        key(name);
        if (net::valid_utf8(k)) {
            pk_.pack_str(static_cast<uint32_t>(k.size()));
            pk_.pack_str_body(k.data(), static_cast<uint32_t>(k.size()));
        } else {
            pk_.pack_bin(static_cast<uint32_t>(k.size()));
            pk_.pack_bin_body(k.data(), static_cast<uint32_t>(k.size()));
        }
        return true;
    }
    // The payload is already msgpack: copied verbatim; empty means nil.
    Status payload(std::string_view name, std::string_view bytes) {
        if (bytes.empty()) {
            key(name);
            pk_.pack_nil();
            return ok_status();
        }
        Status st = check_msgpack_value(bytes);
        if (!st.ok()) return Error(Code::bad_request, "payload: " + st.error().message);
        key(name);
        fields_.write(bytes.data(), bytes.size());
        return ok_status();
    }
    void queue(std::string_view q) { str(field::queue, q.empty() ? kDefaultQueue : q); }

    Result<std::string> finish() {
        msgpack::sbuffer out;
        out.write("\0\0\0\0", kFrameHeaderBytes);
        Packer(out).pack_map(count_);
        out.write(fields_.data(), fields_.size());
        const std::size_t body = out.size() - kFrameHeaderBytes;
        if (body > kDefaultMaxFrameBytes) {
            return Error(Code::too_large, "request of " + std::to_string(body) +
                                              " bytes exceeds the frame limit");
        }
        char* p = out.data();
        p[0] = static_cast<char>((body >> 24) & 0xff);
        p[1] = static_cast<char>((body >> 16) & 0xff);
        p[2] = static_cast<char>((body >> 8) & 0xff);
        p[3] = static_cast<char>(body & 0xff);
        return std::string(out.data(), out.size());
    }

private:
    void key(std::string_view name) {
        ++count_;
        pk_.pack_str(static_cast<uint32_t>(name.size()));
        pk_.pack_str_body(name.data(), static_cast<uint32_t>(name.size()));
    }

    msgpack::sbuffer fields_;
    Packer pk_;
    uint32_t count_ = 0;
};

Error empty_key() { return Error(Code::bad_request, "key must not be empty"); }

template <class T>
void opt_int(RequestWriter& w, std::string_view name, const std::optional<T>& v) {
    if (v) w.int64(name, static_cast<int64_t>(*v));
}

}  // namespace

Status check_msgpack_value(std::string_view bytes, int max_depth) {
    std::string why;
    if (!wire::validate(bytes, max_depth, why))
        return Error(Code::bad_request, "malformed msgpack: " + why);
    return ok_status();
}

Result<std::string> encode_request(const PingRequest&, uint64_t id) {
    return RequestWriter(PingRequest::op, id).finish();
}

Result<std::string> encode_request(const HelloRequest& req, uint64_t id) {
    RequestWriter w(HelloRequest::op, id);
    if (req.session) w.uint(field::session, *req.session);
    if (req.token) w.str(field::token, *req.token);
    return w.finish();
}

Result<std::string> encode_request(const DeclareRequest& req, uint64_t id) {
    RequestWriter w(DeclareRequest::op, id);
    w.queue(req.queue);
    opt_int(w, field::lead_ms, req.lead_ms);
    opt_int(w, field::ttr_ms, req.ttr_ms);
    opt_int(w, field::max_attempts, req.max_attempts);
    opt_int(w, field::retention_ms, req.retention_ms);
    if (req.late_share) w.real(field::late_share, *req.late_share);
    if (req.autonomous) w.boolean(field::autonomous, *req.autonomous);
    return w.finish();
}

Result<std::string> encode_request(const PutRequest& req, uint64_t id) {
    RequestWriter w(PutRequest::op, id);
    w.queue(req.queue);
    if (!w.key_field(field::key, req.key)) return empty_key();
    if (Status st = w.payload(field::payload, req.payload); !st.ok()) return st.error();
    opt_int(w, field::time, req.time);
    if (req.mode) w.str(field::mode, put_mode_name(*req.mode));
    return w.finish();
}

Result<std::string> encode_request(const GetRequest& req, uint64_t id) {
    RequestWriter w(GetRequest::op, id);
    w.queue(req.queue);
    if (!w.key_field(field::key, req.key)) return empty_key();
    if (req.consistency) w.str(field::consistency, *req.consistency);
    return w.finish();
}

Result<std::string> encode_request(const DeleteRequest& req, uint64_t id) {
    RequestWriter w(DeleteRequest::op, id);
    w.queue(req.queue);
    if (!w.key_field(field::key, req.key)) return empty_key();
    return w.finish();
}

Result<std::string> encode_request(const TakeRequest& req, uint64_t id) {
    RequestWriter w(TakeRequest::op, id);
    w.queue(req.queue);
    if (req.count) {
        if (*req.count == 0) return Error(Code::bad_request, "count must be at least 1");
        w.uint(field::count, *req.count);
    }
    opt_int(w, field::timeout_ms, req.timeout_ms);
    opt_int(w, field::ttr_ms, req.ttr_ms);
    if (req.release_on_disconnect)
        w.boolean(field::release_on_disconnect, *req.release_on_disconnect);
    return w.finish();
}

Result<std::string> encode_request(const TouchRequest& req, uint64_t id) {
    RequestWriter w(TouchRequest::op, id);
    w.queue(req.queue);
    if (!w.key_field(field::key, req.key)) return empty_key();
    w.uint(field::lease, req.lease);
    opt_int(w, field::ttr_ms, req.ttr_ms);
    return w.finish();
}

Result<std::string> encode_request(const AckRequest& req, uint64_t id) {
    RequestWriter w(AckRequest::op, id);
    w.queue(req.queue);
    if (!w.key_field(field::key, req.key)) return empty_key();
    w.uint(field::lease, req.lease);
    if (req.payload) {
        if (Status st = w.payload(field::payload, *req.payload); !st.ok()) return st.error();
    }
    opt_int(w, field::time, req.time);
    return w.finish();
}

Result<std::string> encode_request(const ReleaseRequest& req, uint64_t id) {
    RequestWriter w(ReleaseRequest::op, id);
    w.queue(req.queue);
    if (!w.key_field(field::key, req.key)) return empty_key();
    w.uint(field::lease, req.lease);
    opt_int(w, field::delay_ms, req.delay_ms);
    return w.finish();
}

Result<std::string> encode_request(const BuryRequest& req, uint64_t id) {
    RequestWriter w(BuryRequest::op, id);
    w.queue(req.queue);
    if (!w.key_field(field::key, req.key)) return empty_key();
    w.uint(field::lease, req.lease);
    return w.finish();
}

Result<std::string> encode_request(const KickRequest& req, uint64_t id) {
    RequestWriter w(KickRequest::op, id);
    w.queue(req.queue);
    if (req.key) {
        if (!w.key_field(field::key, *req.key)) return empty_key();
        return w.finish();
    }
    if (req.count == 0) return Error(Code::bad_request, "count must be at least 1");
    w.uint(field::count, req.count);
    return w.finish();
}

Result<std::string> encode_request(const StatsRequest& req, uint64_t id) {
    RequestWriter w(StatsRequest::op, id);
    if (req.queue) w.str(field::queue, *req.queue);
    if (req.consistency) w.str(field::consistency, *req.consistency);
    return w.finish();
}

Result<std::string> encode_request(const ListRequest& req, uint64_t id) {
    RequestWriter w(ListRequest::op, id);
    w.queue(req.queue);
    w.str(field::status, req.status);
    if (req.count) w.uint(field::count, *req.count);
    if (req.after) {
        if (!w.key_field(field::after, *req.after)) return empty_key();
        if (req.after_time) w.int64(field::after_time, *req.after_time);
    }
    if (req.consistency) w.str(field::consistency, *req.consistency);
    return w.finish();
}

Result<std::string> encode_request(const BackupRequest& req, uint64_t id) {
    RequestWriter w(BackupRequest::op, id);
    if (req.backup) {
        w.uint(field::backup, req.backup);
        w.uint(field::seq, req.seq);
    }
    return w.finish();
}

Result<std::string> encode_request(const StatusRequest&, uint64_t id) {
    return RequestWriter(StatusRequest::op, id).finish();
}

Result<std::string> encode_request(const MembersRequest&, uint64_t id) {
    return RequestWriter(MembersRequest::op, id).finish();
}

namespace {
Result<std::string> member_request(std::string_view op, const std::string& name, uint64_t id) {
    if (name.empty()) return Error(Code::bad_request, "a member needs a name");
    RequestWriter w(op, id);
    w.str(field::name, name);
    return w.finish();
}
}  // namespace

Result<std::string> encode_request(const MemberAddRequest& req, uint64_t id) {
    if (req.name.empty()) return Error(Code::bad_request, "a member needs a name");
    if (req.peer.empty() || req.client.empty())
        return Error(Code::bad_request, "member_add needs a peer and a client address");
    RequestWriter w(MemberAddRequest::op, id);
    w.str(field::name, req.name);
    w.str(field::peer, req.peer);
    w.str(field::client, req.client);
    if (!req.admin.empty()) w.str(field::admin, req.admin);
    return w.finish();
}

Result<std::string> encode_request(const MemberPromoteRequest& req, uint64_t id) {
    return member_request(MemberPromoteRequest::op, req.name, id);
}

Result<std::string> encode_request(const MemberRemoveRequest& req, uint64_t id) {
    return member_request(MemberRemoveRequest::op, req.name, id);
}

uint32_t read_frame_length(const unsigned char h[kFrameHeaderBytes]) {
    return (uint32_t{h[0]} << 24) | (uint32_t{h[1]} << 16) | (uint32_t{h[2]} << 8) | h[3];
}

}  // namespace dueq::client
