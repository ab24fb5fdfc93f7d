// The bucket of a key (docs/sharding.md, "The map"), fixed by the protocol so that clients
// in any language route alike, and so that every replica of a shard agrees on which of its
// tasks a moving bucket holds.
#pragma once

#include <cstdint>
#include <string_view>

#include "wire/limits.h"

namespace dueq::shard {

inline constexpr std::uint32_t kMaxBuckets = limits::kMaxBuckets;  // the most a map may have

// 64-bit FNV-1a over the queue's bytes, one 0x00 byte, then the key's bytes.
std::uint64_t fnv1a64(std::string_view queue, std::string_view key);

inline std::uint32_t bucket_of(std::string_view queue, std::string_view key,
                               std::uint32_t bucket_count) {
    return std::uint32_t(fnv1a64(queue, key) % bucket_count);
}

}  // namespace dueq::shard
