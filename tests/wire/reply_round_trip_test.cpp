// Every op's answer from the node to the C++ client: the node's encoding read by the
// client's decoder, field by field, then each field renamed on one side (the planted
// drift) must be caught. request_round_trip_test.cpp does the same for the requests.
#include <catch2/catch.hpp>

#include "client/codec.h"
#include "common/version.h"
#include "net/frame.h"
#include "node/move_steps.h"
#include "node/replies.h"
#include "queue/store.h"
#include "shard/request_map.h"
#include "shard/sharded_client.h"
#include "shard/shards_reply.h"
#include "wire/drift.h"
#include "wire/protocol.h"

using namespace dueq;
using namespace dueq::wire_test;

namespace {

const std::string kPayload = "\xa5hello";  // one msgpack str

// The client's reading of an ok answer as T, handed to `compare`.
template <class T, class F>
std::function<Diffs(const std::string&)> client_reads(F compare) {
    return [compare](const std::string& frame) {
        auto decoded = client::decode_response(body_of(frame));
        if (!decoded.ok()) return Diffs{"refused: " + decoded.error().message};
        Compare cmp;
        cmp("id", decoded->id, std::uint64_t{77});
        cmp("ok", decoded->ok, true);
        if (!decoded->ok) return cmp.diffs;
        T out{};
        if (auto st = client::decode_result(*decoded->map, &out); !st.ok())
            return Diffs{"refused: " + st.error().message};
        compare(out, cmp);
        return cmp.diffs;
    };
}

std::string answer(const queue::Command& cmd, const queue::Result& r) {
    return node::result_reply(77, cmd, r);
}

// A queue with a task in every state, so that each stats field is set and not zero.
void fill(queue::Store& store) {
    using namespace queue;
    auto apply = [&](Command c) {
        auto r = store.apply(c, 1000);
        REQUIRE(r.ok());
        return r;
    };
    apply(Put{"q1", "taken", kPayload, 500});
    apply(Take{"q1", 1, std::nullopt, 1, true});
    apply(Put{"q1", "buried", kPayload, 500});
    auto b = apply(Take{"q1", 1, std::nullopt, 1, true});
    apply(Bury{"q1", "buried", b.tasks.at(0).lease});
    apply(Put{"q1", "done", kPayload, 500});
    auto d = apply(Take{"q1", 1, std::nullopt, 1, true});
    apply(Ack{"q1", "done", d.tasks.at(0).lease, std::nullopt, std::nullopt});
    apply(Put{"q1", "late", kPayload, 400});
    apply(Put{"q1", "later", kPayload, 5000});
}

void compare_stats(const client::QueueStats& got, const queue::QueueStats& want, Compare& c) {
    c("queue", got.queue, "q1");
    c("ready", got.ready, want.ready);
    c("taken", got.taken, want.taken);
    c("buried", got.buried, want.buried);
    c("done", got.done, want.done);
    c("due_now", got.due_now, want.due_now);
    c("next_due", got.next_due, want.next_due);
    c("oldest_late", got.oldest_late, want.oldest_late);
}

node::StatusInfo status_info() {
    node::StatusInfo s;
    s.node_id = "n1", s.role = "leader", s.leader = "h:1", s.leader_id = "n1";
    s.term = 3, s.commit_index = 10, s.last_index = 11, s.applied_index = 9;
    s.tasks = 12, s.pending = 2, s.peer_input_dropped = 1;
    s.peers.push_back({"n2", "h:2", true, 9, 2});
    s.mode = "merging", s.mode_ms = 1500, s.overlay = 3, s.served_autonomous = 4;
    s.merged = 5, s.merge_taken_over = 6, s.merge_kept = 7, s.merge_both_sides = 8;
    return s;
}

void compare_status(const client::StatusResponse& r, const node::StatusInfo& s, Compare& c) {
    c("version", r.version, dueq::build());
    c("node_id", r.node_id, s.node_id), c("role", r.role, s.role), c("term", r.term, s.term);
    c("leader", r.leader, s.leader), c("leader_id", r.leader_id, s.leader_id);
    c("commit_index", r.commit_index, s.commit_index);
    c("applied_index", r.applied_index, s.applied_index);
    c("last_index", r.last_index, s.last_index);
    c("peers", r.peers.size(), 1u);
    if (r.peers.size() == 1) {
        const auto& p = r.peers[0];
        c("id", p.id, "n2"), c("peer", p.peer, "h:2"), c("connected", p.connected, true);
        c("match", p.match, 9u), c("lag", p.lag, 2u);
    }
    c("mode", r.mode, s.mode), c("mode_ms", r.mode_ms, s.mode_ms);
    c("overlay", r.autonomy.overlay, s.overlay);
    c("served", r.autonomy.served, s.served_autonomous);
    c("merged", r.autonomy.merged, s.merged);
    c("taken_over", r.autonomy.taken_over, s.merge_taken_over);
    c("kept", r.autonomy.kept, s.merge_kept);
    c("both_sides", r.autonomy.both_sides, s.merge_both_sides);
    c("tasks", r.tasks, s.tasks), c("pending", r.pending, s.pending);
    c("peer_input_dropped", r.peer_input_dropped, s.peer_input_dropped);
}

shard::ShardMap two_shards() {
    shard::ShardMap map;
    map.version = 3, map.bucket_count = 4, map.owner = {0, 0, 1, 1};
    map.shards.push_back({"s1", {{"n1", "h:1"}}, {{0, 1}}});
    map.shards.push_back({"s2", {{"n2", "h:2"}}, {{2, 3}}});
    map.learn_owner(1, 1, 4);  // bucket 1 moved to s2 (generation 4)
    return map;
}

std::vector<Case> reply_cases(const queue::Store& store) {
    using Op = wire::Op;
    std::vector<Case> cases;
    auto add = [&](Op op, std::string frame, std::function<Diffs(const std::string&)> judge,
                   std::set<std::string> not_read = {}) {
        cases.push_back({op, std::move(frame), std::move(judge), std::move(not_read)});
    };
    auto nothing = [](const client::Empty&, Compare&) {};
    net::FrameBuilder pong;
    pong.begin_ok(77, 0);
    add(Op::ping, pong.finish(), client_reads<client::Empty>(nothing));
    add(Op::hello, net::hello_frame(77, 5, "n1", "h:1", std::string(wire::word::autonomous)),
        client_reads<client::HelloResponse>([](const client::HelloResponse& h, Compare& c) {
            c("session", h.session, 5u), c("node_id", h.node_id, "n1");
            c("leader", h.leader, "h:1"), c("mode", h.mode, wire::word::autonomous);
            c("protocol", h.protocol, std::int64_t{wire::kProtocolVersion});
            c("version", h.version, dueq::build());
        }));
    queue::Result declared;
    declared.settings = {11, 12, 13, 14, 0.25, true};
    add(Op::declare, answer(queue::Declare{}, declared),
        client_reads<client::DeclareResponse>([](const client::DeclareResponse& d, Compare& c) {
            const auto& s = d.settings;
            c("lead_ms", s.lead_ms, 11), c("ttr_ms", s.ttr_ms, 12);
            c("max_attempts", s.max_attempts, 13), c("retention_ms", s.retention_ms, 14);
            c("late_share", s.late_share, 0.25), c("autonomous", s.autonomous, true);
        }));
    queue::Result versioned;
    versioned.version = 8;
    auto version_is_8 = [](const auto& r, Compare& c) { c("version", r.version, 8u); };
    add(Op::put, answer(queue::Put{}, versioned), client_reads<client::PutResponse>(version_is_8));
    add(Op::ack, answer(queue::Ack{}, versioned), client_reads<client::AckResponse>(version_is_8));
    queue::TaskView task;
    task.key = "k1", task.payload = kPayload, task.status = queue::Status::taken;
    task.time = 123, task.attempts = 2, task.version = 8, task.lease_until = 999;
    add(Op::get, node::get_reply(77, task),
        client_reads<client::GetResponse>([](const client::GetResponse& g, Compare& c) {
            const auto& t = g.task;
            c("key", t.key, "k1"), c("payload", t.payload, kPayload);
            c("status", t.status, "taken"), c("time", t.time, 123);
            c("attempts", t.attempts, 2u), c("version", t.version, 8u);
            c("lease_until", t.lease_until, std::optional<std::int64_t>(999));
        }));
    add(Op::del, answer(queue::Delete{}, {}), client_reads<client::Empty>(nothing));
    add(Op::release, answer(queue::Release{}, {}), client_reads<client::Empty>(nothing));
    add(Op::bury, answer(queue::Bury{}, {}), client_reads<client::Empty>(nothing));
    queue::Result taken;
    taken.tasks.push_back({"k1", kPayload, 123, 9, 999, 2});
    add(Op::take, answer(queue::Take{}, taken),
        client_reads<client::TakeResponse>([](const client::TakeResponse& t, Compare& c) {
            c("tasks", t.tasks.size(), 1u);
            if (t.tasks.size() != 1) return;
            const auto& x = t.tasks[0];
            c("key", x.key, "k1"), c("payload", x.payload, kPayload), c("time", x.time, 123);
            c("lease", x.lease, 9u), c("lease_until", x.lease_until, 999);
            c("attempts", x.attempts, 2u);
        }));
    queue::Result touched;
    touched.lease_until = 999;
    add(Op::touch, answer(queue::Touch{}, touched),
        client_reads<client::TouchResponse>([](const client::TouchResponse& t, Compare& c) {
            c("lease_until", t.lease_until, 999);
        }));
    queue::Result kicked;
    kicked.kicked = 4;
    add(Op::kick, answer(queue::Kick{}, kicked),
        client_reads<client::KickResponse>(
            [](const client::KickResponse& k, Compare& c) { c("kicked", k.kicked, 4u); }));
    const auto want = store.stats("q1", 1000);
    const std::string q1 = "q1";
    for (const std::string* named : {&q1, static_cast<const std::string*>(nullptr)})
        add(Op::stats, node::stats_reply(77, store, named, 1000),
            client_reads<client::StatsResponse>([want](const client::StatsResponse& s, Compare& c) {
                c("queues", s.queues.size(), 1u);
                if (s.queues.size() == 1) compare_stats(s.queues[0], want, c);
            }));
    queue::ListPage page;
    page.tasks.push_back({"k1", queue::Status::ready, 500, 2, 0, 500});
    page.tasks.push_back({"k2", queue::Status::taken, 600, 1, 9000, 9000});
    for (const bool more : {true, false}) {
        page.more = more;
        add(Op::list, node::list_reply(77, page),
            client_reads<client::ListResponse>([page](const client::ListResponse& r, Compare& c) {
                c("tasks", r.tasks.size(), page.tasks.size());
                for (std::size_t i = 0; i < std::min(r.tasks.size(), page.tasks.size()); ++i) {
                    const auto& got = r.tasks[i];
                    const auto& want = page.tasks[i];
                    c("key", got.key, want.key), c("time", got.time, want.time);
                    c("status", got.status, std::string(queue::to_string(want.status)));
                    c("attempts", got.attempts, std::uint64_t(want.attempts));
                    c("lease_until", got.lease_until, want.lease_until);
                }
                c("after", r.after, page.more ? std::optional<std::string>("k2") : std::nullopt);
                c("after_time", r.after_time, std::int64_t(page.more ? 9000 : 0));
            }));
    }
    const std::string records("\x00\x01binary\xff", 9);
    const node::BackupReply chunk{41, 3, 1234, 7, 1'700'000'000'000, "east", "n2", records, true};
    add(Op::backup, node::backup_reply(77, chunk),
        // `records` by value: chunk.data views the local string, gone when the case runs.
        client_reads<client::BackupResponse>(
            [chunk, records](const client::BackupResponse& r, Compare& c) {
                c("backup", r.backup, chunk.backup), c("seq", r.seq, chunk.seq);
                c("index", r.index, chunk.index), c("term", r.term, chunk.term);
                c("time", r.time, chunk.time),
                    c("cluster_id", r.cluster, std::string(chunk.cluster));
                c("node_id", r.node_id, std::string(chunk.node_id)),
                    c("version", r.version, dueq::build());
                c("records", r.data, records), c("last", r.last, chunk.last);
            }));
    const auto info = status_info();
    add(Op::status, node::status_reply(77, info),
        client_reads<client::StatusResponse>(
            [info](const client::StatusResponse& r, Compare& c) { compare_status(r, info, c); }));
    node::MembersInfo members;
    members.members.push_back({"n1", 1, true, "10.0.0.1:7800", "n1:7700", "n1:7900", true, 40, 2});
    members.members.push_back({"n4", 4, false, "10.0.0.4:7800", "n4:7700", "", false, 7, 35});
    members.leader_id = "n1", members.membership_index = 33, members.pending = true;
    add(Op::members, node::members_reply(77, members),
        client_reads<client::MembersResponse>([members](const client::MembersResponse& r,
                                                        Compare& c) {
            c("members", r.members.size(), members.members.size());
            for (std::size_t i = 0; i < std::min(r.members.size(), members.members.size()); ++i) {
                const auto& got = r.members[i];
                const auto& want = members.members[i];
                c("name", got.name, want.name), c("raft_id", got.raft_id, want.raft_id);
                c("role", got.role, std::string(want.voter ? "voter" : "learner"));
                c("peer", got.peer, want.peer), c("client", got.client, want.client);
                c("admin", got.admin, want.admin), c("connected", got.connected, want.connected);
                c("match", got.match, want.match), c("lag", got.lag, want.lag);
            }
            c("leader_id", r.leader_id, members.leader_id);
            c("membership_index", r.membership_index, members.membership_index);
            c("pending", r.pending, members.pending);
        }));
    for (Op op : {Op::member_add, Op::member_promote, Op::member_remove})
        add(op, node::member_changed_reply(77, "n4", 4),
            client_reads<client::MemberChangeResponse>(
                [](const client::MemberChangeResponse& r, Compare& c) {
                    c("name", r.name, "n4"), c("raft_id", r.raft_id, 4u);
                }));
    // The shard map: `shard` (the answering node's own shard) and each shard's `leader`
    // are hints the C++ sharded client does not use; it asks members for their leader.
    add(Op::shards, shard::shards_reply(77, two_shards(), "s1", {"h:1", ""}),
        [](const std::string& frame) {
            auto decoded = client::decode_response(body_of(frame));
            if (!decoded.ok() || !decoded->ok) return Diffs{"refused"};
            auto map = shard::map_from_answer(*decoded->map);
            if (!map) return Diffs{"not a whole map"};
            const auto want = two_shards();
            Compare c;
            c("version", map->version, want.version);
            c("buckets", map->bucket_count, want.bucket_count);
            c("owner", map->owner, want.owner);
            c("owner_gen", map->gen_of(1), want.gen_of(1));
            c("shards", map->shards.size(), want.shards.size());
            for (std::size_t i = 0; i < std::min(map->shards.size(), want.shards.size()); ++i) {
                c("name", map->shards[i].name, want.shards[i].name);
                c("members", map->shards[i].members == want.shards[i].members, true);
            }
            return c.diffs;
        },
        // `moves` is for operators: dueqctl shard moves reads it as JSON, and
        // tests/shard/bucket_moves.py checks it on a real deployment.
        {std::string(wire::field::shard), std::string(wire::field::leader),
         std::string(wire::field::moves)});
    for (Op op : {Op::move, Op::move_cancel})
        add(op, node::move_reply(77, 6), [](const std::string& frame) {
            auto decoded = client::decode_response(body_of(frame));
            if (!decoded.ok() || !decoded->ok) return Diffs{"refused"};
            Compare c;
            c("count", shard::move_count(*decoded->map), std::optional<std::uint32_t>(6));
            return c.diffs;
        });
    const shard::BucketState dest{shard::BucketPhase::received, "", 3, 0};
    add(Op::move_step, node::move_step_reply(77, shard::MoveOutcome::repeated, &dest),
        [dest](const std::string& frame) {
            auto decoded = client::decode_response(body_of(frame));
            if (!decoded.ok() || !decoded->ok) return Diffs{"refused"};
            auto a = node::read_move_step_answer(*decoded->map);
            Compare c;
            c("outcome", a ? a->outcome : shard::MoveOutcome::applied,
              shard::MoveOutcome::repeated);
            c("phase", a && a->state ? a->state->phase : shard::BucketPhase::active, dest.phase);
            c("gen", a && a->state ? a->state->gen : 0, dest.gen);
            return c.diffs;
        });
    return cases;
}

}  // namespace

