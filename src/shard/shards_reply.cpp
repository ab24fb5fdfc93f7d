#include "shard/shards_reply.h"

#include "net/frame.h"

namespace dueq::shard {

std::string shards_reply(std::uint64_t id, const ShardMap& map, const std::string& own,
                         const std::vector<std::string>& leaders) {
    net::FrameBuilder f;
    auto& pk = f.pk();
    f.begin_ok(id, 5);
    f.key("version"), pk.pack_uint64(map.version);
    f.key("buckets"), pk.pack_uint32(map.bucket_count);
    f.key("hash"), f.str("fnv1a64");
    f.key("shard"), f.str(own);
    f.key("shards"), pk.pack_array(std::uint32_t(map.shards.size()));
    for (std::size_t i = 0; i < map.shards.size(); ++i) {
        const Shard& s = map.shards[i];
        pk.pack_map(4);
        f.key("name"), f.str(s.name);
        f.key("buckets"), pk.pack_array(std::uint32_t(s.buckets.size()));
        for (const auto& [lo, hi] : s.buckets) {
            pk.pack_array(2);
            pk.pack_uint32(lo), pk.pack_uint32(hi);
        }
        f.key("members"), pk.pack_array(std::uint32_t(s.members.size()));
        for (const auto& m : s.members) {
            pk.pack_map(2);
            f.key("id"), f.str(m.id);
            f.key("client"), f.str(m.client);
        }
        f.key("leader"), f.str(i < leaders.size() ? leaders[i] : "");
    }
    return f.finish();
}

}  // namespace dueq::shard
