#include <catch2/catch.hpp>

#include "client/time_spec.h"

using namespace dueq::client;

TEST_CASE("durations", "[time_spec]") {
    CHECK(*parse_duration_ms("250ms") == 250);
    CHECK(*parse_duration_ms("5s") == 5000);
    CHECK(*parse_duration_ms("2m") == 120000);
    CHECK(*parse_duration_ms("1h") == 3600000);
    CHECK(*parse_duration_ms("1d") == 86400000);
    CHECK(*parse_duration_ms("1h30m") == 5400000);
    CHECK(*parse_duration_ms("1500") == 1500);
    CHECK(*parse_duration_ms("0") == 0);
    for (const char* bad : {"", "s", "5x", "-5s", "1h30", "5 s", "99999999999999999999ms", "1.5s"}) {
        INFO(bad);
        CHECK(parse_duration_ms(bad).code() == Code::bad_request);
    }
}

TEST_CASE("times", "[time_spec]") {
    const int64_t now = 1'700'000'000'000;
    CHECK(*parse_time_ms("now", now) == now);
    CHECK(*parse_time_ms("+90s", now) == now + 90000);
    CHECK(*parse_time_ms("+250ms", now) == now + 250);
    CHECK(*parse_time_ms("+1h", now) == now + 3600000);
    CHECK(*parse_time_ms("-5m", now) == now - 300000);
    CHECK(*parse_time_ms("1767225600000", now) == 1767225600000);
    CHECK(*parse_time_ms("2026-01-01T00:00:00Z", now) == 1767225600000);
    CHECK(*parse_time_ms("2026-01-01T00:00:00.250Z", now) == 1767225600250);
    CHECK(*parse_time_ms("2026-01-01T01:00:00+01:00", now) == 1767225600000);
    CHECK(*parse_time_ms("2026-01-01", now) == 1767225600000);
    CHECK(*parse_time_ms("1970-01-01T00:00:00Z", now) == 0);
    for (const char* bad : {"", "+", "+5x", "tomorrow", "2026-13-01", "2026-01-01T25:00:00Z",
                            "2026-01-01T00:00:00Q", "+-5s"}) {
        INFO(bad);
        CHECK(parse_time_ms(bad, now).code() == Code::bad_request);
    }
}

TEST_CASE("formatting", "[time_spec]") {
    CHECK(format_time_ms(1767225600250) == "2026-01-01T00:00:00.250Z");
    CHECK(format_time_ms(0) == "1970-01-01T00:00:00.000Z");
    CHECK(format_time_ms(-1) == "1969-12-31T23:59:59.999Z");
    CHECK(format_duration_ms(250) == "250ms");
    CHECK(format_duration_ms(5400000) == "1h30m");
    CHECK(format_duration_ms(3500) == "3.5s");
    CHECK(format_duration_ms(-300000) == "-5m");
}
