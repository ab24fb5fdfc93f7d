// Strict UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF). Keys are bytes on the wire; they travel as msgpack str only when this says
// yes and as bin otherwise, because strict decoders reject a whole frame whose str is not
// UTF-8. Header-only: the client library uses it without linking the node's net code.
#pragma once

#include <string_view>

namespace dueq::net {

inline bool valid_utf8(std::string_view s) {
    auto cont = [&](std::size_t i, unsigned char lo = 0x80, unsigned char hi = 0xbf) {
        if (i >= s.size()) return false;
        const auto c = static_cast<unsigned char>(s[i]);
        return c >= lo && c <= hi;
    };
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            i += 1;
        } else if (c >= 0xc2 && c <= 0xdf) {
            if (!cont(i + 1)) return false;
            i += 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            const unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
            if (!cont(i + 1, lo, hi) || !cont(i + 2)) return false;
            i += 3;
        } else if (c >= 0xf0 && c <= 0xf4) {
            const unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
            if (!cont(i + 1, lo, hi) || !cont(i + 2) || !cont(i + 3)) return false;
            i += 4;
        } else {
            return false;
        }
    }
    return true;
}

}  // namespace dueq::net
