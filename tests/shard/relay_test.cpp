// What a relaying node or proxy sends on: the client's request with its own id (and the
// forwarded mark), and for a call that got no answer, the code that tells the client
// whether the request may have been applied.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include "client/codec.h"
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

}  // namespace

TEST_CASE("a relayed request keeps every field, takes the relay's id, and is marked", "[shard]") {
    auto request = shard::request_map("put", 3, [](shard::Packer& pk) {
        shard::pack_str(pk, "id"), pk.pack_uint64(7);
        shard::pack_str(pk, "key"), shard::pack_str(pk, "k1");
        shard::pack_str(pk, "payload"), pk.pack_array(2), pk.pack(1), pk.pack(2);
    });
    const std::string frame = client::repack_with_id(request->get(), 900, {{"forwarded", true}});
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
