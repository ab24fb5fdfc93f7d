// The log encoding of commands: every command round-trips field for field, and bytes
// that are not a command of this format decode to nullopt instead of throwing.
#include <catch2/catch.hpp>

#include <msgpack.hpp>

#include "queue/command_codec.h"
#include "queue/store.h"

using namespace dueq::queue;

namespace {

template <class T>
T round_trip(const T& c) {
    std::string bytes = encode_command(c);
    std::optional<Command> d = decode_command(bytes);
    REQUIRE(d.has_value());
    REQUIRE(std::holds_alternative<T>(*d));
    CHECK(encode_command(*d) == bytes);
    return std::get<T>(*d);
}

const std::string kBinary("k\0\xff\x80 y", 6);

}  // namespace

TEST_CASE("Declare round-trips, with and without each field", "[queue][codec]") {
    Declare d{"queue"};
    Declare e = round_trip(d);
    CHECK(e.queue == "queue");
    CHECK_FALSE(e.lead_ms);
    CHECK_FALSE(e.ttr_ms);
    CHECK_FALSE(e.retention_ms);
    CHECK_FALSE(e.max_attempts);
    CHECK_FALSE(e.late_share);
    d.lead_ms = 1;
    d.ttr_ms = 2;
    d.retention_ms = 3;
    d.max_attempts = 4;
    d.late_share = 0.125;
    e = round_trip(d);
    CHECK(e.lead_ms == 1);
    CHECK(e.ttr_ms == 2);
    CHECK(e.retention_ms == 3);
    CHECK(e.max_attempts == 4);
    CHECK(e.late_share == 0.125);
    CHECK_FALSE(e.autonomous);
    d.autonomous = true;
    CHECK(round_trip(d).autonomous == true);
}

TEST_CASE("a Declare logged before `autonomous` existed still decodes", "[queue][codec]") {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> p(buf);
    p.pack_array(8);
    p.pack(1);  // format
    p.pack(1);  // Declare
    p.pack(std::string("q"));
    p.pack(5);  // lead_ms
    for (int i = 0; i < 4; ++i)
        p.pack_nil();
    auto d = decode_command(std::string_view(buf.data(), buf.size()));
    REQUIRE(d.has_value());
    const auto& c = std::get<Declare>(*d);
    CHECK(c.lead_ms == 5);
    CHECK_FALSE(c.autonomous);
}

TEST_CASE("a MoveBucket logged before lease_floor or sent_at existed still decodes",
          "[queue][codec]") {
    // [format, tag, step, bucket, gen, peer, chunk, last, bucket_count, records, lease_floor,
    //  sent_at], cut to the fields each older version wrote.
    auto logged = [](std::uint32_t fields) {
        msgpack::sbuffer buf;
        msgpack::packer<msgpack::sbuffer> p(buf);
        p.pack_array(2 + fields);
        p.pack(1);
        p.pack(13);
        const std::uint64_t values[] = {3, 5, 2};  // chunk, bucket 5, generation 2
        for (auto v : values)
            p.pack(v);
        p.pack(std::string("a"));
        p.pack(0);
        p.pack(true);
        p.pack(16);
        if (fields > 7) p.pack_bin(0);
        if (fields > 8) p.pack(77);
        if (fields > 9) p.pack(std::int64_t{1'700'000'000'123});
        if (fields > 10) p.pack(1);
        return std::string(buf.data(), buf.size());
    };
    for (std::uint32_t fields : {8u, 9u, 10u}) {
        auto d = decode_command(logged(fields));
        REQUIRE(d.has_value());
        const auto& c = std::get<MoveBucket>(*d);
        CHECK(c.step.bucket == 5);
        CHECK(c.lease_floor == (fields > 8 ? 77u : 0u));
        CHECK(c.sent_at == (fields > 9 ? 1'700'000'000'123 : 0));
    }
    CHECK_FALSE(decode_command(logged(7)));
    CHECK_FALSE(decode_command(logged(11)));
    MoveBucket m;
    m.step.step = dueq::shard::MoveStep::chunk;
    m.sent_at = 1'700'000'000'456;
    CHECK(round_trip(m).sent_at == m.sent_at);
}

