#include <catch2/catch.hpp>

#include "client/msgpack_check.h"

using namespace dueq::client;

namespace {
bool valid(const std::string& s) { return check_single_msgpack_value(s, MsgpackLimits{}).ok(); }
}  // namespace

TEST_CASE("well-formed values pass", "[msgpack_check]") {
    CHECK(valid("\xc0"));
    CHECK(valid("\x7f"));
    CHECK(valid("\xff"));
    CHECK(valid(std::string("\xa3" "abc")));
    CHECK(valid(std::string("\x92\x01\xa1x", 4)));
    CHECK(valid(std::string("\x81\xa1k\xcb\x00\x00\x00\x00\x00\x00\x00\x00", 12)));
    CHECK(valid(std::string("\xd4\x01\x02", 3)));
    CHECK(valid(std::string("\xc7\x02\x05\xaa\xbb", 5)));
}

TEST_CASE("lies about lengths are caught before allocation", "[msgpack_check]") {
    CHECK_FALSE(valid(""));
    CHECK_FALSE(valid("\xc1"));
    CHECK_FALSE(valid("\xa3" "ab"));
    CHECK_FALSE(valid(std::string("\xdb\xff\xff\xff\xff", 5)));
    CHECK_FALSE(valid(std::string("\xdd\x00\x01\x00\x00\x01", 6)));
    CHECK_FALSE(valid(std::string("\xdf\x00\x00\x00\x01\x01", 6)));  // one pair needs two
    CHECK_FALSE(valid(std::string("\xc6\x00\x00", 3)));
    CHECK_FALSE(valid(std::string("\xcf\x00\x00", 3)));
    CHECK_FALSE(valid(std::string("\xc9\x00\x00\x00\x01", 5)));  // ext32 without its type byte
    CHECK_FALSE(valid(std::string("\x01\x02", 2)));
}

TEST_CASE("nesting is capped", "[msgpack_check]") {
    std::string ok(32, '\x91');
    ok += '\xc0';
    CHECK(valid(ok));
    std::string deep(33, '\x91');
    deep += '\xc0';
    CHECK_FALSE(valid(deep));
    std::size_t consumed = 0;
    CHECK(check_msgpack_value(std::string("\x01\x02", 2), MsgpackLimits{}, &consumed).ok());
    CHECK(consumed == 1);
}
