// The shard map: parsing and its refusals, the bucket hash, and which reloads a node takes.
#include <catch2/catch.hpp>

#include <map>

#include "shard/router.h"
#include "shard/shard_map.h"
#include "shard/sharded_client.h"
#include "shard/shards_reply.h"

using namespace dueq::shard;

namespace {

std::string two_shards(std::uint64_t version, const std::string& a_buckets,
                       const std::string& b_buckets, std::uint32_t buckets = 1024) {
    return "version = " + std::to_string(version) + "\nbuckets = " + std::to_string(buckets) +
           "\n[[shards]]\nname = \"a\"\nbuckets = " + a_buckets +
           "\nmembers = [{ id = \"a1\", client = \"127.0.0.1:7711\" }, { id = \"a2\", client = "
           "\"127.0.0.1:7712\" }]\n[[shards]]\nname = \"b\"\nbuckets = " +
           b_buckets + "\nmembers = [{ id = \"b1\", client = \"127.0.0.1:7721\" }]\n";
}

std::string refusal(const std::string& text) {
    try {
        parse_shard_map(text, "map");
    } catch (const MapError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("the bucket hash is 64-bit FNV-1a over queue, a zero byte, then key", "[shard]") {
    // Worked by hand from the FNV-1a definition, so a client in another language can check
    // its own implementation against the same numbers (docs/sharding.md).
    CHECK(fnv1a64("", "") == 0xaf63bd4c8601b7dfULL);  // FNV-1a of the single byte 0x00
    CHECK(fnv1a64("tokens", "token-1") == 0x88634cb537d61368ULL);
    CHECK(fnv1a64("a", "") != fnv1a64("", "a"));  // the separator keeps them apart
    CHECK(fnv1a64("tokens", "token-1") != fnv1a64("tokens", "token-2"));
    const auto map = parse_shard_map(two_shards(1, "[[0, 511]]", "[[512, 1023]]"), "map");
    CHECK(map.bucket_of("tokens", "token-1") == fnv1a64("tokens", "token-1") % 1024);
}

TEST_CASE("a map assigns every bucket to exactly one shard", "[shard]") {
    const auto map = parse_shard_map(two_shards(3, "[[0, 99], [200, 1023]]", "[[100, 199]]"), "m");
    CHECK(map.version == 3);
    CHECK(map.bucket_count == 1024);
    REQUIRE(map.shards.size() == 2);
    CHECK(map.bucket_total(0) == 924);
    CHECK(map.bucket_total(1) == 100);
    CHECK(map.owner[99] == 0);
    CHECK(map.owner[100] == 1);
    CHECK(map.owner[199] == 1);
    CHECK(map.owner[200] == 0);
    CHECK(map.find("b") == std::optional<std::size_t>(1));
    CHECK_FALSE(map.find("c"));
    // Keys spread over both shards in proportion to their buckets.
    std::map<std::size_t, int> per_shard;
    for (int i = 0; i < 10'000; ++i)
        ++per_shard[map.shard_of("q", "key-" + std::to_string(i))];
    CHECK(per_shard[1] > 700);
    CHECK(per_shard[1] < 1300);
}

TEST_CASE("a map that does not add up is refused with the reason", "[shard]") {
    CHECK_THAT(refusal(two_shards(1, "[[0, 511]]", "[[511, 1023]]")),
               Catch::Contains("bucket 511 belongs to both shard 'a' and shard 'b'"));
    CHECK_THAT(refusal(two_shards(1, "[[0, 510]]", "[[512, 1023]]")),
               Catch::Contains("bucket 511 belongs to no shard"));
    CHECK_THAT(refusal(two_shards(1, "[[0, 511]]", "[[512, 1024]]")),
               Catch::Contains("is not within 0..1023"));
    CHECK_THAT(refusal(two_shards(1, "[[5, 0]]", "[[0, 1023]]")), Catch::Contains("is not within"));
    CHECK_THAT(refusal(two_shards(1, "[0, 511]", "[[512, 1023]]")),
               Catch::Contains("[first, last] pairs"));
    CHECK_THAT(refusal(two_shards(0, "[[0, 511]]", "[[512, 1023]]")),
               Catch::Contains("version must be an integer >= 1"));
    CHECK_THAT(refusal(two_shards(1, "[[0, 0]]", "[[1, 1]]", 0)),
               Catch::Contains("buckets must be an integer in 1..65536"));
    CHECK_THAT(refusal("version = 1\nbuckets = 4\n"), Catch::Contains("at least one [[shards]]"));
    CHECK_THAT(refusal("version = 1\nbuckets = 4\ncolour = 1\n"),
               Catch::Contains("unknown key 'colour'"));
    CHECK_THAT(refusal("version = 1\nbuckets = 4\n[[shards]]\nname = \"a\"\nbuckets = [[0, 3]]\n"
                       "members = [{ id = \"a1\", client = \"nowhere\" }]\n"),
               Catch::Contains("is not host:port"));
    CHECK_THAT(refusal("version = 1\nbuckets = 4\n[[shards]]\nname = \"a\"\nbuckets = [[0, 3]]\n"
                       "members = [{ id = \"a1\", client = \"h:1\" }, { id = \"a1\", client = "
                       "\"h:2\" }]\n"),
               Catch::Contains("member id 'a1' appears twice"));
    CHECK_THAT(refusal("version = 1\nbuckets = 4\n[[shards]]\nname = \"a\"\nbuckets = [[0, 1]]\n"
                       "members = [{ id = \"a1\", client = \"h:1\" }]\n[[shards]]\nname = \"a\"\n"
                       "buckets = [[2, 3]]\nmembers = [{ id = \"b1\", client = \"h:2\" }]\n"),
               Catch::Contains("shard 'a' appears twice"));
    CHECK_THAT(refusal("version = 1\nbuckets = ["), Catch::Contains("line"));
}

TEST_CASE("a new map is taken only if every bucket stays with its shard", "[shard]") {
    const auto v1 = parse_shard_map(two_shards(1, "[[0, 511]]", "[[512, 1023]]"), "v1");
    const auto v2 = parse_shard_map(two_shards(2, "[[0, 511]]", "[[512, 1023]]"), "v2");
    const auto moved = parse_shard_map(two_shards(2, "[[0, 599]]", "[[600, 1023]]"), "moved");
    const auto wider =
        parse_shard_map(two_shards(2, "[[0, 1023]]", "[[1024, 2047]]", 2048), "wider");
    CHECK(reload_refusal(v1, v2, "a").empty());
    CHECK(reload_refusal(v1, v2, "").empty());
    CHECK_THAT(reload_refusal(v2, v1, "a"), Catch::Contains("not above the current 2"));
    CHECK_THAT(reload_refusal(v1, v1, "a"), Catch::Contains("not above"));
    CHECK_THAT(reload_refusal(v1, moved, "a"),
               Catch::Contains("moves bucket 512 from shard 'b' to shard 'a'"));
    CHECK_THAT(reload_refusal(v1, moved, ""), Catch::Contains("moves bucket 512"));
    // Other shards' members may change: an address, a replaced node.
    auto readdressed = v2;
    readdressed.shards[1].members[0].client = "127.0.0.1:7799";
    CHECK(reload_refusal(v1, readdressed, "a").empty());
    CHECK_THAT(reload_refusal(v1, wider, ""), Catch::Contains("changes the bucket count"));
    const auto single = single_shard_map("solo", {{"n1", "127.0.0.1:7700"}});
    CHECK(single.shard_of("q", "anything") == 0);
    CHECK_THAT(reload_refusal(v1, v2, "c"), Catch::Contains("no shard named 'c'"));
}

// Members follow (docs/sharding.md): a shard's members learned from its committed
// membership replace the map file's, only from a later membership, and survive a reload.
TEST_CASE("a router learns a shard's members from a later membership and keeps them", "[shard]") {
    boost::asio::io_context io;
    Router router(io, parse_shard_map(two_shards(1, "[[0, 511]]", "[[512, 1023]]"), "map"), {});
    const std::vector<ShardMember> replaced = {{"a3", "127.0.0.1:7713"}, {"a4", "127.0.0.1:7714"}};
    CHECK_FALSE(router.learn_members("a", replaced, 0));  // no later than the file's
    CHECK_FALSE(router.learn_members("c", replaced, 9));  // no such shard
    CHECK_FALSE(router.learn_members("a", {}, 9));        // an empty list routes nowhere
    REQUIRE(router.learn_members("a", replaced, 9));
    CHECK(router.map().shards[0].members == replaced);
    CHECK(router.map().shards[0].membership_index == 9);
    // An older membership (a router that learned less) does not undo it; a newer one does.
    CHECK_FALSE(router.learn_members("a", {{"a1", "127.0.0.1:7711"}}, 8));
    CHECK(router.map().shards[0].members == replaced);
    CHECK(router.learn_members("a", {{"a4", "127.0.0.1:7714"}}, 12));
    CHECK(router.map().shards[0].members.size() == 1);
    // A reload of the map file (its lists are index 0) keeps what was learned.
    router.set_map(parse_shard_map(two_shards(2, "[[0, 511]]", "[[512, 1023]]"), "map"));
    CHECK(router.map().version == 2);
    CHECK(router.map().shards[0].members == std::vector<ShardMember>{{"a4", "127.0.0.1:7714"}});
    CHECK(router.map().shards[0].membership_index == 12);
    CHECK(router.map().shards[1].members.front().id == "b1");
}

TEST_CASE("the shards answer carries each shard's membership index", "[shard]") {
    ShardMap map = parse_shard_map(two_shards(3, "[[0, 511]]", "[[512, 1023]]"), "map");
    map.shards[1].membership_index = 41;
    const std::string frame = shards_reply(5, map, "b", {"", ""});
    auto handle = msgpack::unpack(frame.data() + 4, frame.size() - 4);
    const auto parsed = map_from_answer(handle.get());
    REQUIRE(parsed);
    CHECK(parsed->shards[0].membership_index == 0);
    CHECK(parsed->shards[1].membership_index == 41);
    CHECK(parsed->shards[1].members == map.shards[1].members);
}
