// The keys dueq-bench writes, shared with the tools that imitate its load (dueq-log-write).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

// The key of task number i: "k" and i zero-padded to key_bytes (longer if i needs it).
inline std::string key_of(std::uint64_t i, std::size_t key_bytes) {
    std::string digits = std::to_string(i);
    std::string key = "k";
    if (digits.size() + 1 < key_bytes) key.append(key_bytes - 1 - digits.size(), '0');
    return key + digits;
}
