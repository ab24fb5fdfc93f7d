// A bucket's move as the task store applies it (src/queue/store_moves.cpp): tasks move
// whole between two stores, the source's copy goes only with its drop, what storage keeps
// follows, the move table survives a restart, and a bad step changes nothing.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "queue/command_codec.h"
#include "queue/store.h"
#include "queue/store_loader.h"
#include "shard/bucket_hash.h"

using namespace dueq::queue;
using dueq::shard::BucketPhase;
using dueq::shard::MoveOutcome;
using dueq::shard::MoveStep;

namespace {

constexpr Millis T0 = 1'700'000'000'000;
constexpr std::uint32_t kBuckets = 16;

// Keys of queue "q" in bucket `b`, and `n` of them.
std::vector<std::string> keys_in(std::uint32_t b, int n) {
    std::vector<std::string> keys;
    for (int i = 0; int(keys.size()) < n; ++i) {
        std::string k = "k" + std::to_string(i);
        if (dueq::shard::bucket_of("q", k, kBuckets) == b) keys.push_back(k);
    }
    return keys;
}

MoveBucket step(MoveStep s, std::uint32_t bucket, dueq::shard::MoveGen gen, std::string peer = "") {
    MoveBucket m;
    m.step.step = s;
    m.step.bucket = bucket;
    m.step.gen = gen;
    m.step.peer = std::move(peer);
    m.bucket_count = kBuckets;
    return m;
}

// What storage would hold after every change so far: key -> record (absent: deleted).
struct Persisted {
    std::map<std::pair<std::string, std::string>, std::string> records;
    void drain(Store& s) {
        s.drain_changes(
            [&](std::string_view q, std::string_view k, std::optional<std::string>&& e) {
                if (e)
                    records[{std::string(q), std::string(k)}] = std::move(*e);
                else
                    records.erase({std::string(q), std::string(k)});
            });
    }
};

}  // namespace