TEST_CASE("every answer the node encodes is read back by the client, field by field") {
    queue::Store store;
    fill(store);
    const auto stats = store.stats("q1", 1000);
    REQUIRE(stats.ready > 0);  // every stats field set: a rename of any is then visible
    REQUIRE(stats.taken > 0);
    REQUIRE(stats.buried > 0);
    REQUIRE(stats.done > 0);
    REQUIRE(stats.due_now > 0);
    REQUIRE(stats.next_due);
    REQUIRE(stats.oldest_late);
    std::set<wire::Op> covered;
    for (const auto& c : reply_cases(store)) {
        check_case(c);
        covered.insert(c.op);
    }
    for (const auto& o : wire::kOps) {
        INFO("op " << o.name << " has an answer case");
        CHECK(covered.count(o.op) == 1);
    }
}

TEST_CASE("an error answer is read back with its code, message and leader") {
    const std::string frame = net::error_frame(77, queue::Code::not_leader, "follower", "h:1");
    check_case({wire::Op::put,
                frame,
                [](const std::string& f) {
                    auto decoded = client::decode_response(body_of(f));
                    if (!decoded.ok()) return Diffs{"refused"};
                    Compare c;
                    c("id", decoded->id, std::uint64_t{77});
                    c("ok", decoded->ok, false);
                    c("code", decoded->error.code, client::Code::not_leader);
                    c("message", decoded->error.message, "follower");
                    c("leader", decoded->error.leader, "h:1");
                    return c.diffs;
                },
                {}});
}
