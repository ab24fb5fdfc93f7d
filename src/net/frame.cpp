#include "net/frame.h"

#include <utility>

namespace dueq::net {

void FrameBuilder::begin_ok(std::uint64_t id, std::uint32_t extra) {
    pk_.pack_map(2 + extra);
    key("id");
    pk_.pack_uint64(id);
    key("ok");
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

std::string error_frame(std::uint64_t id, queue::Code code, std::string_view message,
                        const std::optional<std::string>& leader) {
    FrameBuilder f;
    f.pk().pack_map(3);
    f.key("id");
    f.pk().pack_uint64(id);
    f.key("ok");
    f.pk().pack_false();
    f.key("error");
    f.pk().pack_map(leader ? 3 : 2);
    f.key("code");
    f.str(queue::to_string(code));
    f.key("message");
    f.str(message);
    if (leader) {
        f.key("leader");
        f.str(*leader);
    }
    return f.finish();
}

std::string hello_frame(std::uint64_t id, std::uint64_t session, const std::string& node_id,
                        const std::string& leader, const std::string& mode) {
    FrameBuilder f;
    f.begin_ok(id, 5);
    f.key("session");
    f.pk().pack_uint64(session);
    f.key("node_id");
    f.str(node_id);
    f.key("leader");
    f.str(leader);
    f.key("protocol");
    f.pk().pack_uint32(1);
    f.key("mode");
    f.str(mode);
    return f.finish();
}

}  // namespace dueq::net
