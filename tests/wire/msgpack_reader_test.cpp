#include <catch2/catch.hpp>

#include <msgpack.hpp>

#include "wire/msgpack_reader.h"

using namespace dueq::wire;

namespace {
template <typename T>
std::string packed(const T& v) {
    msgpack::sbuffer b;
    msgpack::pack(b, v);
    return std::string(b.data(), b.size());
}
bool valid(const std::string& s, int depth = 32) {
    std::string why;
    return validate(s, depth, why);
}
}  // namespace

TEST_CASE("validate accepts every msgpack type msgpack-c produces") {
    CHECK(valid(packed(0)));
    CHECK(valid(packed(-1)));
    CHECK(valid(packed(std::int64_t(-5'000'000'000))));
    CHECK(valid(packed(std::uint64_t(1) << 63)));
    CHECK(valid(packed(1.5)));
    CHECK(valid(packed(1.5f)));
    CHECK(valid(packed(true)));
    CHECK(valid(packed(std::string(70000, 'x'))));
    CHECK(valid(packed(std::vector<int>(20, 1))));
    CHECK(valid(packed(std::map<std::string, int>{{"a", 1}, {"b", 2}})));
    CHECK(valid(packed(std::vector<char>(300, 'x'))));  // bin16
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> pk(b);
    pk.pack_nil();
    CHECK(valid(std::string(b.data(), b.size())));
    b.clear();
    pk.pack_ext(3, 7);
    pk.pack_ext_body("abc", 3);
    CHECK(valid(std::string(b.data(), b.size())));
}

TEST_CASE("validate refuses a declared length larger than the frame before walking it") {
    // array32 claiming 4 billion items, followed by nothing
    std::string a32 = "\xdd\xff\xff\xff\xff";
    std::string why;
    CHECK_FALSE(validate(a32, 32, why));
    CHECK(why.find("exceeds") != std::string::npos);
    // map32 likewise
    CHECK_FALSE(valid("\xdf\x7f\xff\xff\xff\x01\x01"));
    // str32 claiming 2 GiB
    CHECK_FALSE(valid(std::string("\xdb\x80\x00\x00\x00", 5) + "abc"));
    // bin8 claiming 10 bytes with 3 present
    CHECK_FALSE(valid(std::string("\xc4\x0a", 2) + "abc"));
}

TEST_CASE("validate refuses truncation, trailing bytes, 0xc1 and deep nesting") {
    const std::string full = packed(std::map<std::string, int>{{"key", 300}});
    for (std::size_t n = 0; n < full.size(); ++n)
        CHECK_FALSE(valid(full.substr(0, n)));
    CHECK(valid(full));
    CHECK_FALSE(valid(full + "x"));
    CHECK_FALSE(valid("\xc1"));
    std::string deep(40, '\x91');  // 40 nested one-element arrays
    deep += '\x00';
    CHECK_FALSE(valid(deep, 32));
    CHECK(valid(deep, 40));
}

TEST_CASE("scalar readers convert only where the value fits") {
    // MsgValue views its buffer: keep each encoding alive while reading it.
    auto check = [](const std::string& bytes, auto&& fn) { fn(read_value(bytes)); };
    check(packed(-3), [](MsgValue v) {
        CHECK(v.as_int() == -3);
        CHECK_FALSE(v.as_uint().has_value());
    });
    check(packed(std::uint64_t(1) << 63), [](MsgValue v) {
        CHECK(v.as_uint() == (std::uint64_t(1) << 63));
        CHECK_FALSE(v.as_int().has_value());
    });
    check(packed(0.25), [](MsgValue v) {
        CHECK(v.as_number() == 0.25);
        CHECK_FALSE(v.as_int().has_value());
    });
    check(packed(std::string("hi")), [](MsgValue v) { CHECK(v.as_str() == "hi"); });
    check(packed(5), [](MsgValue v) { CHECK_FALSE(v.as_str().has_value()); });
    check(packed(true), [](MsgValue v) { CHECK(v.as_bool() == true); });
    check(packed(std::int16_t(-300)), [](MsgValue v) { CHECK(v.as_int() == -300); });
    check(packed(std::int32_t(-70000)), [](MsgValue v) { CHECK(v.as_int() == -70000); });
}

TEST_CASE("MapReader walks entries with their encoded extents") {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> pk(b);
    pk.pack_map(2);
    pk.pack(std::string("a"));
    pk.pack(std::vector<int>{1, 2, 3});
    pk.pack(std::string("b"));
    pk.pack(7);
    const std::string s(b.data(), b.size());
    REQUIRE(valid(s));
    MapReader r(read_value(s));
    auto e1 = r.next();
    REQUIRE(e1);
    CHECK(e1->first.as_str() == "a");
    CHECK(e1->second.type == MsgType::array);
    CHECK(e1->second.encoded == packed(std::vector<int>{1, 2, 3}));
    auto e2 = r.next();
    REQUIRE(e2);
    CHECK(e2->second.as_uint() == 7);
    CHECK_FALSE(r.next());
}

// These were the client library's own checker's cases before the client read responses
// with this reader too.
TEST_CASE("every kind of lie about a length is refused, and nesting is capped at 32") {
    CHECK(valid(std::string("\xd4\x01\x02", 3)));
    CHECK(valid(std::string("\xc7\x02\x05\xaa\xbb", 5)));
    CHECK_FALSE(valid(""));
    CHECK_FALSE(valid("\xc1"));
    CHECK_FALSE(
        valid("\xa3"
              "ab"));
    CHECK_FALSE(valid(std::string("\xdb\xff\xff\xff\xff", 5)));
    CHECK_FALSE(valid(std::string("\xdd\x00\x01\x00\x00\x01", 6)));
    CHECK_FALSE(valid(std::string("\xdf\x00\x00\x00\x01\x01", 6)));  // one pair needs two
    CHECK_FALSE(valid(std::string("\xc6\x00\x00", 3)));
    CHECK_FALSE(valid(std::string("\xcf\x00\x00", 3)));
    CHECK_FALSE(valid(std::string("\xc9\x00\x00\x00\x01", 5)));  // ext32 without its type byte
    CHECK_FALSE(valid(std::string("\x01\x02", 2)));
    std::string ok(32, '\x91');
    ok += '\xc0';
    CHECK(valid(ok));
    std::string deep(33, '\x91');
    deep += '\xc0';
    CHECK_FALSE(valid(deep));
}
