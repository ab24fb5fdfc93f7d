// Request frames as bytes, and response decoding including the hostile cases.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "client/codec.h"
#include "client/payload.h"
#include "client/fake_server.h"

using namespace dueq::client;
using dueq::client::testing::Json;
using dueq::client::testing::frame_bytes;

namespace {

// Decodes a whole request frame back into JSON, checking the length prefix.
Json request_json(const std::string& frame) {
    REQUIRE(frame.size() >= 4);
    const uint32_t n = read_frame_length(reinterpret_cast<const unsigned char*>(frame.data()));
    REQUIRE(n == frame.size() - 4);
    return Json::from_msgpack(frame.substr(4));
}

std::string body_of(const Json& j) {
    auto v = Json::to_msgpack(j);
    return std::string(v.begin(), v.end());
}

}  // namespace

TEST_CASE("ping encodes to the documented bytes", "[codec]") {
    auto frame = encode_request(PingRequest{}, 1);
    REQUIRE(frame.ok());
    // 4-byte length 13, fixmap(2), "op" "ping", "id" 1: the example in docs/protocol.md.
    const std::string want("\x00\x00\x00\x0d\x82\xa2op\xa4ping\xa2id\x01", 17);
    CHECK(*frame == want);
    CHECK(request_json(*frame) == Json({{"op", "ping"}, {"id", 1}}));
}

TEST_CASE("put carries only the fields that were set", "[codec]") {
    PutRequest put;
    put.queue = "tokens";
    put.key = "k1";
    put.payload = *payload_from_json(R"({"a":1})");
    auto j = request_json(*encode_request(put, 7));
    CHECK(j == Json({{"op", "put"}, {"id", 7}, {"queue", "tokens"}, {"key", "k1"}, {"payload", {{"a", 1}}}}));

    put.time = 1700000000000;
    put.mode = PutMode::insert;
    j = request_json(*encode_request(put, 8));
    CHECK(j["time"] == 1700000000000);
    CHECK(j["mode"] == "insert");
}

TEST_CASE("every op encodes its fields", "[codec]") {
    CHECK(request_json(*encode_request(HelloRequest{.session = 5, .token = "t"}, 1)) ==
          Json({{"op", "hello"}, {"id", 1}, {"session", 5}, {"token", "t"}}));
    CHECK(request_json(*encode_request(DeclareRequest{.queue = "q", .lead_ms = 300000,
                                                      .late_share = 0.25}, 2)) ==
          Json({{"op", "declare"}, {"id", 2}, {"queue", "q"}, {"lead_ms", 300000}, {"late_share", 0.25}}));
    CHECK(request_json(*encode_request(GetRequest{.key = "k", .consistency = "leader"}, 3)) ==
          Json({{"op", "get"}, {"id", 3}, {"queue", "default"}, {"key", "k"}, {"consistency", "leader"}}));
    CHECK(request_json(*encode_request(DeleteRequest{.queue = "q", .key = "k"}, 4)) ==
          Json({{"op", "delete"}, {"id", 4}, {"queue", "q"}, {"key", "k"}}));
    CHECK(request_json(*encode_request(TakeRequest{.queue = "q", .count = 2, .timeout_ms = 5000,
                                                   .ttr_ms = 30000, .release_on_disconnect = false}, 5)) ==
          Json({{"op", "take"}, {"id", 5}, {"queue", "q"}, {"count", 2}, {"timeout_ms", 5000},
                {"ttr_ms", 30000}, {"release_on_disconnect", false}}));
    CHECK(request_json(*encode_request(TouchRequest{.key = "k", .lease = 9, .ttr_ms = 1000}, 6)) ==
          Json({{"op", "touch"}, {"id", 6}, {"queue", "default"}, {"key", "k"}, {"lease", 9}, {"ttr_ms", 1000}}));
    AckRequest ack{.queue = "q", .key = "k", .lease = 9, .payload = *payload_from_json("[1]"), .time = 77};
    CHECK(request_json(*encode_request(ack, 7)) ==
          Json({{"op", "ack"}, {"id", 7}, {"queue", "q"}, {"key", "k"}, {"lease", 9}, {"payload", {1}}, {"time", 77}}));
    CHECK(request_json(*encode_request(ReleaseRequest{.key = "k", .lease = 1, .delay_ms = 10}, 8)) ==
          Json({{"op", "release"}, {"id", 8}, {"queue", "default"}, {"key", "k"}, {"lease", 1}, {"delay_ms", 10}}));
    CHECK(request_json(*encode_request(BuryRequest{.key = "k", .lease = 1}, 9)) ==
          Json({{"op", "bury"}, {"id", 9}, {"queue", "default"}, {"key", "k"}, {"lease", 1}}));
    CHECK(request_json(*encode_request(KickRequest{.queue = "q", .count = 3}, 10)) ==
          Json({{"op", "kick"}, {"id", 10}, {"queue", "q"}, {"count", 3}}));
    CHECK(request_json(*encode_request(StatsRequest{}, 11)) == Json({{"op", "stats"}, {"id", 11}}));
    CHECK(request_json(*encode_request(StatsRequest{.queue = "q"}, 12)) ==
          Json({{"op", "stats"}, {"id", 12}, {"queue", "q"}}));
    CHECK(request_json(*encode_request(StatusRequest{}, 13)) == Json({{"op", "status"}, {"id", 13}}));
}

