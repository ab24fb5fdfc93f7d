// Big-endian 64-bit fields: log keys (so that they sort by index) and record bodies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dueq::storage {

inline void put_be64(std::string& out, std::uint64_t v) {
    for (int i = 7; i >= 0; --i)
        out.push_back(char(v >> (8 * i)));
}

// Reads the first 8 bytes of `s`, which must have them.
inline std::uint64_t get_be64(std::string_view s) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
        v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
}

}  // namespace dueq::storage
