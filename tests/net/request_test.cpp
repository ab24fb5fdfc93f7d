#include <catch2/catch.hpp>

#include <msgpack.hpp>

#include "net/request.h"
#include "net/utf8.h"

using namespace dueq::net;
using dueq::queue::Code;

namespace {
// Builds a request map from (name, packer-callback) pairs.
struct Req {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> pk{b};
    std::vector<std::function<void()>> fields;
    template <typename T>
    Req& f(const std::string& k, const T& v) {
        fields.push_back([this, k, v] {
            pk.pack(k);
            pk.pack(v);
        });
        return *this;
    }
    std::string bytes() {
        pk.pack_map(std::uint32_t(fields.size()));
        for (auto& fn : fields)
            fn();
        return std::string(b.data(), b.size());
    }
};
Request ok(std::string bytes, const Limits& l = {}) {
    auto r = decode_request(bytes, l);
    if (auto* e = std::get_if<RequestError>(&r)) FAIL("unexpected error: " << e->message);
    return std::get<Request>(r);
}
template <class Command>
const Command& command(const Request& r) {
    const auto* w = std::get_if<Write>(&r.body);
    REQUIRE(w);
    const auto* c = std::get_if<Command>(&w->command);
    REQUIRE(c);
    return *c;
}
RequestError err(std::string bytes, const Limits& l = {}) {
    auto r = decode_request(bytes, l);
    REQUIRE(std::holds_alternative<RequestError>(r));
    return std::get<RequestError>(r);
}
}  // namespace

TEST_CASE("a put request decodes with its payload verbatim") {
    msgpack::sbuffer payload;
    msgpack::pack(payload, std::map<std::string, int>{{"a", 1}});
    Req q;
    q.f("op", std::string("put"))
        .f("id", 9)
        .f("queue", std::string("tokens"))
        .f("key", std::string("k1"));
    q.f("time", std::int64_t(1700000000000)).f("mode", std::string("insert"));
    q.fields.push_back([&] {
        q.pk.pack(std::string("payload"));
        q.b.write(payload.data(), payload.size());
    });
    auto r = ok(q.bytes());
    CHECK(r.op == Op::put);
    CHECK(r.id == 9);
    const auto& put = command<dueq::queue::Put>(r);
    CHECK(put.queue == "tokens");
    CHECK(put.key == "k1");
    CHECK(put.time == 1700000000000);
    CHECK(put.mode == dueq::queue::PutMode::insert);
    CHECK(put.payload == std::string(payload.data(), payload.size()));
}

TEST_CASE("the id comes back with errors found after it") {
    auto e = err(Req().f("op", std::string("fly")).f("id", 42).bytes());
    CHECK(e.id == 42);
    CHECK(e.message.find("unknown op 'fly'") != std::string::npos);
    e = err(Req().f("id", 5).f("op", std::string("put")).f("key", std::string("k")).bytes());
    CHECK(e.id == 5);
    CHECK(e.message.find("payload") != std::string::npos);
}

TEST_CASE("wrong field types are refused naming the field") {
    auto e =
        err(Req().f("op", std::string("take")).f("id", 1).f("count", std::string("two")).bytes());
    CHECK(e.code == Code::bad_request);
    CHECK(e.message.find("'count'") != std::string::npos);
    e = err(Req()
                .f("op", std::string("ack"))
                .f("id", 1)
                .f("key", std::string("k"))
                .f("lease", -4)
                .bytes());
    CHECK(e.message.find("'lease'") != std::string::npos);
    e = err(Req().f("op", std::string("declare")).f("id", 1).f("late_share", 1.5).bytes());
    CHECK(e.message.find("'late_share'") != std::string::npos);
    e = err(Req().f("op", std::string("put")).f("id", 1).f("key", 5).f("payload", 1).bytes());
    CHECK(e.message.find("'key'") != std::string::npos);
    e = err(Req().f("op", 3).f("id", 1).bytes());
    CHECK(e.message.find("'op'") != std::string::npos);
    e = err(Req().f("op", std::string("ping")).f("id", -1).bytes());
    CHECK(e.message.find("'id'") != std::string::npos);
}

TEST_CASE("size limits give too_large") {
    Limits l;
    l.max_key_bytes = 8;
    l.max_payload_bytes = 16;
    auto e = err(Req()
                     .f("op", std::string("put"))
                     .f("id", 1)
                     .f("key", std::string(9, 'k'))
                     .f("payload", 1)
                     .bytes(),
                 l);
    CHECK(e.code == Code::too_large);
    e = err(Req()
                .f("op", std::string("put"))
                .f("id", 1)
                .f("key", std::string("k"))
                .f("payload", std::string(20, 'p'))
                .bytes(),
            l);
    CHECK(e.code == Code::too_large);
    auto r = ok(Req()
                    .f("op", std::string("put"))
                    .f("id", 1)
                    .f("key", std::string(8, 'k'))
                    .f("payload", std::string(10, 'p'))
                    .bytes(),
                l);
    CHECK(command<dueq::queue::Put>(r).key.size() == 8);
}

