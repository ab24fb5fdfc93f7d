#include "shard/request_map.h"

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
    pack_str(pk, "op"), pack_str(pk, op);
    pack_entries(pk);
    return std::make_shared<msgpack::object_handle>(msgpack::unpack(buf.data(), buf.size()));
}

}  // namespace dueq::shard
