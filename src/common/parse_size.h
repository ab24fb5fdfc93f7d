// A command-line count: decimal digits only, nothing before or after them.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdlib>

namespace dueq {

inline bool parse_size(const char* s, std::size_t* out) {
    if (*s < '0' || *s > '9') return false;  // strtoull would skip spaces, take + and -
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (*end != '\0' || errno == ERANGE) return false;
    *out = static_cast<std::size_t>(v);
    return true;
}

}  // namespace dueq
