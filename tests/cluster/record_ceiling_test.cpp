// A config may set [limits] above what a log record holds (older versions accepted a
// max_payload_bytes of up to 1 GiB, and a record holds 128 MiB - 1). A put larger than a
// record must then be refused before it is proposed: once logged, no replica could read
// the entry back, and every one of them would stop at it on every restart.
#include <catch2/catch.hpp>

#include <thread>

#include "cluster/cluster.h"
#include "node/support.h"
#include "wire/limits.h"

using namespace dueq;
using namespace dueq::test;

namespace {
Response put_token(RawClient& c, std::uint64_t id, const std::string& key,
                   const msgpack::object& payload) {
    return c.call("put", id,
                  {{"queue", c.str("tokens")}, {"key", c.str(key)}, {"payload", payload}});
}

void refuse_larger_than_a_record(int nodes) {
    ClusterOptions o;
    o.nodes = nodes;
    // Reading and checking a frame of 129 MiB holds the leader's loop for a moment (over
    // a second in the sanitizer build): followers must not depose it meanwhile.
    o.election_timeout_ms = 3000;
    o.heartbeat_ms = 100;
    const std::string raised =
        "[limits]\nmax_payload_bytes = 268435456\nmax_frame_bytes = 402653184\n";
    o.extra_config.assign(std::size_t(nodes), raised);
    Cluster cluster("record_ceiling", o);
    cluster.start_all();
    int leader = cluster.wait_for_leader(15s);
    REQUIRE(leader >= 0);
    // A new leader writes the members' data ids into the membership (a configuration
    // entry of its own, docs/operations.md): let that settle before counting entries.
    {
        auto members = cluster.client({leader});
        std::uint64_t settled_at = 0;
        for (int i = 0; i < 100; ++i) {
            auto m = members->members();
            if (m.ok() && m.value().membership_index > 0 && !m.value().pending &&
                m.value().membership_index == settled_at)
                break;
            settled_at = m.ok() ? m.value().membership_index : 0;
            std::this_thread::sleep_for(200ms);
        }
    }
    {
        RawClient c(cluster.client_port(leader));
        REQUIRE(put_token(c, 1, "small", c.str("token-1")).ok());
        const auto before = cluster.status(leader);
        REQUIRE(before);

        const std::string payload(limits::kRecordPayloadBytes + (1u << 20), 'x');
        auto big = put_token(c, 2, "big", c.bin(payload));
        CHECK_FALSE(big.ok());
        CHECK(big.error_code() == "too_large");

        // Nothing was proposed: the log did not grow (but for the empty entry a new
        // leader appends, should one have been elected anyway).
        std::this_thread::sleep_for(300ms);
        const auto after = cluster.status(leader);
        REQUIRE(after);
        CHECK(after->last_index <= before->last_index + (after->term - before->term));
        CHECK(after->term == before->term);
        leader = cluster.wait_for_leader(15s);
        REQUIRE(leader >= 0);
        RawClient again_c(cluster.client_port(leader));
        CHECK(put_token(again_c, 3, "small", again_c.str("token-2")).ok());
    }
    for (int i = 0; i < cluster.size(); ++i)
        CHECK(cluster.running(i));

    // Every node restarts from its log and serves what was written.
    for (int i = 0; i < cluster.size(); ++i)
        cluster.kill9(i);
    cluster.start_all();
    leader = cluster.wait_for_leader(15s);
    REQUIRE(leader >= 0);
    RawClient c(cluster.client_port(leader));
    auto got = c.call("get", 4, {{"queue", c.str("tokens")}, {"key", c.str("small")}});
    REQUIRE(got.ok());
    auto none = c.call("get", 5, {{"queue", c.str("tokens")}, {"key", c.str("big")}});
    CHECK(none.error_code() == "not_found");
    std::this_thread::sleep_for(500ms);
    for (int i = 0; i < cluster.size(); ++i)
        CHECK(cluster.running(i));
}
}  // namespace

// On one node the old code logged the put and stopped at it ("log entry 2 does not
// decode", exit 70) on every restart; on three, the peer links broke and a new election
// dropped it.
TEST_CASE("a put larger than a log record holds is refused; one node serves and restarts") {
    refuse_larger_than_a_record(1);
}

TEST_CASE("a put larger than a log record holds is refused; three nodes serve and restart") {
    refuse_larger_than_a_record(3);
}