TEST_CASE("a bucket's tasks move whole, leases and tombstones included") {
    Store src, dst;
    Declare d{"q"};
    d.ttr_ms = 60'000;
    d.retention_ms = 600'000;
    REQUIRE(src.apply(d, T0).ok());
    REQUIRE(dst.apply(d, T0).ok());
    const auto keys = keys_in(3, 4);
    const auto others = keys_in(4, 2);
    for (const auto& k : keys)
        REQUIRE(src.apply(Put{"q", k, "\xa1v", T0 - 10}, T0).ok());
    for (const auto& k : others)
        REQUIRE(src.apply(Put{"q", k, "\xa1o", T0 + 100'000}, T0).ok());
    // keys[0] taken (a refresher holds it), keys[1] acked (done, retained), keys[2] deleted
    // (a tombstone), keys[3] ready.
    Take t{"q", 2};
    t.session = 9;
    const Result taken = src.apply(t, T0 + 1);
    REQUIRE(taken.tasks.size() == 2);
    const TakenTask held = taken.tasks[0].key == keys[0] ? taken.tasks[0] : taken.tasks[1];
    const TakenTask acked = taken.tasks[0].key == keys[0] ? taken.tasks[1] : taken.tasks[0];
    REQUIRE(src.apply(Ack{"q", acked.key, acked.lease}, T0 + 2).ok());
    const std::string deleted = held.key == keys[2] || acked.key == keys[2] ? keys[3] : keys[2];
    REQUIRE(src.apply(Delete{"q", deleted}, T0 + 3).ok());

    REQUIRE(src.apply(step(MoveStep::begin, 3, 1, "b"), T0 + 4).ok());
    CHECK_FALSE(src.bucket_moves().writable(3));
    MoveBucket chunk = step(MoveStep::chunk, 3, 1, "a");
    chunk.step.last = true;
    src.bucket_records(
        3, kBuckets, [&](std::string_view q, std::string_view k, std::string_view r) {
            chunk.records.push_back({std::string(q), std::string(k), std::string(r)});
        });
    CHECK(chunk.records.size() == 4);  // three tasks and a tombstone; none of bucket 4
    chunk.lease_floor = src.next_lease_id();
    REQUIRE(chunk.lease_floor > held.lease);
    // Through the log's encoding, as a replica would apply it.
    const auto decoded = decode_command(encode_command(chunk));
    REQUIRE(decoded);
    REQUIRE(std::get<MoveBucket>(*decoded).records == chunk.records);
    REQUIRE(std::get<MoveBucket>(*decoded).lease_floor == chunk.lease_floor);
    Persisted dst_disk;
    const Result r = dst.apply(*decoded, T0 + 5);
    REQUIRE(r.ok());
    CHECK(r.move == MoveOutcome::applied);
    CHECK(dst.bucket_moves().find(3)->phase == BucketPhase::received);
    dst_disk.drain(dst);
    CHECK(dst_disk.records.size() == 4);
    for (const auto& k : keys) {
        const auto a = src.get("q", k), b = dst.get("q", k);
        REQUIRE(a.has_value() == b.has_value());
        if (!a) continue;
        CHECK(b->status == a->status);
        CHECK(b->payload == a->payload);
        CHECK(b->time == a->time);
        CHECK(b->attempts == a->attempts);
        CHECK(b->version == a->version);
        CHECK(b->hlc == a->hlc);
        CHECK(b->lease == a->lease);
        CHECK(b->lease_until == a->lease_until);
        CHECK(b->done_until == a->done_until);
    }
    CHECK_FALSE(dst.get("q", deleted));
    for (const auto& k : others)
        CHECK_FALSE(dst.get("q", k));

    REQUIRE(src.apply(step(MoveStep::sent, 3, 1), T0 + 6).ok());
    REQUIRE(dst.apply(step(MoveStep::activate, 3, 1), T0 + 7).ok());
    // The refresher's ack works where the bucket now is.
    CHECK(dst.apply(Ack{"q", held.key, held.lease, std::string("\xa1n"), T0 + 3'600'000}, T0 + 8)
              .ok());
    CHECK(dst.get("q", held.key)->payload == "\xa1n");
    // Leases the destination hands out from now on are numbered above every lease the
    // source gave: one whose holder's lease ran out on the source is never given again.
    const auto fresh = keys_in(3, 6).back();
    REQUIRE(dst.apply(Put{"q", fresh, "\xa1" "f", T0}, T0 + 8).ok());
    const Result again = dst.apply(Take{"q", 1}, T0 + 8);
    REQUIRE(again.tasks.size() == 1);
    CHECK(again.tasks[0].lease >= chunk.lease_floor);
    // The source's copy goes with its drop, and storage is told: only bucket 4 stays.
    Persisted src_disk;
    src_disk.drain(src);
    REQUIRE(src.apply(step(MoveStep::drop, 3, 1), T0 + 9).ok());
    src_disk.drain(src);
    for (const auto& k : keys)
        CHECK_FALSE(src.get("q", k));
    CHECK(src_disk.records.size() == others.size());
    for (const auto& k : others)
        CHECK(src.get("q", k));
    CHECK(src.bucket_moves().find(3)->phase == BucketPhase::gone);
}

TEST_CASE("the move table survives a restart, and bad steps change nothing") {
    Store s;
    REQUIRE(s.apply(Put{"q", keys_in(5, 1)[0], "\xa1v", T0}, T0).ok());
    REQUIRE(s.apply(step(MoveStep::begin, 5, 1, "c"), T0).ok());
    const std::string meta = s.encode_meta();
    Store again;
    REQUIRE(Store::Loader(again).meta(meta));
    REQUIRE(again.bucket_moves().find(5) != nullptr);
    CHECK(*again.bucket_moves().find(5) == *s.bucket_moves().find(5));
    CHECK(again.move_bucket_count() == kBuckets);

    // Refused steps: out of order, another bucket count, a record of another bucket, a
    // record that does not decode. None changes the store.
    Result r = s.apply(step(MoveStep::drop, 5, 1), T0);
    CHECK(r.code == Code::bad_request);
    CHECK(r.move == MoveOutcome::refused);
    MoveBucket other_count = step(MoveStep::sent, 5, 1);
    other_count.bucket_count = 32;
    CHECK(s.apply(other_count, T0).code == Code::bad_request);
    MoveBucket foreign = step(MoveStep::chunk, 6, 1, "a");
    foreign.records.push_back({"q", keys_in(7, 1)[0], "x"});
    CHECK(s.apply(foreign, T0).code == Code::bad_request);
    foreign.records = {{"q", keys_in(6, 1)[0], "not a record"}};
    CHECK(s.apply(foreign, T0).code == Code::bad_request);
    CHECK(s.bucket_moves().find(6) == nullptr);
    CHECK(s.encode_meta() == meta);
}

TEST_CASE("a moving bucket's keys are not written, and takes pass over its tasks") {
    Store src, dst;
    Declare d{"q"};
    d.ttr_ms = 60'000;
    for (Store* s : {&src, &dst})
        REQUIRE(s->apply(d, T0).ok());
    const auto moving = keys_in(3, 3);
    const auto staying = keys_in(4, 1);
    // The moving bucket's tasks are the most overdue: a take would pick them first.
    for (const auto& k : moving)
        REQUIRE(src.apply(Put{"q", k, "\xa1v", T0 - 1000}, T0).ok());
    REQUIRE(src.apply(Put{"q", staying[0], "\xa1v", T0 - 10}, T0).ok());
    Take one{"q", 1};
    const Result held = src.apply(one, T0);
    REQUIRE(held.tasks.size() == 1);
    REQUIRE(held.tasks[0].key != staying[0]);  // one of bucket 3, held by a refresher
    Bury b{"q", held.tasks[0].key, held.tasks[0].lease};

    REQUIRE(src.apply(step(MoveStep::begin, 3, 1, "b"), T0 + 1).ok());
    // Writes of the bucket are refused, not applied; reads still answer.
    for (const Command& c : {Command(Put{"q", moving[0], "\xa1w"}), Command(Delete{"q", moving[1]}),
                             Command(Ack{"q", held.tasks[0].key, held.tasks[0].lease}), Command(b),
                             Command(Touch{"q", held.tasks[0].key, held.tasks[0].lease})}) {
        const Result r = src.apply(c, T0 + 2);
        CHECK(r.code == Code::moving);
        CHECK(r.message.find("bucket 3 is sending (shard b)") != std::string::npos);
    }
    CHECK(src.get("q", moving[1]));
    // Parked takes are woken only for tasks a take would hand out: the shard's own one.
    CHECK(src.count_due("q", T0 + 3, 100) == 1);
    // A take passes over the bucket's due tasks to the next shard-owned one.
    Take all{"q", 10};
    const Result r = src.apply(all, T0 + 3);
    REQUIRE(r.tasks.size() == 1);
    CHECK(r.tasks[0].key == staying[0]);
    // Writes of other buckets go on.
    CHECK(src.apply(Put{"q", keys_in(5, 1)[0], "\xa1w"}, T0 + 4).ok());

    // The destination holds the copy hidden until it is activated.
    MoveBucket chunk = step(MoveStep::chunk, 3, 1, "a");
    chunk.step.last = true;
    src.bucket_records(
        3, kBuckets, [&](std::string_view q, std::string_view k, std::string_view rec) {
            chunk.records.push_back({std::string(q), std::string(k), std::string(rec)});
        });
    REQUIRE(dst.apply(chunk, T0 + 5).ok());
    CHECK(dst.apply(Take{"q", 10}, T0 + 6).tasks.empty());
    CHECK(dst.count_due("q", T0 + 6, 100) == 0);
    CHECK(dst.apply(Put{"q", moving[0], "\xa1w"}, T0 + 6).code == Code::moving);
    REQUIRE(src.apply(step(MoveStep::sent, 3, 1), T0 + 7).ok());
    REQUIRE(dst.apply(step(MoveStep::activate, 3, 1), T0 + 8).ok());
    CHECK(dst.count_due("q", T0 + 9, 100) == 2);                // what wakes the takes parked there
    CHECK(dst.apply(Take{"q", 10}, T0 + 9).tasks.size() == 2);  // the held one stays held
    CHECK(dst.apply(Touch{"q", held.tasks[0].key, held.tasks[0].lease}, T0 + 9).ok());
    // A moved bucket's keys are not written on the source any more.
    CHECK(src.apply(Put{"q", moving[0], "\xa1w"}, T0 + 10).code == Code::moving);
}

TEST_CASE("a moved lease ends no earlier in real time than on the source") {
    // The source's clock reads T0 when it sends; the destination's clock is 700 ms ahead,
    // and the chunk arrives 20 ms later, so the destination applies it at T0 + 720. Read by
    // the destination's clock unchanged, the lease would end 700 ms early.
    constexpr Millis kAhead = 700, kTransit = 20, kTtr = 60'000;
    Store src, dst;
    Declare d{"q"};
    d.ttr_ms = kTtr;
    for (Store* s : {&src, &dst})
        REQUIRE(s->apply(d, T0 - 1000).ok());
    const auto keys = keys_in(3, 2);
    for (const auto& k : keys)
        REQUIRE(src.apply(Put{"q", k, "\xa1v", T0 - 1000}, T0 - 1000).ok());
    Take one{"q", 1};
    const Result held = src.apply(one, T0 - 1000);
    REQUIRE(held.tasks.size() == 1);
    const Millis lease_end = held.tasks[0].lease_until;
    REQUIRE(lease_end == T0 - 1000 + kTtr);
    REQUIRE(src.apply(step(MoveStep::begin, 3, 1, "b"), T0).ok());
    MoveBucket chunk = step(MoveStep::chunk, 3, 1, "a");
    chunk.step.last = true;
    src.bucket_records(
        3, kBuckets, [&](std::string_view q, std::string_view k, std::string_view rec) {
            chunk.records.push_back({std::string(q), std::string(k), std::string(rec)});
        });
    chunk.sent_at = T0;
    const auto decoded = decode_command(encode_command(chunk));
    REQUIRE(decoded);
    REQUIRE(std::get<MoveBucket>(*decoded).sent_at == T0);
    const Millis arrival = T0 + kAhead + kTransit;
    REQUIRE(dst.apply(*decoded, arrival).ok());
    CHECK(dst.get("q", held.tasks[0].key)->lease_until == lease_end + kAhead + kTransit);
    // Only the lease moves: the ready task's due time is the user's, not a clock's.
    const std::string& ready = held.tasks[0].key == keys[0] ? keys[1] : keys[0];
    CHECK(dst.get("q", ready)->time == T0 - 1000);
    REQUIRE(src.apply(step(MoveStep::sent, 3, 1), T0 + 1).ok());
    REQUIRE(dst.apply(step(MoveStep::activate, 3, 1), arrival + 1).ok());
    // When the source's clock reaches the lease's end, the destination's reads 700 ms more:
    // the task is still held there, and no second worker gets it.
    const Millis source_end_on_dst = lease_end + kAhead;
    CHECK(dst.apply(Take{"q", 10}, source_end_on_dst).tasks.size() == 1);  // the ready one
    CHECK(dst.apply(Take{"q", 10}, source_end_on_dst + kTransit - 1).tasks.empty());
    // After the shifted end, the task is handed out again.
    CHECK(dst.apply(Take{"q", 10}, source_end_on_dst + kTransit + 1).tasks.size() == 1);

    // A chunk stamped later than the destination's time (its clock behind) moves no lease.
    Store behind;
    REQUIRE(behind.apply(d, T0 - 1000).ok());
    chunk.sent_at = T0 + 5000;
    REQUIRE(behind.apply(chunk, T0 + 10).ok());
    CHECK(behind.get("q", held.tasks[0].key)->lease_until == lease_end);
}
