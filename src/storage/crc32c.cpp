#include "storage/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace dueq::storage {
namespace {

constexpr std::uint32_t kPoly = 0x82f63b78;  // CRC-32C, reflected

constexpr std::array<std::uint32_t, 256> make_table() {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k)
            c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
        t[i] = c;
    }
    return t;
}
constexpr auto kTable = make_table();

std::uint32_t crc_table(std::uint32_t crc, const unsigned char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        crc = kTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t crc_hw(std::uint32_t crc, const unsigned char* p,
                                                       std::size_t n) {
    std::uint64_t c = crc;
    while (n >= 8) {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    auto c32 = std::uint32_t(c);
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
const bool kHasHw = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
    if (kHasHw) return ~crc_hw(~crc, p, n);
#endif
    return ~crc_table(~crc, p, n);
}

std::uint32_t crc32c(const void* data, std::size_t n) { return crc32c_extend(0, data, n); }

}  // namespace dueq::storage
