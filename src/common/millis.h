// Time in the whole code base: milliseconds since the Unix epoch (a clock reading or a
// log time), or a duration in milliseconds. Signed, so that differences need no care.
#pragma once

#include <cstdint>

namespace dueq {
using Millis = std::int64_t;
}  // namespace dueq
