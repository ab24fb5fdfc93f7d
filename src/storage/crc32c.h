// CRC-32C (Castagnoli), the checksum of every record dueq stores. Uses the CPU's crc32
// instruction where it has one (SSE 4.2), else a table; both give the same value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dueq::storage {

std::uint32_t crc32c(const void* data, std::size_t n);
// The CRC of (what `crc` was computed over) followed by `data`:
// crc32c_extend(crc32c(a), b) == crc32c(a + b).
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n);

}  // namespace dueq::storage
