// The shard map (docs/sharding.md): which Raft group serves a key. A key's bucket is a
// hash of (queue, key) modulo a fixed bucket count; the map assigns every bucket to one
// shard. Buckets, not keys, are what a later change would move between shards, so the
// bucket count never changes for the life of a deployment, while the assignment carries a
// version that grows with every change and that every node and proxy reports.
//
// The map lives in its own TOML file, shared by every node and proxy, so that one edit
// and a SIGHUP changes it everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "shard/bucket_hash.h"
#include "shard/bucket_moves.h"

namespace dueq::shard {

struct MapError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct ShardMember {
    std::string id;
    std::string client;  // host:port clients (and forwarding nodes) reach it at
    bool operator==(const ShardMember&) const = default;
};

struct Shard {
    std::string name;
    std::vector<ShardMember> members;
    // Inclusive bucket ranges, sorted, not overlapping.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> buckets;
    // Where `members` came from: 0 for the map file, else the Raft index of the shard's
    // committed membership that listed them (a later change has a larger one). The file's
    // list only seeds routing; the shard's own membership, once learned, replaces it.
    std::uint64_t membership_index = 0;
};

struct ShardMap {
    std::uint64_t version = 0;
    std::uint32_t bucket_count = 1;
    std::vector<Shard> shards;
    std::vector<std::uint16_t> owner;  // bucket -> index into shards
    // bucket -> the generation of the move that gave it to its owner (docs/sharding.md,
    // "Moving buckets"); 0, or the vector empty: the map file's owner.
    std::vector<MoveGen> owner_gen;

    std::uint32_t bucket_of(std::string_view queue, std::string_view key) const;
    // Index into shards of the shard serving (queue, key).
    std::size_t shard_of(std::string_view queue, std::string_view key) const {
        return owner[bucket_of(queue, key)];
    }
    // Index of the shard named `name`, or nullopt.
    std::optional<std::size_t> find(std::string_view name) const;
    // How many buckets shard i owns.
    std::uint32_t bucket_total(std::size_t i) const;
    MoveGen gen_of(Bucket b) const { return b < owner_gen.size() ? owner_gen[b] : 0; }
    // Bucket b belongs to shard i since the move of generation `gen`: taken when `gen` is
    // past the one held (a later move of b always has a larger one), and each shard's
    // `buckets` ranges follow. Returns whether it changed the owner or the generation.
    bool learn_owner(Bucket b, std::size_t i, MoveGen gen);
};

// Parses the map's TOML text; `source` names it in errors. Every bucket must belong to
// exactly one shard, shard names and member addresses must be unique.
ShardMap parse_shard_map(const std::string& text, const std::string& source);
ShardMap load_shard_map_file(const std::string& path);

// The map a node without [shard] routes by: one shard, named `name`, owning every bucket.
ShardMap single_shard_map(const std::string& name, std::vector<ShardMember> members);

// Why a node serving shard `own` (a proxy: "") must refuse to switch from `current` to
// `next`, or "" if it may. Only a move (shard move) gives a bucket's tasks to another
// shard, so every bucket must stay with the shard (by name) that has it, be it by the old
// file or by a move (a file may name the new owner of a moved bucket, or still the old);
// the bucket count stays, and a node's own shard must still be there. A version that does
// not grow is refused too, so two different maps never share one. Shards may be added
// (with no buckets: moves give them some).
std::string reload_refusal(const ShardMap& current, const ShardMap& next, const std::string& own);

// Reads the map file at `path` to replace `current` (reload_refusal's rules, `own` as
// there): the new map, or nullopt with why it is refused in `why`.
// `next` (a reloaded file) with what `current` learned of moves: a bucket a move gave to
// another shard keeps that owner and generation.
void keep_learned_owners(const ShardMap& current, ShardMap& next);

std::optional<ShardMap> load_for_reload(const std::string& path, const ShardMap& current,
                                        const std::string& own, std::string& why);

}  // namespace dueq::shard