TEST_CASE("required fields and ranges per op") {
    CHECK(err(Req().f("op", std::string("get")).f("id", 1).bytes()).message.find("'key'") !=
          std::string::npos);
    CHECK(err(Req().f("op", std::string("touch")).f("id", 1).f("key", std::string("k")).bytes())
              .message.find("'lease'") != std::string::npos);
    CHECK(err(Req().f("op", std::string("kick")).f("id", 1).bytes()).message.find("'count'") !=
          std::string::npos);
    CHECK(err(Req().f("op", std::string("take")).f("id", 1).f("count", 0).bytes())
              .message.find("'count'") != std::string::npos);
    CHECK(err(Req().f("op", std::string("take")).f("id", 1).f("count", 1001).bytes())
              .message.find("'count'") != std::string::npos);
    CHECK(err(Req().f("op", std::string("take")).f("id", 1).f("timeout_ms", -1).bytes())
              .message.find("'timeout_ms'") != std::string::npos);
    auto r = ok(
        Req().f("op", std::string("take")).f("id", 1).f("extra", std::string("ignored")).bytes());
    CHECK(r.op == Op::take);
    const auto& take = command<dueq::queue::Take>(r);
    CHECK(take.queue == "default");
    CHECK(take.count == 1);
    CHECK(take.release_on_disconnect);
    CHECK(std::get<Write>(r.body).wait_ms == 0);
    auto stats = ok(Req().f("op", std::string("stats")).f("id", 1).bytes());
    REQUIRE(std::holds_alternative<GetStats>(stats.body));
    CHECK_FALSE(std::get<GetStats>(stats.body).queue);  // every queue
}

TEST_CASE("each op decodes to its own request type") {
    auto hello = ok(Req().f("op", std::string("hello")).f("id", 1).f("session", 77).bytes());
    REQUIRE(std::holds_alternative<Hello>(hello.body));
    CHECK(std::get<Hello>(hello.body).session == 77u);
    auto get = ok(Req()
                      .f("op", std::string("get"))
                      .f("id", 2)
                      .f("key", std::string("k"))
                      .f("consistency", std::string("leader"))
                      .bytes());
    REQUIRE(std::holds_alternative<GetTask>(get.body));
    CHECK(std::get<GetTask>(get.body).leader_only);
    auto take = ok(Req()
                       .f("op", std::string("take"))
                       .f("id", 3)
                       .f("queue", std::string("tokens"))
                       .f("count", 3)
                       .f("timeout_ms", 500)
                       .f("release_on_disconnect", false)
                       .bytes());
    CHECK(command<dueq::queue::Take>(take).count == 3);
    CHECK_FALSE(command<dueq::queue::Take>(take).release_on_disconnect);
    CHECK(std::get<Write>(take.body).wait_ms == 500);
    auto ack = ok(Req()
                      .f("op", std::string("ack"))
                      .f("id", 4)
                      .f("key", std::string("k"))
                      .f("lease", 9)
                      .f("time", 123)
                      .bytes());
    CHECK(command<dueq::queue::Ack>(ack).lease == 9u);
    CHECK(command<dueq::queue::Ack>(ack).time == 123);
    CHECK_FALSE(command<dueq::queue::Ack>(ack).payload);
    auto kick = ok(Req().f("op", std::string("kick")).f("id", 5).f("count", 2).bytes());
    CHECK(command<dueq::queue::Kick>(kick).count == 2u);
    auto status = ok(Req().f("op", std::string("status")).f("id", 6).bytes());
    CHECK(std::holds_alternative<GetStatus>(status.body));
}

TEST_CASE("frames that are not one msgpack map are refused") {
    CHECK(err("").code == Code::bad_request);
    CHECK(err(std::string("\x93\x01\x02\x03", 4)).message.find("map") != std::string::npos);
    CHECK(err(std::string("\xdd\xff\xff\xff\xff", 5)).message.find("malformed") !=
          std::string::npos);
    CHECK(err(Req().f("op", std::string("ping")).bytes()).message.find("'id'") !=
          std::string::npos);
}

TEST_CASE("valid_utf8 is strict: overlong forms, surrogates and code points past U+10FFFF fail") {
    using dueq::net::valid_utf8;
    CHECK(valid_utf8(""));
    CHECK(valid_utf8("token-1"));
    CHECK(valid_utf8("\xc3\xa9t\xc3\xa9"));  // été
    CHECK(valid_utf8("\xe2\x82\xac"));       // €
    CHECK(valid_utf8("\xf0\x9f\x94\x91"));   // U+1F511
    CHECK(valid_utf8("\xf4\x8f\xbf\xbf"));   // U+10FFFF
    CHECK_FALSE(valid_utf8("\xff\xfe"));
    CHECK_FALSE(valid_utf8("\xc0\xaf"));          // overlong '/'
    CHECK_FALSE(valid_utf8("\xe0\x80\xaf"));      // overlong
    CHECK_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate U+D800
    CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // U+110000
    CHECK_FALSE(valid_utf8("\xe2\x82"));          // truncated
    CHECK_FALSE(valid_utf8("a\x80"));             // stray continuation byte
}
