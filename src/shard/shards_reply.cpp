#include "shard/shards_reply.h"

#include "net/frame.h"
#include "wire/protocol.h"

namespace dueq::shard {

bool in_progress(BucketPhase p) {
    return p != BucketPhase::active && p != BucketPhase::gone && p != BucketPhase::dropped;
}

std::string shards_reply(std::uint64_t id, const ShardMap& map, const std::string& own,
                         const std::vector<std::string>& leaders, const BucketMoves* moves) {
    net::FrameBuilder f;
    auto& pk = f.pk();
    f.begin_ok(id, 6);
    f.key(wire::field::version), pk.pack_uint64(map.version);
    f.key(wire::field::buckets), pk.pack_uint32(map.bucket_count);
    f.key(wire::field::hash), f.str(wire::word::fnv1a64);
    f.key(wire::field::shard), f.str(own);
    f.key(wire::field::shards), pk.pack_array(std::uint32_t(map.shards.size()));
    for (std::size_t i = 0; i < map.shards.size(); ++i) {
        const Shard& s = map.shards[i];
        pk.pack_map(6);
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
        std::vector<std::pair<Bucket, MoveGen>> moved;
        for (Bucket b = 0; b < map.owner_gen.size(); ++b)
            if (map.owner_gen[b] > 0 && map.owner[b] == i) moved.emplace_back(b, map.owner_gen[b]);
        f.key(wire::field::moved), pk.pack_array(std::uint32_t(moved.size()));
        for (const auto& [b, gen] : moved) {
            pk.pack_array(2);
            pk.pack_uint32(b), pk.pack_uint64(gen);
        }
    }
    std::uint32_t n = 0;
    if (moves)
        for (const auto& [b, st] : moves->states())
            n += in_progress(st.phase);
    f.key(wire::field::moves), pk.pack_array(n);
    if (moves)
        for (const auto& [b, st] : moves->states()) {
            if (!in_progress(st.phase)) continue;
            pk.pack_map(4);
            f.key(wire::field::bucket), pk.pack_uint32(b);
            f.key(wire::field::phase), f.str(to_string(st.phase));
            f.key(wire::field::shard), f.str(st.peer);
            f.key(wire::field::gen), pk.pack_uint64(st.gen);
        }
    return f.finish();
}

}  // namespace dueq::shard
