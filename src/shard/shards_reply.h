// The answer to the `shards` op (docs/protocol.md), the same from a node and a proxy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shard/shard_map.h"

namespace dueq::shard {

// {id, ok, version, buckets, hash: "fnv1a64", shard: own ("" from a proxy),
//  shards: [{name, membership_index, buckets: [[first, last], ...], members: [{id, client}],
//  leader, moved: [[bucket, gen], ...]}], moves: [{bucket, phase, shard, gen}]}.
// `leaders[i]` is the best known client address of shard i's leader ("" when unknown).
// `moves`: the own shard's move table, whose moves in progress are listed (a proxy: none).
std::string shards_reply(std::uint64_t id, const ShardMap& map, const std::string& own,
                         const std::vector<std::string>& leaders,
                         const BucketMoves* moves = nullptr);
// Whether a bucket in this phase is between owners (listed in `moves`).
bool in_progress(BucketPhase p);

}  // namespace dueq::shard
