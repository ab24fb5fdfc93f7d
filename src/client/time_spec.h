// Times and durations as people type them (dueqctl and other tools).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "client/status.h"

namespace dueq::client {

// A duration: "250ms", "5s", "2m", "1h", "1d", sums such as "1h30m", or a bare
// non-negative integer meaning milliseconds. Error: bad_request.
Result<int64_t> parse_duration_ms(std::string_view text);

// A point in time as ms since the Unix epoch:
//   - a bare integer: absolute ms since the epoch ("1767225600000");
//   - "now", or relative to now_ms: "+90s", "+5m", "+1h", "+250ms", "-10m" (any duration);
//   - ISO-8601 UTC: "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.250Z",
//     "2026-01-01T01:00:00+01:00", "2026-01-01" (midnight UTC).
// Error: bad_request.
Result<int64_t> parse_time_ms(std::string_view text, int64_t now_ms);

// "2026-01-01T00:00:00.250Z"
std::string format_time_ms(int64_t ms);
// "1h2m3.5s", "250ms", "-5m"
std::string format_duration_ms(int64_t ms);

// The local wall clock, ms since the epoch.
int64_t wall_clock_ms();

}  // namespace dueq::client
