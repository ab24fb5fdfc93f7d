#include "shard/bucket_hash.h"

namespace dueq::shard {

std::uint64_t fnv1a64(std::string_view queue, std::string_view key) {
    constexpr std::uint64_t kPrime = 0x100000001b3ULL;
    std::uint64_t h = 0xcbf29ce484222325ULL;
    auto mix = [&](std::string_view bytes) {
        for (unsigned char c : bytes)
            h = (h ^ c) * kPrime;
    };
    mix(queue);
    h = (h ^ 0u) * kPrime;
    mix(key);
    return h;
}

}  // namespace dueq::shard
