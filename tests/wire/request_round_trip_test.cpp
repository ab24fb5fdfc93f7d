// Every op from the C++ client to the node: the client's encoding read by the node's
// decoder, field by field. Then the planted drift: each field of each frame renamed on one
// side (as if one half spelled it differently) must make the round trip fail, so no field
// goes unchecked. reply_round_trip_test.cpp does the same for the answers.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <set>

#include "client/codec.h"
#include "net/frame.h"
#include "net/request.h"
#include "node/replies.h"
#include "queue/store.h"
#include "shard/request_map.h"
#include "shard/sharded_client.h"
#include "shard/shards_reply.h"
#include "wire/drift.h"
#include "wire/protocol.h"

using namespace dueq;
namespace field = wire::field;

using namespace dueq::wire_test;

namespace {

// ---- client encode -> node decode

std::string encoded(client::Result<std::string> r) {
    REQUIRE(r.ok());
    return *r;
}

const std::string kPayload = "\xa5hello";  // one msgpack str
const std::string kPayload2 = "\x92\x01\x02";

// The node's reading of a client frame, or the refusal as the one difference.
template <class F>
std::function<Diffs(const std::string&)> node_reads(wire::Op op, F compare_body) {
    return [op, compare_body](const std::string& frame) {
        auto decoded = net::decode_request(body_of(frame), net::Limits{});
        if (auto* e = std::get_if<net::RequestError>(&decoded))
            return Diffs{"refused: " + e->message};
        const auto& req = std::get<net::Request>(decoded);
        Compare cmp;
        cmp("op", req.op, op);
        cmp("id", req.id, std::uint64_t{77});
        compare_body(req, cmp);
        return cmp.diffs;
    };
}

template <class C>
const C& command_of(const net::Request& req) {
    static const C none{};
    const auto* w = std::get_if<net::Write>(&req.body);
    if (!w || !std::holds_alternative<C>(w->command)) return none;
    return std::get<C>(w->command);
}

std::vector<Case> request_cases() {
    using Op = wire::Op;
    std::vector<Case> cases;
    auto add = [&](Op op, std::string frame, auto compare) {
        cases.push_back({op, std::move(frame), node_reads(op, compare), {}});
    };
    add(Op::ping, encoded(client::encode_request(client::PingRequest{}, 77)),
        [](const net::Request& r, Compare& c) { c("body", r.body.index(), 0u); });
    client::HelloRequest hello;
    hello.session = 5, hello.token = "secret";
    add(Op::hello, encoded(client::encode_request(hello, 77)),
        [](const net::Request& r, Compare& c) {
            const auto* h = std::get_if<net::Hello>(&r.body);
            c("token", h ? h->token : std::nullopt, std::optional<std::string>("secret"));
            c("session", h ? h->session : std::nullopt, std::optional<std::uint64_t>(5));
        });
    client::DeclareRequest declare;
    declare.queue = "q1", declare.lead_ms = 11, declare.ttr_ms = 12, declare.max_attempts = 13;
    declare.retention_ms = 14, declare.late_share = 0.25, declare.autonomous = true;
    add(Op::declare, encoded(client::encode_request(declare, 77)),
        [](const net::Request& r, Compare& c) {
            const auto& d = command_of<queue::Declare>(r);
            c("queue", d.queue, "q1");
            c("lead_ms", d.lead_ms, std::optional<queue::Millis>(11));
            c("ttr_ms", d.ttr_ms, std::optional<queue::Millis>(12));
            c("max_attempts", d.max_attempts, std::optional<std::uint32_t>(13));
            c("retention_ms", d.retention_ms, std::optional<queue::Millis>(14));
            c("late_share", d.late_share, std::optional<double>(0.25));
            c("autonomous", d.autonomous, std::optional<bool>(true));
        });
    client::PutRequest put;
    put.queue = "q1", put.key = "k1", put.payload = kPayload, put.time = 123;
    put.mode = client::PutMode::insert;
    auto same_put = [](const net::Request& r, Compare& c) {
        const auto& p = command_of<queue::Put>(r);
        c("queue", p.queue, "q1");
        c("key", p.key, "k1");
        c("payload", p.payload, kPayload);
        c("time", p.time, std::optional<queue::Millis>(123));
        c("mode", p.mode, queue::PutMode::insert);
    };
    add(Op::put, encoded(client::encode_request(put, 77)), same_put);
    client::GetRequest get;
    get.queue = "q1", get.key = "k1", get.consistency = std::string(wire::word::leader);
    add(Op::get, encoded(client::encode_request(get, 77)), [](const net::Request& r, Compare& c) {
        const auto* g = std::get_if<net::GetTask>(&r.body);
        c("queue", g ? g->queue : "", "q1");
        c("key", g ? g->key : "", "k1");
        c("consistency", g && g->leader_only, true);
    });
    client::DeleteRequest del;
    del.queue = "q1", del.key = "k1";
    add(Op::del, encoded(client::encode_request(del, 77)), [](const net::Request& r, Compare& c) {
        const auto& d = command_of<queue::Delete>(r);
        c("queue", d.queue, "q1");
        c("key", d.key, "k1");
    });
    client::TakeRequest take;
    take.queue = "q1", take.count = 3, take.timeout_ms = 50, take.ttr_ms = 60;
    take.release_on_disconnect = false;
    add(Op::take, encoded(client::encode_request(take, 77)), [](const net::Request& r, Compare& c) {
        const auto& t = command_of<queue::Take>(r);
        const auto* w = std::get_if<net::Write>(&r.body);
        c("queue", t.queue, "q1");
        c("count", t.count, 3u);
        c("timeout_ms", w ? w->wait_ms : -1, 50);
        c("ttr_ms", t.ttr_ms, std::optional<queue::Millis>(60));
        c("release_on_disconnect", t.release_on_disconnect, false);
    });
    client::TouchRequest touch;
    touch.queue = "q1", touch.key = "k1", touch.lease = 9, touch.ttr_ms = 70;
    add(Op::touch, encoded(client::encode_request(touch, 77)),
        [](const net::Request& r, Compare& c) {
            const auto& t = command_of<queue::Touch>(r);
            c("queue", t.queue, "q1");
            c("key", t.key, "k1");
            c("lease", t.lease, 9u);
            c("ttr_ms", t.ttr_ms, std::optional<queue::Millis>(70));
        });
    client::AckRequest ack;
    ack.queue = "q1", ack.key = "k1", ack.lease = 9, ack.payload = kPayload2, ack.time = 456;
    add(Op::ack, encoded(client::encode_request(ack, 77)), [](const net::Request& r, Compare& c) {
        const auto& a = command_of<queue::Ack>(r);
        c("queue", a.queue, "q1");
        c("key", a.key, "k1");
        c("lease", a.lease, 9u);
        c("payload", a.payload, std::optional<std::string>(kPayload2));
        c("time", a.time, std::optional<queue::Millis>(456));
    });
    client::ReleaseRequest release;
    release.queue = "q1", release.key = "k1", release.lease = 9, release.delay_ms = 80;
    add(Op::release, encoded(client::encode_request(release, 77)),
        [](const net::Request& r, Compare& c) {
            const auto& x = command_of<queue::Release>(r);
            c("queue", x.queue, "q1");
            c("key", x.key, "k1");
            c("lease", x.lease, 9u);
            c("delay_ms", x.delay_ms, 80);
        });
    client::BuryRequest bury;
    bury.queue = "q1", bury.key = "k1", bury.lease = 9;
    add(Op::bury, encoded(client::encode_request(bury, 77)), [](const net::Request& r, Compare& c) {
        const auto& b = command_of<queue::Bury>(r);
        c("queue", b.queue, "q1");
        c("key", b.key, "k1");
        c("lease", b.lease, 9u);
    });
    client::KickRequest kick;
    kick.queue = "q1", kick.count = 4;
    add(Op::kick, encoded(client::encode_request(kick, 77)), [](const net::Request& r, Compare& c) {
        const auto& k = command_of<queue::Kick>(r);
        c("queue", k.queue, "q1");
        c("count", k.count, 4u);
    });
    client::KickRequest kick_one;
    kick_one.queue = "q1", kick_one.key = "k7";
    add(Op::kick, encoded(client::encode_request(kick_one, 77)),
        [](const net::Request& r, Compare& c) {
            const auto& k = command_of<queue::Kick>(r);
            c("queue", k.queue, "q1");
            c("key", k.only_key, std::optional<std::string>("k7"));
        });
    client::StatsRequest stats;
    stats.queue = "q1", stats.consistency = std::string(wire::word::leader);
    add(Op::stats, encoded(client::encode_request(stats, 77)),
        [](const net::Request& r, Compare& c) {
            const auto* s = std::get_if<net::GetStats>(&r.body);
            c("queue", s ? s->queue : std::nullopt, std::optional<std::string>("q1"));
            c("consistency", s && s->leader_only, true);
        });
    client::ListRequest list;
    list.queue = "q1", list.status = std::string(wire::word::late), list.count = 250;
    list.after = "k9", list.after_time = 1234, list.consistency = std::string(wire::word::leader);
    add(Op::list, encoded(client::encode_request(list, 77)), [](const net::Request& r, Compare& c) {
        const auto* l = std::get_if<net::ListTasks>(&r.body);
        c("queue", l ? l->queue : "", "q1");
        c("status", l && l->status == queue::ListStatus::late, true);
        c("count", l ? l->count : 0u, 250u);
        c("after", l ? l->after : std::nullopt, std::optional<std::string>("k9"));
        c("after_time", l ? l->after_time : std::nullopt, std::optional<std::int64_t>(1234));
        c("consistency", l && l->leader_only, true);
    });
    for (const std::uint64_t id : {std::uint64_t(0), std::uint64_t(41)}) {
        client::BackupRequest backup{id, id ? 3u : 0u};
        add(Op::backup, encoded(client::encode_request(backup, 77)),
            [id](const net::Request& r, Compare& c) {
                const auto* b = std::get_if<net::BackupChunk>(&r.body);
                c("backup", b ? b->backup : 99, id);
                c("seq", b ? b->seq : 99u, id ? 3u : 0u);
            });
    }
    add(Op::status, encoded(client::encode_request(client::StatusRequest{}, 77)),
        [](const net::Request& r, Compare& c) {
            c("body", std::holds_alternative<net::GetStatus>(r.body), true);
        });
    add(Op::members, encoded(client::encode_request(client::MembersRequest{}, 77)),
        [](const net::Request& r, Compare& c) {
            c("body", std::holds_alternative<net::GetMembers>(r.body), true);
        });
    client::MemberAddRequest member_add{"n4", "10.0.0.4:7800", "n4:7700", "n4:7900"};
    add(Op::member_add, encoded(client::encode_request(member_add, 77)),
        [](const net::Request& r, Compare& c) {
            const auto* m = std::get_if<net::ChangeMember>(&r.body);
            c("op", m && m->op == Op::member_add, true);
            c("name", m ? m->name : "", "n4"), c("peer", m ? m->peer : "", "10.0.0.4:7800");
            c("client", m ? m->client : "", "n4:7700"), c("admin", m ? m->admin : "", "n4:7900");
        });
    add(Op::member_promote, encoded(client::encode_request(client::MemberPromoteRequest{"n4"}, 77)),
        [](const net::Request& r, Compare& c) {
            const auto* m = std::get_if<net::ChangeMember>(&r.body);
            c("op", m && m->op == Op::member_promote, true), c("name", m ? m->name : "", "n4");
        });
    add(Op::member_remove, encoded(client::encode_request(client::MemberRemoveRequest{"n2"}, 77)),
        [](const net::Request& r, Compare& c) {
            const auto* m = std::get_if<net::ChangeMember>(&r.body);
            c("op", m && m->op == Op::member_remove, true), c("name", m ? m->name : "", "n2");
        });
    // dueq-proxy and dueqctl ask for the shard map with a request built field by field; a
    // proxy or node relaying a request marks it forwarded.
    auto shards = shard::request_map(wire::op_name(Op::shards), 0);
    add(Op::shards, client::repack_with_id(shards->get(), 77),
        [](const net::Request& r, Compare& c) {
            c("body", std::holds_alternative<net::GetShards>(r.body), true);
        });
    // dueqctl shard move / moves --cancel and a source leader's move steps (node/move_steps.h).
    add(Op::move, client::repack_with_id(shard::move_request(5, 3, "c")->get(), 77),
        [](const net::Request& r, Compare& c) {
            const auto* m = std::get_if<net::StartMove>(&r.body);
            c("bucket", m ? m->first : 0u, 5u), c("count", m ? m->count : 0u, 3u);
            c("shard", m ? m->to : "", "c"), c("cancel", m && m->cancel, false);
        });
    add(Op::move_cancel, client::repack_with_id(shard::move_request(9, 2, "")->get(), 77),
        [](const net::Request& r, Compare& c) {
            const auto* m = std::get_if<net::StartMove>(&r.body);
            c("bucket", m ? m->first : 0u, 9u), c("count", m ? m->count : 0u, 2u);
            c("cancel", m && m->cancel, true);
        });
    const std::string step("\x93\x0d\x00binary\xff", 10), mac(32, '\x07');
    add(Op::move_step, client::repack_with_id(shard::move_step_request(step, mac)->get(), 77),
        [step, mac](const net::Request& r, Compare& c) {
            const auto* m = std::get_if<net::MoveStepRequest>(&r.body);
            c("step", m ? m->step : "", step), c("mac", m ? m->mac : "", mac);
        });
    auto relayed = client::unpack_request(body_of(cases[std::size_t(Op::put)].frame));
    REQUIRE(relayed.ok());
    add(Op::put,
        client::repack_with_id((*relayed)->get(), 77, {{std::string(field::forwarded), true}}),
        [same_put](const net::Request& r, Compare& c) {
            c("forwarded", r.forwarded, true);
            same_put(r, c);
        });
    return cases;
}

}  // namespace

TEST_CASE("every op the client encodes is read back by the node, field by field") {
    const auto cases = request_cases();
    std::set<wire::Op> covered;
    for (const auto& c : cases) {
        check_case(c);
        covered.insert(c.op);
    }
    for (const auto& o : wire::kOps) {
        INFO("op " << o.name << " has a request case");
        CHECK(covered.count(o.op) == 1);
    }
}