TEST_CASE("Merge round-trips, with a task and as a deletion", "[queue][codec]") {
    Merge m{"q", kBinary, std::string("\x93\x01\x02", 3), 7ull << 40, 3, 2};
    Merge r = round_trip(m);
    CHECK(r.key == kBinary);
    CHECK(r.task == m.task);
    CHECK(r.hlc == m.hlc);
    CHECK(r.base_hlc == 3);
    CHECK(r.origin == 2);
    m.task.reset();
    CHECK_FALSE(round_trip(m).task.has_value());
}

TEST_CASE("Put round-trips binary keys and payloads and every mode", "[queue][codec]") {
    for (PutMode mode : {PutMode::upsert, PutMode::insert, PutMode::update}) {
        Put p{"q", kBinary, std::string("\x93\x01\x02\x03", 4), std::nullopt, mode};
        Put e = round_trip(p);
        CHECK(e.queue == "q");
        CHECK(e.key == kBinary);
        CHECK(e.payload == p.payload);
        CHECK_FALSE(e.time);
        CHECK(e.mode == mode);
    }
    Put p{"q", "k", "", -42};
    CHECK(round_trip(p).time == -42);
    p.time = INT64_MAX;
    CHECK(round_trip(p).time == INT64_MAX);
}

TEST_CASE("Delete, Bury, Kick and ReleaseSession round-trip", "[queue][codec]") {
    Delete d = round_trip(Delete{"q", kBinary});
    CHECK(d.queue == "q");
    CHECK(d.key == kBinary);
    Bury b = round_trip(Bury{"q", "k", UINT64_MAX});
    CHECK(b.key == "k");
    CHECK(b.lease == UINT64_MAX);
    Kick k = round_trip(Kick{"q", 77});
    CHECK(k.queue == "q");
    CHECK(k.count == 77);
    CHECK_FALSE(k.only_key);
    Kick one = round_trip(Kick{"q", 1, kBinary});
    CHECK(one.only_key == kBinary);
    CHECK(round_trip(ReleaseSession{123456789012345ULL}).session == 123456789012345ULL);
    auto advance = decode_command(encode_command(Advance{}));
    REQUIRE(advance);
    CHECK(std::holds_alternative<Advance>(*advance));
}

