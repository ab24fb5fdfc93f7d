#include "client/time_spec.h"

#include <chrono>
#include <cstdio>
#include <limits>

namespace dueq::client {
namespace {

constexpr int64_t kMaxMs = std::numeric_limits<int64_t>::max() / 4;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads digits at text[*pos...]; false when there are none or the value is absurd.
bool read_uint(std::string_view text, std::size_t* pos, int64_t* out) {
    std::size_t start = *pos;
    int64_t v = 0;
    while (*pos < text.size() && is_digit(text[*pos])) {
        if (v > kMaxMs / 10) return false;
        v = v * 10 + (text[*pos] - '0');
        ++*pos;
    }
    *out = v;
    return *pos > start;
}

bool all_digits(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s) if (!is_digit(c)) return false;
    return true;
}

Error bad_duration(std::string_view text) {
    return Error(Code::bad_request, "bad duration '" + std::string(text) +
                                        "' (want e.g. 250ms, 5s, 2m, 1h, 1h30m)");
}

// Howard Hinnant's days_from_civil: days since 1970-01-01 in the proleptic Gregorian calendar.
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

bool fixed_digits(std::string_view s, std::size_t pos, std::size_t n, int64_t* out) {
    if (pos + n > s.size()) return false;
    int64_t v = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
        if (!is_digit(s[i])) return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

Result<int64_t> parse_iso8601(std::string_view s) {
    const Error bad(Code::bad_request, "bad time '" + std::string(s) +
                                           "' (want ms, +90s, or 2026-01-01T00:00:00Z)");
    int64_t year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, millis = 0;
    if (!fixed_digits(s, 0, 4, &year) || s.size() < 10 || s[4] != '-' ||
        !fixed_digits(s, 5, 2, &month) || s[7] != '-' || !fixed_digits(s, 8, 2, &day)) {
        return bad;
    }
    std::size_t pos = 10;
    int64_t offset_min = 0;
    if (pos < s.size()) {
        if ((s[pos] != 'T' && s[pos] != ' ') || !fixed_digits(s, pos + 1, 2, &hour) ||
            pos + 3 >= s.size() || s[pos + 3] != ':' || !fixed_digits(s, pos + 4, 2, &minute)) {
            return bad;
        }
        pos += 6;
        if (pos < s.size() && s[pos] == ':') {
            if (!fixed_digits(s, pos + 1, 2, &second)) return bad;
            pos += 3;
            if (pos < s.size() && s[pos] == '.') {
                ++pos;
                int64_t scale = 100;
                const std::size_t start = pos;
                while (pos < s.size() && is_digit(s[pos])) {
                    millis += (s[pos] - '0') * scale;
                    scale /= 10;
                    ++pos;
                }
                if (pos == start) return bad;
            }
        }
        if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
            ++pos;
        } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
            int64_t oh = 0, om = 0;
            const int64_t sign = s[pos] == '-' ? -1 : 1;
            if (!fixed_digits(s, pos + 1, 2, &oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
                !fixed_digits(s, pos + 4, 2, &om)) {
                return bad;
            }
            offset_min = sign * (oh * 60 + om);
            pos += 6;
        }
    }
    if (pos != s.size() || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 ||
        minute > 59 || second > 60) {
        return bad;
    }
    const int64_t days = days_from_civil(year, month, day);
    const int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    return secs * 1000 + millis;
}

}  // namespace

Result<int64_t> parse_duration_ms(std::string_view text) {
    if (all_digits(text)) {
        std::size_t pos = 0;
        int64_t v = 0;
        if (!read_uint(text, &pos, &v)) return bad_duration(text);
        return v;
    }
    std::size_t pos = 0;
    int64_t total = 0;
    if (text.empty()) return bad_duration(text);
    while (pos < text.size()) {
        int64_t n = 0;
        if (!read_uint(text, &pos, &n)) return bad_duration(text);
        int64_t unit = 0;
        if (text.substr(pos, 2) == "ms") {
            unit = 1;
            pos += 2;
        } else if (pos < text.size()) {
            switch (text[pos]) {
                case 's': unit = 1000; break;
                case 'm': unit = 60'000; break;
                case 'h': unit = 3'600'000; break;
                case 'd': unit = 86'400'000; break;
                default: return bad_duration(text);
            }
            ++pos;
        } else {
            return bad_duration(text);  // "1h30" : a bare number only stands alone
        }
        if (n > kMaxMs / unit || total > kMaxMs - n * unit) return bad_duration(text);
        total += n * unit;
    }
    return total;
}

Result<int64_t> parse_time_ms(std::string_view text, int64_t now_ms) {
    if (text == "now") return now_ms;
    if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
        auto d = parse_duration_ms(text.substr(1));
        if (!d.ok()) {
            return Error(Code::bad_request, "bad relative time '" + std::string(text) +
                                                "' (want e.g. +90s, +5m, +1h, +250ms, -10m)");
        }
        return text[0] == '+' ? now_ms + *d : now_ms - *d;
    }
    if (all_digits(text)) {
        std::size_t pos = 0;
        int64_t v = 0;
        if (!read_uint(text, &pos, &v)) return Error(Code::bad_request, "time out of range");
        return v;
    }
    return parse_iso8601(text);
}

std::string format_time_ms(int64_t ms) {
    int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    const int64_t millis = ms - secs * 1000;
    int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
    const int64_t rem = secs - days * 86400;
    // civil_from_days, the inverse of days_from_civil.
    days += 719468;
    const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    const int64_t doe = days - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    const int64_t day = doy - (153 * mp + 2) / 5 + 1;
    const int64_t month = mp < 10 ? mp + 3 : mp - 9;
    const int64_t year = yoe + era * 400 + (month <= 2);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ",
                  static_cast<long long>(year), static_cast<long long>(month),
                  static_cast<long long>(day), static_cast<long long>(rem / 3600),
                  static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60),
                  static_cast<long long>(millis));
    return buf;
}

std::string format_duration_ms(int64_t ms) {
    if (ms < 0) return "-" + format_duration_ms(-ms);
    if (ms < 1000) return std::to_string(ms) + "ms";
    std::string out;
    const int64_t h = ms / 3'600'000;
    const int64_t m = ms / 60'000 % 60;
    const int64_t s = ms / 1000 % 60;
    const int64_t rest = ms % 1000;
    if (h) out += std::to_string(h) + "h";
    if (m) out += std::to_string(m) + "m";
    if (s || rest) {
        out += std::to_string(s);
        if (rest) {
            char frac[8];
            std::snprintf(frac, sizeof frac, ".%03lld", static_cast<long long>(rest));
            std::string f = frac;
            while (f.back() == '0') f.pop_back();
            out += f;
        }
        out += "s";
    }
    return out;
}

int64_t wall_clock_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace dueq::client
