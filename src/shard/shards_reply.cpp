#include "shard/shards_reply.h"

#include "net/frame.h"
#include "wire/protocol.h"

namespace dueq::shard {

std::string shards_reply(std::uint64_t id, const ShardMap& map, const std::string& own,
                         const std::vector<std::string>& leaders) {
    net::FrameBuilder f;
    auto& pk = f.pk();
    f.begin_ok(id, 5);
    f.key(wire::field::version), pk.pack_uint64(map.version);
    f.key(wire::field::buckets), pk.pack_uint32(map.bucket_count);
    f.key(wire::field::hash), f.str(wire::word::fnv1a64);
    f.key(wire::field::shard), f.str(own);
    f.key(wire::field::shards), pk.pack_array(std::uint32_t(map.shards.size()));
    for (std::size_t i = 0; i < map.shards.size(); ++i) {
        const Shard& s = map.shards[i];
        pk.pack_map(5);
        f.key(wire::field::name), f.str(s.name);
        f.key(wire::field::membership_index), pk.pack_uint64(s.membership_index);
        f.key(wire::field::buckets), pk.pack_array(std::uint32_t(s.buckets.size()));
        for (const auto& [lo, hi] : s.buckets) {
            pk.pack_array(2);
            pk.pack_uint32(lo), pk.pack_uint32(hi);
        }
        f.key(wire::field::members), pk.pack_array(std::uint32_t(s.members.size()));
        for (const auto& m : s.members) {
            pk.pack_map(2);
            f.key(wire::field::id), f.str(m.id);
            f.key(wire::field::client), f.str(m.client);
        }
        f.key(wire::field::leader), f.str(i < leaders.size() ? leaders[i] : "");
    }
    return f.finish();
}

}  // namespace dueq::shard