TEST_CASE("Take round-trips", "[queue][codec]") {
    Take t{"q", 5, std::nullopt, 9, false};
    Take e = round_trip(t);
    CHECK(e.queue == "q");
    CHECK(e.count == 5);
    CHECK_FALSE(e.ttr_ms);
    CHECK(e.session == 9);
    CHECK_FALSE(e.release_on_disconnect);
    t.ttr_ms = 30'000;
    t.release_on_disconnect = true;
    e = round_trip(t);
    CHECK(e.ttr_ms == 30'000);
    CHECK(e.release_on_disconnect);
}

TEST_CASE("Touch, Ack and Release round-trip", "[queue][codec]") {
    Touch t = round_trip(Touch{"q", "k", 3, 1500});
    CHECK(t.lease == 3);
    CHECK(t.ttr_ms == 1500);
    CHECK_FALSE(round_trip(Touch{"q", "k", 3}).ttr_ms);

    Ack a = round_trip(Ack{"q", "k", 4});
    CHECK(a.lease == 4);
    CHECK_FALSE(a.payload);
    CHECK_FALSE(a.time);
    a = round_trip(Ack{"q", "k", 4, std::string(), 99});
    REQUIRE(a.payload);
    CHECK(a.payload->empty());  // an empty payload is not an absent one
    CHECK(a.time == 99);

    Release r = round_trip(Release{"q", "k", 5, 250});
    CHECK(r.lease == 5);
    CHECK(r.delay_ms == 250);
}

TEST_CASE("a late_share msgpack-c packs as an unsigned integer over 2^63 round-trips",
          "[queue][codec]") {
    // Found by fuzz/fuzz_command: msgpack-c packs a double holding an integer as an
    // integer, and the decoder took only integers up to INT64_MAX.
    Declare d{"q"};
    d.late_share = 1e19;
    CHECK(round_trip(d).late_share == 1e19);
    d.late_share = -2.0;
    CHECK(round_trip(d).late_share == -2.0);
}

TEST_CASE("large payloads round-trip", "[queue][codec]") {
    std::string big(1 << 20, '\x42');
    CHECK(round_trip(Put{"q", "k", big}).payload == big);
}

TEST_CASE("the encoding is [format, tag, fields...]", "[queue][codec]") {
    std::string bytes = encode_command(Kick{"q", 2});
    msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
    const msgpack::object& o = oh.get();
    REQUIRE(o.type == msgpack::type::ARRAY);
    REQUIRE(o.via.array.size == 4);
    CHECK(o.via.array.ptr[0].as<int>() == 1);
    CHECK(o.via.array.ptr[1].as<int>() == 9);
    CHECK(o.via.array.ptr[2].as<std::string>() == "q");
    CHECK(o.via.array.ptr[3].as<int>() == 2);
    // A kick by key has one field more; one without is written as before it existed, so
    // that replicas of an older version read it.
    bytes = encode_command(Kick{"q", 1, std::string("k")});
    oh = msgpack::unpack(bytes.data(), bytes.size());
    REQUIRE(oh.get().via.array.size == 5);
}

TEST_CASE("bytes that are not a command decode to nullopt", "[queue][codec]") {
    auto encode = [](auto... items) {
        msgpack::sbuffer buf;
        msgpack::pack(buf, std::make_tuple(items...));
        return std::string(buf.data(), buf.size());
    };
    CHECK_FALSE(decode_command(""));
    CHECK_FALSE(decode_command("\xc1"));                                      // never-used byte
    CHECK_FALSE(decode_command(std::string("\x92\x01", 2)));                  // truncated
    CHECK_FALSE(decode_command(encode(2, 9, std::string("q"), 2)));           // unknown format
    CHECK_FALSE(decode_command(encode(1, 99, std::string("q"), 2)));          // unknown tag
    CHECK_FALSE(decode_command(encode(1, 0)));                                // tag 0
    CHECK_FALSE(decode_command(encode(1, 9, std::string("q"))));              // too few fields
    CHECK_FALSE(decode_command(encode(1, 9, std::string("q"), 2, 3)));        // too many
    CHECK_FALSE(decode_command(encode(1, 9, 5, 2)));                          // queue not a string
    CHECK_FALSE(decode_command(encode(1, 9, std::string("q"), -2)));          // negative count
    CHECK_FALSE(decode_command(encode(1, 9, std::string("q"), 1ULL << 40)));  // count > u32
    CHECK_FALSE(decode_command(encode(1, 2, std::string("q"), std::string("k"), std::string("p"),
                                      msgpack::type::nil_t(), 7)));  // mode
    CHECK_FALSE(decode_command(encode(1, 4, std::string("q"), 1, msgpack::type::nil_t(), 1,
                                      5)));  // release_on_disconnect not a bool
    std::string ok = encode_command(Kick{"q", 2});
    CHECK(decode_command(ok));
    CHECK_FALSE(decode_command(ok + "x"));  // trailing bytes
    CHECK_FALSE(decode_command(ok.substr(0, ok.size() - 1)));
    // A map where an array belongs, and a deep nest: refused, not thrown.
    CHECK_FALSE(decode_command(std::string("\x81\x01\x02", 3)));
    CHECK_FALSE(decode_command(std::string(100, '\x91') + "\x01"));
}

TEST_CASE("every single-byte corruption of a command is decoded or refused, never thrown",
          "[queue][codec]") {
    std::string bytes = encode_command(Ack{"queue", "key", 77, std::string("pay"), 1000});
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        for (int v : {0x00, 0x7f, 0x80, 0xc0, 0xc1, 0xdb, 0xff}) {
            std::string c = bytes;
            c[i] = static_cast<char>(v);
            CHECK_NOTHROW(decode_command(c));
        }
    }
}

