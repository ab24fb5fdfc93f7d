// Message <-> bytes (msgpack-c): round trips, and hostile input refused without a crash.
#include <catch2/catch.hpp>

#include "raft/message_codec.h"
#include "raft/random.h"

using namespace dueq::raft;

namespace {
Message sample(MessageType type) {
    Message m{.type = type,
              .from = 2,
              .to = 3,
              .term = 7,
              .index = 41,
              .log_term = 6,
              .commit = 40,
              .reject = true,
              .hint_index = 39,
              .context = 1234567890123ULL};
    if (type == MessageType::append) {
        m.entries = {Entry{7, 42, 1700000000123ULL, EntryType::noop, {}},
                     Entry{7, 43, 1700000000124ULL, EntryType::normal, std::string("a\0b", 3)}};
    }
    if (type == MessageType::snapshot) m.snapshot = Snapshot{{40, 6, 99}, std::string(1000, 'z')};
    return m;
}
}  // namespace

TEST_CASE("codec: every message type round-trips", "[raft][codec]") {
    for (int t = 0; t <= static_cast<int>(MessageType::timeout_now); ++t) {
        Message m = sample(static_cast<MessageType>(t));
        auto back = decode_message(encode_message(m));
        REQUIRE(back);
        CHECK(back.value() == m);
    }
}

TEST_CASE("codec: truncated, extended or garbled input is refused", "[raft][codec]") {
    std::string bytes = encode_message(sample(MessageType::append));
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        CHECK_FALSE(decode_message(bytes.substr(0, n)));
    }
    CHECK_FALSE(decode_message(bytes + "x"));
    Random rng(5);
    int decoded = 0;
    for (int k = 0; k < 2000; ++k) {
        std::string bad = bytes;
        bad[rng.uniform(0, bad.size() - 1)] = static_cast<char>(rng.next());
        decoded += decode_message(bad).has_value() ? 1 : 0;  // must not crash; may decode
    }
    CHECK(decoded < 2000);
}

TEST_CASE("codec: limits are enforced before allocation", "[raft][codec]") {
    std::string bytes = encode_message(sample(MessageType::append));
    CHECK_FALSE(decode_message(bytes, {.max_entries = 1, .max_bytes = 1 << 20}));
    std::string snap = encode_message(sample(MessageType::snapshot));
    CHECK_FALSE(decode_message(snap, {.max_entries = 16, .max_bytes = 100}));
    CHECK(decode_message(snap, {.max_entries = 16, .max_bytes = 1000}));
}

TEST_CASE("codec: wrong format number or type is refused", "[raft][codec]") {
    std::string bytes = encode_message(sample(MessageType::vote));
    std::string wrong_format = bytes;
    wrong_format[1] = 2;  // the first element, positive fixint 1 -> 2
    CHECK_FALSE(decode_message(wrong_format));
    std::string wrong_type = bytes;
    wrong_type[2] = 99;
    CHECK_FALSE(decode_message(wrong_type));
}