TEST_CASE("keys that are not UTF-8 go out as bin", "[codec]") {
    PutRequest put;
    put.key = std::string("\xff\x00k", 3);
    auto frame = *encode_request(put, 1);
    auto j = request_json(frame);
    REQUIRE(j["key"].is_binary());
    CHECK(j["key"].get_binary().size() == 3);
    CHECK(j["payload"].is_null());  // empty payload means nil
}

TEST_CASE("requests that cannot be valid are refused before sending", "[codec]") {
    CHECK(encode_request(PutRequest{.key = ""}, 1).code() == Code::bad_request);
    CHECK(encode_request(PutRequest{.key = "k", .payload = "\xc1"}, 1).code() == Code::bad_request);
    CHECK(encode_request(PutRequest{.key = "k", .payload = "\x01\x02"}, 1).code() == Code::bad_request);
    CHECK(encode_request(TakeRequest{.count = 0}, 1).code() == Code::bad_request);
    CHECK(encode_request(KickRequest{.count = 0}, 1).code() == Code::bad_request);
    PutRequest huge{.key = "k"};
    huge.payload = std::string("\xdb\x01\x00\x00\x01", 5) + std::string((16u << 20) + 1, 'x');
    CHECK(encode_request(huge, 1).code() == Code::too_large);
}

TEST_CASE("responses decode into typed results", "[codec]") {
    auto frame = decode_response(body_of({{"id", 4}, {"ok", true}, {"version", 12}}));
    REQUIRE(frame.ok());
    CHECK(frame->id == 4);
    CHECK(frame->ok);
    PutResponse put;
    REQUIRE(decode_result(*frame->map, &put).ok());
    CHECK(put.version == 12);

    Json stats = {{"id", 1}, {"ok", true},
                  {"queues", {{{"queue", "a"}, {"ready", 3}, {"next_due", 100}},
                              {{"queue", "b"}, {"buried", 1}, {"oldest_late", -5}}}}};
    frame = decode_response(body_of(stats));
    StatsResponse s;
    REQUIRE(decode_result(*frame->map, &s).ok());
    REQUIRE(s.queues.size() == 2);
    CHECK(s.queues[0].ready == 3);
    CHECK(s.queues[0].next_due == 100);
    CHECK(s.queues[1].oldest_late == -5);
    CHECK_FALSE(s.queues[1].next_due);

    Json status = {{"id", 1}, {"ok", true}, {"node_id", 2}, {"role", "leader"}, {"term", 3},
                   {"leader", nullptr}, {"commit_index", 10}, {"applied_index", 9},
                   {"peers", Json::array()}, {"mode", "normal"}};
    frame = decode_response(body_of(status));
    StatusResponse st;
    REQUIRE(decode_result(*frame->map, &st).ok());
    CHECK(st.node_id == "2");
    CHECK(st.leader.empty());
    CHECK(st.commit_index == 10);
}