TEST_CASE("peek_task_name reads a command's queue and key, and nothing from other bytes",
          "[queue][codec]") {
    // Queue names and keys across msgpack's length widths: fixstr, str8, str16 and the
    // matching bin widths.
    for (const std::string& queue : {std::string("q"), std::string(40, 'q'), std::string(300, 'q')})
        for (const std::string& key : {kBinary, std::string(300, 'k'), std::string(70000, 'k')}) {
            const std::vector<Command> named{
                Put{queue, key, "\x01", 5, PutMode::upsert},
                Delete{queue, key},
                Touch{queue, key, 3, 100},
                Ack{queue, key, 3, std::string("\x02"), 9},
                Release{queue, key, 3, 10},
                Bury{queue, key, 3},
                Merge{queue, key, std::nullopt, 1, 0, 2},
            };
            for (const auto& c : named) {
                INFO("tag " << c.index() << ", queue " << queue.size() << ", key " << key.size());
                const std::string bytes = encode_command(c);
                const auto name = peek_task_name(bytes);
                REQUIRE(name);
                CHECK(name->queue == queue);
                CHECK(name->key == key);
            }
        }
    // Commands that name no task.
    CHECK_FALSE(peek_task_name(encode_command(Declare{"q"})));
    CHECK_FALSE(peek_task_name(encode_command(Take{"q", 1, 100, 0, false})));
    CHECK_FALSE(peek_task_name(encode_command(Kick{"q", 1})));
    CHECK_FALSE(peek_task_name(encode_command(Advance{})));
    // Every cut of a command: no name until the key is whole, then the whole names.
    const std::string put = encode_command(Put{"queue", std::string(300, 'k'), "\x01", 5});
    const std::size_t key_end = put.find(std::string(300, 'k')) + 300;
    for (std::size_t n = 0; n < put.size(); ++n) {
        INFO("cut at " << n);
        const std::string cut = put.substr(0, n);
        const auto name = peek_task_name(cut);
        REQUIRE(bool(name) == (n >= key_end));
        if (name) CHECK((name->queue == "queue" && name->key == std::string(300, 'k')));
    }
    // Every single-byte corruption: never reads past the end.
    for (std::size_t i = 0; i < put.size(); ++i)
        for (int v : {0x00, 0x7f, 0x80, 0xa0, 0xbf, 0xc4, 0xc6, 0xcc, 0xd9, 0xdb, 0xff}) {
            std::string c = put;
            c[i] = char(v);
            const auto name = peek_task_name(c);
            if (name) CHECK(name->key.data() + name->key.size() <= c.data() + c.size());
        }
}

// The leader proposes only what every replica can read back (shell/raft_shell.cpp): a
// command whose payload is over what a log record holds would stop each replica at its
// index on every restart. A record of the largest payload, and a Merge of such a task, fit.
TEST_CASE("fits_log_record: what decode_command reads back, up to the record ceiling",
          "[queue][codec]") {
    const std::size_t ceiling = dueq::limits::kRecordPayloadBytes;
    CHECK(fits_log_record(encode_command(Put{"q", "k", std::string(1 << 20, 'p')})));
    // A record's largest string holds a whole task (for a Merge): beyond that nothing decodes.
    std::string over = encode_command(
        Put{"q", "k", std::string(ceiling + dueq::limits::kRecordTaskBytes + 1, 'p')});
    CHECK_FALSE(fits_log_record(over));
    CHECK_FALSE(decode_command(over).has_value());
    over.clear();
    over.shrink_to_fit();
    const std::string largest = encode_command(Put{"q", "k", std::string(ceiling, 'p')});
    CHECK(fits_log_record(largest));
    // A put whose payload is over the ceiling but still decodes is refused by apply, as
    // every replica refuses it: an error, the same everywhere, not a log that stops.
    {
        Store one(kApplyLimits);
        CHECK_FALSE(one.apply(Put{"q", "k", std::string(ceiling + 1, 'p'), 5}, 1).ok());
        CHECK(one.task_count() == 0);
    }

    Store s(kApplyLimits);
    REQUIRE(s.apply(Put{"q", std::string(kApplyLimits.max_key_bytes, 'k'),
                        std::string(ceiling, 'p'), 5},
                    1)
                .ok());
    std::string task;
    s.for_each_task([&](auto, auto, std::string_view enc) { task = std::string(enc); });
    REQUIRE(task.size() > ceiling);
    const std::string merge = encode_command(Merge{"q", "k", task, 7, 0, 2});
    CHECK(fits_log_record(merge));
    CHECK(decode_command(merge).has_value());
}
