#include "net/frame.h"

#include "common/version.h"
#include "wire/protocol.h"

#include <utility>

namespace dueq::net {

namespace field = wire::field;

void FrameBuilder::begin_ok(std::uint64_t id, std::uint32_t extra) {
    pk_.pack_map(2 + extra);
    key(field::id);
    pk_.pack_uint64(id);
    key(field::ok);
    pk_.pack_true();
}

std::string FrameBuilder::finish() {
    std::string& b = buf_.bytes;
    const auto n = std::uint32_t(b.size() - 4);
    b[0] = char(n >> 24);
    b[1] = char(n >> 16);
    b[2] = char(n >> 8);
    b[3] = char(n);
    return std::move(b);
}

namespace {
// {"id": id, "ok": false, "error": {"code": code, "message": message, ...}}: `extra` more
// fields of the error map must follow.
void begin_error(FrameBuilder& f, std::uint64_t id, queue::Code code, std::string_view message,
                 std::uint32_t extra) {
    f.pk().pack_map(3);
    f.key(field::id), f.pk().pack_uint64(id);
    f.key(field::ok), f.pk().pack_false();
    f.key(field::error), f.pk().pack_map(2 + extra);
    f.key(field::code), f.str(queue::to_string(code));
    f.key(field::message), f.str(message);
}
}  // namespace

std::string error_frame(std::uint64_t id, queue::Code code, std::string_view message,
                        const std::optional<std::string>& leader) {
    FrameBuilder f;
    begin_error(f, id, code, message, leader ? 1 : 0);
    if (leader) f.key(field::leader), f.str(*leader);
    return f.finish();
}

std::string wrong_shard_frame(std::uint64_t id, std::string_view message, const std::string& leader,
                              std::string_view shard, std::uint32_t bucket, std::uint64_t gen) {
    FrameBuilder f;
    begin_error(f, id, queue::Code::wrong_shard, message, 4);
    f.key(field::leader), f.str(leader);
    f.key(field::shard), f.str(shard);
    f.key(field::bucket), f.pk().pack_uint32(bucket);
    f.key(field::gen), f.pk().pack_uint64(gen);
    return f.finish();
}

std::string hello_frame(std::uint64_t id, std::uint64_t session, const std::string& node_id,
                        const std::string& leader, const std::string& mode) {
    FrameBuilder f;
    f.begin_ok(id, 6);
    f.key(field::session);
    f.pk().pack_uint64(session);
    f.key(field::node_id);
    f.str(node_id);
    f.key(field::leader);
    f.str(leader);
    f.key(field::protocol);
    f.pk().pack_uint32(wire::kProtocolVersion);
    f.key(field::mode);
    f.str(mode);
    f.key(field::version);
    f.str(dueq::build());
    return f.finish();
}

}  // namespace dueq::net
