#include "shard/request_map.h"
#include "wire/protocol.h"

namespace dueq::shard {

void pack_str(Packer& pk, std::string_view s) {
    pk.pack_str(std::uint32_t(s.size()));
    pk.pack_str_body(s.data(), std::uint32_t(s.size()));
}

MsgHandle request_map(std::string_view op, std::uint32_t entries,
                      const std::function<void(Packer&)>& pack_entries) {
    msgpack::sbuffer buf;
    Packer pk(buf);
    pk.pack_map(entries + 1);
    pack_str(pk, wire::field::op), pack_str(pk, op);
    pack_entries(pk);
    return std::make_shared<msgpack::object_handle>(msgpack::unpack(buf.data(), buf.size()));
}

MsgHandle move_request(std::uint32_t first, std::uint32_t count, std::string_view to) {
    const auto op = wire::op_name(to.empty() ? wire::Op::move_cancel : wire::Op::move);
    return request_map(op, to.empty() ? 2 : 3, [&](Packer& pk) {
        pack_str(pk, wire::field::bucket), pk.pack_uint32(first);
        pack_str(pk, wire::field::count), pk.pack_uint32(count);
        if (!to.empty()) pack_str(pk, wire::field::shard), pack_str(pk, to);
    });
}

MsgHandle move_step_request(std::string_view step, std::string_view mac) {
    return request_map(wire::op_name(wire::Op::move_step), 2, [&](Packer& pk) {
        pack_str(pk, wire::field::step);
        pk.pack_bin(std::uint32_t(step.size()));
        pk.pack_bin_body(step.data(), std::uint32_t(step.size()));
        pack_str(pk, wire::field::mac);
        pk.pack_bin(std::uint32_t(mac.size()));
        pk.pack_bin_body(mac.data(), std::uint32_t(mac.size()));
    });
}

std::optional<std::uint32_t> move_count(const msgpack::object& answer) {
    const auto* n = field(answer, wire::field::count);
    if (!n || n->type != msgpack::type::POSITIVE_INTEGER || n->via.u64 > UINT32_MAX)
        return std::nullopt;
    return std::uint32_t(n->via.u64);
}

const msgpack::object* field(const msgpack::object& map, std::string_view name) {
    if (map.type != msgpack::type::MAP) return nullptr;
    for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
        const auto& kv = map.via.map.ptr[i];
        if (kv.key.type == msgpack::type::STR &&
            std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == name)
            return &kv.val;
    }
    return nullptr;
}

std::string bytes_of(const msgpack::object* o) {
    if (o && o->type == msgpack::type::STR) return std::string(o->via.str.ptr, o->via.str.size);
    if (o && o->type == msgpack::type::BIN) return std::string(o->via.bin.ptr, o->via.bin.size);
    return {};
}

}  // namespace dueq::shard
