#include <catch2/catch.hpp>

#include "client/payload.h"

using namespace dueq::client;

TEST_CASE("JSON payloads round-trip", "[payload]") {
    for (const char* text : {R"({"a":1,"b":[true,null,"x"],"c":-2.5})", "null", "\"s\"", "[]", "18446744073709551615"}) {
        auto p = payload_from_json(text);
        REQUIRE(p.ok());
        auto back = payload_to_json(*p);
        REQUIRE(back.ok());
        CHECK(*back == text);
    }
}

TEST_CASE("bad JSON and bad msgpack are errors", "[payload]") {
    CHECK(payload_from_json("{").code() == Code::bad_request);
    CHECK(payload_from_json("").code() == Code::bad_request);
    CHECK(payload_to_json("\xc1").code() == Code::bad_request);
    CHECK(payload_to_json("").code() == Code::bad_request);
}

TEST_CASE("msgpack-only types are spelled out", "[payload]") {
    CHECK(*payload_to_json(std::string("\xc4\x03" "abc", 5)) == R"({"$bin":"YWJj"})");
    CHECK(*payload_to_json(std::string("\xd4\x05\x01", 3)) == R"({"$ext":5,"data":"AQ=="})");
    CHECK(*payload_to_json(std::string("\x81\x01\x02", 3)) == R"({"1":2})");
}
