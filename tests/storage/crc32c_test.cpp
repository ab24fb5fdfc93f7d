#include <catch2/catch.hpp>

#include <string>

#include "storage/crc32c.h"

using dueq::storage::crc32c;

namespace {
// Bit by bit, straight from the definition, to check the fast paths against.
std::uint32_t reference(const std::string& s) {
    std::uint32_t c = ~0u;
    for (unsigned char b : s) {
        c ^= b;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78 : c >> 1;
    }
    return ~c;
}
}  // namespace

TEST_CASE("crc32c matches the standard check value and the bitwise definition") {
    CHECK(crc32c("123456789", 9) == 0xe3069283u);
    CHECK(crc32c("", 0) == 0u);
    std::string s;
    for (int n = 0; n < 100; ++n) {
        s.push_back(char(n * 37 + 11));
        CAPTURE(n);
        CHECK(crc32c(s.data(), s.size()) == reference(s));
    }
}