TEST_CASE("error responses decode into Error", "[codec]") {
    Json err = {{"id", 9}, {"ok", false},
                {"error", {{"code", "not_leader"}, {"message", "follower"}, {"leader", "h:1"}}}};
    auto frame = decode_response(body_of(err));
    REQUIRE(frame.ok());
    CHECK_FALSE(frame->ok);
    CHECK(frame->error.code == Code::not_leader);
    CHECK(frame->error.leader == "h:1");
    CHECK(frame->error.to_string() == "not_leader: follower (leader h:1)");
}

TEST_CASE("malformed responses are refused, never trusted", "[codec]") {
    CHECK(decode_response("").code() == Code::internal);
    CHECK(decode_response("\x01").code() == Code::internal);                // not a map
    CHECK(decode_response(body_of({{"ok", true}})).code() == Code::internal);  // no id
    CHECK(decode_response(body_of({{"id", 1}})).code() == Code::internal);     // no ok
    CHECK(decode_response(body_of({{"id", 1}, {"ok", false}})).code() == Code::internal);
    CHECK(decode_response(body_of({{"id", -1}, {"ok", true}})).code() == Code::internal);
    // Claimed sizes far beyond the bytes present.
    CHECK(decode_response(std::string("\xdf\xff\xff\xff\xff", 5)).code() == Code::internal);
    CHECK(decode_response(std::string("\x81\xa2id\xdb\xff\xff\xff\xff", 9)).code() == Code::internal);
    // Trailing garbage after the map.
    CHECK(decode_response(body_of({{"id", 1}, {"ok", true}}) + "x").code() == Code::internal);
    // Deep nesting.
    std::string deep = "\x81\xa1x";
    for (int i = 0; i < 100; ++i) deep += "\x91";
    deep += "\xc0";
    CHECK(decode_response(deep).code() == Code::internal);
    // Over the frame limit.
    DecodeLimits small;
    small.max_frame_bytes = 8;
    CHECK(decode_response(body_of({{"id", 1}, {"ok", true}, {"x", "0123456789"}}), small).code() ==
          Code::too_large);
}

TEST_CASE("peek_response reads id and ok in place, and refuses what decode_response does",
          "[codec]") {
    auto head = peek_response(body_of({{"ok", true}, {"id", 77}, {"version", 12}}));
    REQUIRE(head.ok());
    CHECK(head->id == 77);
    CHECK(head->ok);
    head = peek_response(body_of({{"id", 5}, {"ok", false}, {"error", {{"code", "moving"}}}}));
    REQUIRE(head.ok());
    CHECK_FALSE(head->ok);
    // A non-negative id in a signed encoding is an unsigned integer to msgpack-c too.
    head = peek_response(std::string("\x82\xa2id\xd0\x07\xa2ok\xc3", 10));
    REQUIRE(head.ok());
    CHECK(head->id == 7);
    // The first entry of a repeated name counts, as in msgpack-c's lookup.
    head = peek_response(std::string("\x83\xa2id\x01\xa2id\x02\xa2ok\xc3", 13));
    REQUIRE(head.ok());
    CHECK(head->id == 1);
    const std::vector<std::string> bad = {
        "", "\x01", body_of({{"ok", true}}), body_of({{"id", 1}}),
        body_of({{"id", -1}, {"ok", true}}), body_of({{"id", 1}, {"ok", 1}}),
        body_of({{"id", "1"}, {"ok", true}}), body_of({{"id", 1}, {"ok", true}}) + "x",
        std::string("\xdf\xff\xff\xff\xff", 5)};
    for (const auto& b : bad) {
        INFO("body of " << b.size() << " bytes");
        CHECK(peek_response(b).code() == Code::internal);
        CHECK(decode_response(b).code() == Code::internal);
    }
    DecodeLimits small;
    small.max_frame_bytes = 8;
    CHECK(peek_response(body_of({{"id", 1}, {"ok", true}, {"x", "0123456789"}}), small).code() ==
          Code::too_large);
}

TEST_CASE("a result with a field of the wrong type names the field", "[codec]") {
    auto frame = decode_response(body_of({{"id", 1}, {"ok", true}, {"version", "twelve"}}));
    PutResponse put;
    auto st = decode_result(*frame->map, &put);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("version") != std::string::npos);
    TakeResponse take;
    frame = decode_response(body_of({{"id", 1}, {"ok", true}, {"tasks", {{{"key", "k"}}}}}));
    CHECK_FALSE(decode_result(*frame->map, &take).ok());
}
