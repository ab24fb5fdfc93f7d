// What a relaying node or proxy sends on: the client's request with its own id (and the
// forwarded mark), and for a call that got no answer, the code that tells the client
// whether the request may have been applied.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include "client/codec.h"
#include "client/forward.h"
#include "shard/request_map.h"
#include "shard/router.h"

using namespace dueq;
using client::Code;

namespace {

client::ResponseFrame decoded(const std::string& frame) {
    auto r = client::decode_response(std::string_view(frame).substr(4));
    REQUIRE(r.ok());
    return *r;
}

// A frame's fields, each value printed (msgpack-c's text form).
std::map<std::string, std::string> read_frame(const std::string& frame) {
    REQUIRE(frame.size() > 4);
    const auto n = (std::uint32_t(std::uint8_t(frame[0])) << 24) |
                   (std::uint32_t(std::uint8_t(frame[1])) << 16) |
                   (std::uint32_t(std::uint8_t(frame[2])) << 8) | std::uint8_t(frame[3]);
    REQUIRE(n == frame.size() - 4);
    auto handle = msgpack::unpack(frame.data() + 4, frame.size() - 4);
    const auto& map = handle.get();
    REQUIRE(map.type == msgpack::type::MAP);
    std::map<std::string, std::string> fields;
    for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
        std::ostringstream v;
        v << map.via.map.ptr[i].val;
        fields[map.via.map.ptr[i].key.as<std::string>()] = v.str();
    }
    REQUIRE(fields.size() == map.via.map.size);  // no key twice
    return fields;
}

}  // namespace

TEST_CASE("a relayed request keeps every field, takes the relay's id, and is marked", "[shard]") {
    auto request = shard::request_map("put", 3, [](shard::Packer& pk) {
        shard::pack_str(pk, "id"), pk.pack_uint64(7);
        shard::pack_str(pk, "key"), shard::pack_str(pk, "k1");
        shard::pack_str(pk, "payload"), pk.pack_array(2), pk.pack(1), pk.pack(2);
    });
    const std::string frame = client::repack_with_id(request->get(), 900, {{"forwarded", true}});
    auto fields = read_frame(frame);
    CHECK(fields.size() == 5);  // op, id (once), key, payload, forwarded
    CHECK(fields["id"] == "900");
    CHECK(fields["op"] == "\"put\"");
    CHECK(fields["key"] == "\"k1\"");
    CHECK(fields["payload"] == "[1,2]");
    CHECK(fields["forwarded"] == "true");

    // A sender that already said `forwarded` (false, even) does not get the key twice.
    auto marked = shard::request_map("get", 2, [](shard::Packer& pk) {
        shard::pack_str(pk, "forwarded"), pk.pack(false);
        shard::pack_str(pk, "key"), shard::pack_str(pk, "k1");
    });
    const std::string again = client::repack_with_id(marked->get(), 3, {{"forwarded", true}});
    auto h2 = msgpack::unpack(again.data() + 4, again.size() - 4);
    CHECK(h2.get().via.map.size == 4);  // id, op, key, forwarded
    CHECK(shard::field(h2.get(), "forwarded")->as<bool>());
}

TEST_CASE("a forwarded frame is the sender's bytes with the relay's id and marks", "[shard]") {
    // 20 entries (a map16 header), a sender's id, a binary key and a nested payload.
    auto request = shard::request_map("put", 20, [](shard::Packer& pk) {
        shard::pack_str(pk, "id"), pk.pack_uint64(7);
        shard::pack_str(pk, "key"), pk.pack_bin(2), pk.pack_bin_body("\x00k", 2);
        shard::pack_str(pk, "payload"), pk.pack_map(1), pk.pack("a"), pk.pack_array(2), pk.pack(1),
            pk.pack(-2);
        for (int i = 0; i < 17; ++i)
            shard::pack_str(pk, "f" + std::to_string(i)), pk.pack(i * 1000);
    });
    msgpack::sbuffer body;
    msgpack::pack(body, request->get());
    for (const std::uint64_t id : {std::uint64_t(900), std::uint64_t(1) << 40}) {
        auto frame = client::frame_with_id(std::string_view(body.data(), body.size()), id,
                                           {{"forwarded", true}});
        REQUIRE(frame.ok());
        // The same request as the unpack-and-repack path makes, field for field.
        const std::string repacked =
            client::repack_with_id(request->get(), id, {{"forwarded", true}});
        CHECK(read_frame(*frame) == read_frame(repacked));
        CHECK(frame->size() == repacked.size());
        const auto fields = read_frame(*frame);
        CHECK(fields.size() == 22);  // op, id once, key, payload, 17 more, forwarded
        CHECK(fields.at("id") == std::to_string(id));
        CHECK(fields.at("forwarded") == "true");
    }
    // An answer goes back the same way, without extras.
    const std::string answer("\x83\xa2id\x05\xa2ok\xc3\xa5lease\xcd\x01\x00", 18);
    auto back = client::frame_with_id(answer, 42);
    REQUIRE(back.ok());
    auto decoded_back = decoded(*back);
    CHECK(decoded_back.id == 42);
    CHECK(decoded_back.ok);
    CHECK(shard::field(*decoded_back.map, "lease")->as<int>() == 256);

    // Bytes that are not one well-formed map are refused, not copied.
    for (const std::string& bad :
         {std::string(), std::string("\x92\x01\x02", 3), std::string("\x82\xa2id", 4),
          std::string("\x81\xa2id\x01\x01", 6), std::string("\xdf\xff\xff\xff\xff", 5)}) {
        auto r = client::frame_with_id(bad, 1);
        CHECK_FALSE(r.ok());
        if (!r.ok()) CHECK(r.error().code == Code::bad_request);
    }
}

TEST_CASE("a relay that got no answer says whether the request may have been applied", "[shard]") {
    using client::Error;
    // Never sent: not applied.
    auto f = decoded(shard::no_answer_frame(
        5, "b", Error(Code::unavailable, "no dueq server reachable in time (refused)")));
    CHECK(f.id == 5);
    CHECK(f.error.code == Code::unavailable);
    CHECK_THAT(f.error.message, Catch::Contains("shard 'b'"));
    // Sent, then the connection broke, or the relay closed, or no answer in time: unknown.
    auto sent = [](Code code, const char* message) {
        Error e(code, message);
        e.maybe_applied = true;
        return e;
    };
    for (const auto& e :
         {sent(Code::unavailable, "connection to x lost (eof); put may or may not have been applied"),
          sent(Code::unavailable, "client is closing"), sent(Code::timeout, "no answer in time")}) {
        CHECK(decoded(shard::no_answer_frame(6, "b", e)).error.code == Code::timeout);
    }
}
