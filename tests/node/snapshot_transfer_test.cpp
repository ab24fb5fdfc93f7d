// A follower's side of a snapshot stream given chunks straight from a test: a stream
// over the size cap, out of order or malformed is dropped with a reason, never stepped.
#include <catch2/catch.hpp>

#include "node/snapshot_transfer.h"

using dueq::node::SnapshotTransfer;

namespace {

std::string be(std::uint64_t v, int bytes) {
    std::string out;
    for (int i = bytes - 1; i >= 0; --i)
        out.push_back(char(v >> (8 * i)));
    return out;
}

std::string chunk(std::uint32_t seq, bool last, const std::string& body,
                  std::uint64_t term = 3, std::uint64_t index = 100) {
    return "S" + be(term, 8) + be(index, 8) + be(2, 8) + be(1, 8) + be(seq, 4) +
           std::string(1, last ? 1 : 0) + body;
}

std::string pair(const std::string& k, const std::string& v) {
    return be(k.size(), 4) + k + be(v.size(), 4) + v;
}

}  // namespace

TEST_CASE("a snapshot stream in order yields the core's message once, with its records") {
    SnapshotTransfer t;
    std::string problem;
    CHECK_FALSE(t.receive(2, 1, chunk(0, false, "meta"), problem));
    CHECK_FALSE(t.receive(2, 1, chunk(1, false, pair("a", "1")), problem));
    auto m = t.receive(2, 1, chunk(2, true, pair("b", "2")), problem);
    REQUIRE(m);
    CHECK(problem.empty());
    CHECK(m->snapshot->meta.index == 100);
    REQUIRE(t.received());
    CHECK(t.received()->tasks.size() == 2);
}

TEST_CASE("a bad snapshot stream is dropped and says why") {
    SnapshotTransfer t;
    t.set_max_stream_bytes(1000);
    std::string problem;
    SECTION("over the size cap") {
        CHECK_FALSE(t.receive(2, 1, chunk(0, false, "meta"), problem));
        CHECK_FALSE(t.receive(2, 1, chunk(1, false, pair("a", std::string(600, 'x'))), problem));
        CHECK(problem.empty());
        CHECK_FALSE(t.receive(2, 1, chunk(2, true, pair("b", std::string(600, 'x'))), problem));
        CHECK(problem.find("size cap") != std::string::npos);
    }
    SECTION("a chunk out of order") {
        CHECK_FALSE(t.receive(2, 1, chunk(0, false, "meta"), problem));
        CHECK_FALSE(t.receive(2, 1, chunk(2, true, pair("a", "1")), problem));
        CHECK(problem.find("out of order") != std::string::npos);
    }
    SECTION("a malformed pair") {
        CHECK_FALSE(t.receive(2, 1, chunk(0, false, "meta"), problem));
        CHECK_FALSE(t.receive(2, 1, chunk(1, true, be(99, 4) + "short"), problem));
        CHECK(problem.find("malformed") != std::string::npos);
    }
    SECTION("a header out of range") {
        CHECK_FALSE(t.receive(2, 1, chunk(0, false, "meta", 0), problem));
        CHECK(problem.find("out of range") != std::string::npos);
    }
    SECTION("too short for a header") {
        CHECK_FALSE(t.receive(2, 1, "S123", problem));
        CHECK(problem.find("shorter") != std::string::npos);
    }
    // Whatever went wrong, the rest of that stream is ignored.
    problem.clear();
    CHECK_FALSE(t.receive(2, 1, chunk(3, true, ""), problem));
    CHECK_FALSE(t.received());
}

TEST_CASE("a snapshot the core refused does not replace the accepted one awaiting install") {
    SnapshotTransfer t;
    std::string problem;
    CHECK_FALSE(t.receive(2, 1, chunk(0, false, "meta", 3, 100), problem));
    auto first = t.receive(2, 1, chunk(1, true, pair("a", "1"), 3, 100), problem);
    REQUIRE(first);
    t.accept_received();  // the core took it; the install comes with its next Ready
    CHECK_FALSE(t.receive(2, 1, chunk(0, false, "meta", 3, 90), problem));
    auto second = t.receive(2, 1, chunk(1, true, pair("b", "2"), 3, 90), problem);
    REQUIRE(second);
    t.discard_received();  // the core refused this older one
    CHECK_FALSE(t.take_received(second->snapshot->meta));
    auto records = t.take_received(first->snapshot->meta);
    REQUIRE(records);
    CHECK(records->meta.index == 100);
    CHECK_FALSE(t.take_received(first->snapshot->meta));  // once
}
