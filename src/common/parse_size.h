// A command-line count: decimal digits only, nothing before or after them.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace dueq {

inline bool parse_size(const char* s, std::size_t* out) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (end == s || *end != '\0' || *s == '-') return false;
    *out = static_cast<std::size_t>(v);
    return true;
}

}  // namespace dueq
