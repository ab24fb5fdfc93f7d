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
