// One test per transition and per error of the task store (docs/semantics.md).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "queue/store.h"
#include "queue/store_loader.h"

using namespace dueq::queue;

namespace {

constexpr Millis T0 = 1'700'000'000'000;

Put put(std::string key, std::optional<Millis> time, std::string payload = "p",
        PutMode mode = PutMode::upsert) {
    Put p{"q", std::move(key), std::move(payload), time, mode};
    return p;
}

Take take(std::uint32_t count = 1, SessionId session = 7, bool rod = true) {
    Take t{"q", count};
    t.session = session;
    t.release_on_disconnect = rod;
    return t;
}

std::vector<std::string> keys_of(const Result& r) {
    std::vector<std::string> keys;
    for (const auto& t : r.tasks)
        keys.push_back(t.key);
    return keys;
}

// A store with queue "q" declared: no lead, ttr 1 s, retention 10 s.
struct Fixture {
    Store s;
    Fixture() {
        Declare d{"q"};
        d.lead_ms = 0;
        d.ttr_ms = 1000;
        d.retention_ms = 10'000;
        REQUIRE(s.apply(d, T0).ok());
    }
    Result apply(const Command& c, Millis now = T0) { return s.apply(c, now); }
    Status status(const std::string& key) { return s.get("q", key)->status; }
    // The one task take hands out at `now`, by key ("" if none).
    TakenTask take_one(Millis now = T0) {
        Result r = s.apply(take(), now);
        REQUIRE(r.ok());
        REQUIRE(r.tasks.size() == 1);
        return r.tasks[0];
    }
};

}  // namespace

TEST_CASE("put creates a ready task; without a time it is due at the log time", "[queue]") {
    Fixture f;
    Result r = f.apply(put("a", std::nullopt, "payload-a"), T0 + 5);
    REQUIRE(r.ok());
    CHECK(r.version == 1);
    auto v = f.s.get("q", "a");
    REQUIRE(v);
    CHECK(v->status == Status::ready);
    CHECK(v->time == T0 + 5);
    CHECK(v->payload == "payload-a");
    CHECK(v->attempts == 0);
    CHECK(v->version == 1);
    CHECK(v->hlc == static_cast<std::uint64_t>(T0 + 5) << 16);
    CHECK(f.s.task_count() == 1);
    CHECK_FALSE(f.s.get("q", "b"));
    CHECK_FALSE(f.s.get("other", "a"));
}

TEST_CASE("a queue used but never declared is created with the defaults", "[queue]") {
    Store s;
    Declare defaults{std::string(kDefaultsQueue)};
    defaults.ttr_ms = 1234;
    REQUIRE(s.apply(defaults, T0).ok());
    CHECK(s.queue_names().empty());  // declaring the defaults creates no queue
    CHECK(s.default_settings().ttr_ms == 1234);
    REQUIRE(s.apply(Put{"fresh", "k", "p"}, T0).ok());
    CHECK(s.queue_names() == std::vector<std::string>{"fresh"});
    CHECK(s.settings("fresh").ttr_ms == 1234);
    Result r = s.apply(Take{"fresh"}, T0);
    REQUIRE(r.tasks.size() == 1);
    CHECK(r.tasks[0].lease_until == T0 + 1234);
    // Reads and takes of unknown queues create nothing.
    CHECK(s.apply(Take{"ghost"}, T0).tasks.empty());
    CHECK(s.apply(Kick{"ghost", 5}, T0).kicked == 0);
    CHECK(s.queue_names() == std::vector<std::string>{"fresh"});
}

TEST_CASE("declare creates or updates; declared defaults sit under a queue's own", "[queue]") {
    Store s;
    Declare base{std::string(kDefaultsQueue)};
    base.lead_ms = 100;
    base.ttr_ms = 200;
    REQUIRE(s.apply(base, T0).ok());
    CHECK(s.settings("c").lead_ms == 100);
    Declare d{"c"};
    d.ttr_ms = 999;
    Result r = s.apply(d, T0);
    REQUIRE(r.ok());
    CHECK(s.queue_names() == std::vector<std::string>{"c"});
    CHECK(r.settings.lead_ms == 100);
    CHECK(r.settings.ttr_ms == 999);
    Declare d2{"c"};
    d2.late_share = 0.5;
    d2.max_attempts = 3;
    r = s.apply(d2, T0);
    CHECK(r.settings.ttr_ms == 999);  // unset fields keep their value
    CHECK(r.settings.late_share == 0.5);
    CHECK(r.settings.max_attempts == 3);
    base.lead_ms = 7;
    REQUIRE(s.apply(base, T0).ok());  // new defaults change what a queue did not declare
    CHECK(s.settings("c").lead_ms == 7);
    CHECK(s.settings("c").ttr_ms == 999);
    CHECK(s.settings("unknown").lead_ms == 7);
    // Out-of-range defaults are refused like any declare, and change nothing.
    Declare bad{std::string(kDefaultsQueue)};
    bad.late_share = 2.0;
    CHECK(s.apply(bad, T0).code == Code::bad_request);
    CHECK(s.default_settings().late_share == 0.0);
}

TEST_CASE("declared defaults survive the store meta record", "[queue]") {
    Store s;
    Declare base{std::string(kDefaultsQueue)};
    base.retention_ms = 5;
    base.late_share = 0.25;
    REQUIRE(s.apply(base, T0).ok());
    REQUIRE(s.apply(Put{"q", "k", "p"}, T0).ok());
    Store t;
    REQUIRE(Store::Loader(t).meta(s.encode_meta()));
    CHECK(t.default_settings() == s.default_settings());
    CHECK(t.settings("q").retention_ms == 5);
}

TEST_CASE("put modes: insert refuses an existing task, update a missing one", "[queue]") {
    Fixture f;
    CHECK(f.apply(put("a", T0, "1", PutMode::update)).code == Code::not_found);
    CHECK_FALSE(f.s.get("q", "a"));
    REQUIRE(f.apply(put("a", T0, "1", PutMode::insert)).ok());
    CHECK(f.apply(put("a", T0, "2", PutMode::insert)).code == Code::exists);
    CHECK(f.s.get("q", "a")->payload == "1");
    Result r = f.apply(put("a", T0 + 9, "three", PutMode::update));
    REQUIRE(r.ok());
    CHECK(r.version == 2);
    CHECK(f.s.get("q", "a")->payload == "three");
    CHECK(f.s.get("q", "a")->time == T0 + 9);
    r = f.apply(put("a", T0, "4", PutMode::upsert));
    CHECK(r.version == 3);
}

TEST_CASE("take order: due with lead, not-late earliest first, then late earliest first",
          "[queue][order]") {
    Fixture f;
    Declare d{"q"};
    d.lead_ms = 100;
    REQUIRE(f.apply(d).ok());
    const Millis now = T0 + 1000;
    REQUIRE(f.apply(put("late-old", now - 500)).ok());
    REQUIRE(f.apply(put("late-new", now - 10)).ok());
    REQUIRE(f.apply(put("soon", now + 50)).ok());
    REQUIRE(f.apply(put("at-now", now)).ok());
    REQUIRE(f.apply(put("edge", now + 100)).ok());     // time - lead == now: due
    REQUIRE(f.apply(put("not-due", now + 101)).ok());  // one ms too early
    Result r = f.apply(take(10), now);
    CHECK(keys_of(r) == std::vector<std::string>{"at-now", "soon", "edge", "late-old", "late-new"});
    CHECK(f.status("not-due") == Status::ready);
    CHECK(f.apply(take(), now).tasks.empty());
    CHECK(keys_of(f.apply(take(), now + 1)) == std::vector<std::string>{"not-due"});
}

TEST_CASE("equal times are handed out in key order", "[queue][order]") {
    Fixture f;
    for (const char* k : {"c", "a", "b"})
        REQUIRE(f.apply(put(k, T0)).ok());
    CHECK(keys_of(f.apply(take(3))) == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("late_share reserves that share of contested takes for late tasks", "[queue][order]") {
    auto run = [](double share) {
        Fixture f;
        Declare d{"q"};
        d.lead_ms = 1'000'000;
        d.late_share = share;
        REQUIRE(f.apply(d).ok());
        for (int i = 0; i < 8; ++i) {
            REQUIRE(f.apply(put("late" + std::to_string(i), T0 - 100 + i)).ok());
            REQUIRE(f.apply(put("fresh" + std::to_string(i), T0 + 100 + i)).ok());
        }
        std::string kinds;
        for (int i = 0; i < 8; ++i)
            kinds += f.take_one().key.substr(0, 1);
        return kinds;
    };
    CHECK(run(0.0) == "ffffffff");
    CHECK(run(1.0) == "llllllll");
    CHECK(run(0.5) == "flflflfl");
    CHECK(run(0.25) == "ffflfffl");
}

TEST_CASE("late_share credit only moves on contested takes", "[queue][order]") {
    Fixture f;
    Declare d{"q"};
    d.lead_ms = 1'000'000;
    d.late_share = 0.5;
    REQUIRE(f.apply(d).ok());
    // Only fresh tasks: no contest, so no credit is built up for later.
    for (int i = 0; i < 4; ++i)
        REQUIRE(f.apply(put("f" + std::to_string(i), T0 + 10 + i)).ok());
    for (int i = 0; i < 4; ++i)
        CHECK(f.take_one().key[0] == 'f');
    REQUIRE(f.apply(put("late", T0 - 1)).ok());
    REQUIRE(f.apply(put("fresh", T0 + 1)).ok());
    CHECK(f.take_one().key == "fresh");
    CHECK(f.take_one().key == "late");
}

TEST_CASE("take grants unique leases, counts attempts, honours ttr", "[queue][lease]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0)).ok());
    REQUIRE(f.apply(put("b", T0)).ok());
    Take t = take(2);
    t.ttr_ms = 5000;
    Result r = f.apply(t, T0 + 1);
    REQUIRE(r.tasks.size() == 2);
    CHECK(r.tasks[0].lease != r.tasks[1].lease);
    CHECK(r.tasks[0].lease_until == T0 + 1 + 5000);
    CHECK(r.tasks[0].attempts == 1);
    CHECK(r.tasks[0].payload == "p");
    auto v = f.s.get("q", "a");
    CHECK(v->status == Status::taken);
    CHECK(v->lease == r.tasks[0].lease);
    CHECK(v->owner == 7);
    CHECK(v->release_on_disconnect);
    CHECK(v->version == 2);
    // Leases are never reused, even after the task is gone.
    LeaseId last = r.tasks[1].lease;
    REQUIRE(f.apply(Delete{"q", "a"}).ok());
    REQUIRE(f.apply(put("a", T0)).ok());
    CHECK(f.take_one(T0 + 2).lease > last);
}

TEST_CASE("a lease runs out at lease_until: back to ready, attempts kept", "[queue][lease]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0)).ok());
    TakenTask t = f.take_one();
    f.s.advance(T0 + 999);
    CHECK(f.status("a") == Status::taken);
    f.s.advance(T0 + 1000);
    auto v = f.s.get("q", "a");
    CHECK(v->status == Status::ready);
    CHECK(v->attempts == 1);
    CHECK(v->lease == 0);
    CHECK(v->version == 3);
    CHECK(f.apply(Ack{"q", "a", t.lease}, T0 + 1000).code == Code::lease_mismatch);
    TakenTask again = f.take_one(T0 + 1001);
    CHECK(again.attempts == 2);
    CHECK(again.lease != t.lease);
}

TEST_CASE("touch extends the lease from now; wrong or stale leases are refused", "[queue][lease]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0)).ok());
    TakenTask t = f.take_one();
    Result r = f.apply(Touch{"q", "a", t.lease}, T0 + 900);
    REQUIRE(r.ok());
    CHECK(r.lease_until == T0 + 1900);
    Touch custom{"q", "a", t.lease, 50};
    CHECK(f.apply(custom, T0 + 901).lease_until == T0 + 951);
    CHECK(f.apply(Touch{"q", "a", t.lease + 1}, T0 + 902).code == Code::lease_mismatch);
    CHECK(f.apply(Touch{"q", "zz", t.lease}, T0 + 902).code == Code::not_found);
    CHECK(f.apply(Touch{"q", "a", t.lease}, T0 + 951).code == Code::lease_mismatch);  // ran out
    REQUIRE(f.apply(put("r", T0 + 1000)).ok());
    CHECK(f.apply(Touch{"q", "r", 1}, T0 + 1000).code == Code::lease_mismatch);  // not taken
}

TEST_CASE("ack with a time: ready again at that time, attempts reset", "[queue][ack]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0, "old")).ok());
    TakenTask t = f.take_one();
    Ack a{"q", "a", t.lease, std::string("new"), T0 + 3600};
    Result r = f.apply(a, T0 + 10);
    REQUIRE(r.ok());
    CHECK(r.version == 3);
    CHECK(r.ack_margin == -10);  // acked 10 ms after the task's time
    auto v = f.s.get("q", "a");
    CHECK(v->status == Status::ready);
    CHECK(v->time == T0 + 3600);
    CHECK(v->payload == "new");
    CHECK(v->attempts == 0);
    CHECK(f.apply(a, T0 + 11).code == Code::lease_mismatch);  // the lease is spent
    CHECK(f.apply(take(), T0 + 11).tasks.empty());
    CHECK(f.take_one(T0 + 3600).key == "a");
}

TEST_CASE("ack without a time: done, refuses insert for retention_ms, then removed",
          "[queue][ack]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0)).ok());
    TakenTask t = f.take_one();
    REQUIRE(f.apply(Ack{"q", "a", t.lease}, T0 + 5).ok());
    auto v = f.s.get("q", "a");
    CHECK(v->status == Status::done);
    CHECK(v->done_until == T0 + 5 + 10'000);
    CHECK(v->payload == "p");  // an ack without payload keeps it
    CHECK(f.apply(put("a", T0, "x", PutMode::insert), T0 + 10'004).code == Code::exists);
    CHECK(f.apply(take(), T0 + 10'004).tasks.empty());
    CHECK(f.s.stats("q", T0 + 10'004).done == 1);
    f.s.advance(T0 + 10'005);
    CHECK_FALSE(f.s.get("q", "a"));
    CHECK(f.apply(put("a", T0, "x", PutMode::insert), T0 + 10'005).ok());
}

TEST_CASE("update and upsert revive a done task", "[queue][ack]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0)).ok());
    REQUIRE(f.apply(Ack{"q", "a", f.take_one().lease}).ok());
    REQUIRE(f.apply(put("a", T0 + 1, "again", PutMode::update)).ok());
    CHECK(f.status("a") == Status::ready);
    CHECK(f.s.stats("q", T0).done == 0);
}

TEST_CASE("retention_ms 0 removes a done task at once", "[queue][ack]") {
    Fixture f;
    Declare d{"q"};
    d.retention_ms = 0;
    REQUIRE(f.apply(d).ok());
    REQUIRE(f.apply(put("a", T0)).ok());
    Result r = f.apply(Ack{"q", "a", f.take_one().lease});
    REQUIRE(r.ok());
    CHECK(r.version == 3);
    CHECK_FALSE(f.s.get("q", "a"));
    CHECK(f.s.task_count() == 0);
}

TEST_CASE("put on a taken task replaces it and voids the lease", "[queue][lease]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0, "v1")).ok());
    TakenTask t = f.take_one();
    REQUIRE(f.apply(put("a", T0 + 50, "v2")).ok());
    auto v = f.s.get("q", "a");
    CHECK(v->status == Status::ready);
    CHECK(v->payload == "v2");
    CHECK(v->attempts == 0);
    CHECK(v->lease == 0);
    CHECK(f.apply(Ack{"q", "a", t.lease, std::string("stale")}).code == Code::lease_mismatch);
    CHECK(f.apply(Release{"q", "a", t.lease}).code == Code::lease_mismatch);
    CHECK(f.apply(Bury{"q", "a", t.lease}).code == Code::lease_mismatch);
    CHECK(f.s.get("q", "a")->payload == "v2");
    // The voided lease does not expire anything later either.
    const std::uint64_t version = f.s.get("q", "a")->version;
    CHECK(version == 3);
    f.s.advance(T0 + 5000);
    CHECK(f.s.get("q", "a")->version == version);
}

TEST_CASE("release: back to ready, optionally held back by delay_ms", "[queue][release]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0 + 10)).ok());
    TakenTask t = f.take_one(T0 + 10);
    REQUIRE(f.apply(Release{"q", "a", t.lease}, T0 + 20).ok());
    CHECK(f.status("a") == Status::ready);
    t = f.take_one(T0 + 20);
    CHECK(t.attempts == 2);
    REQUIRE(f.apply(Release{"q", "a", t.lease, 500}, T0 + 30).ok());
    auto v = f.s.get("q", "a");
    CHECK(v->status == Status::ready);
    CHECK(v->not_before == T0 + 530);
    CHECK(v->time == T0 + 10);  // the deadline is kept
    CHECK_FALSE(f.s.has_due("q", T0 + 529));
    CHECK(f.s.next_event("q", T0 + 30) == T0 + 530);
    CHECK(f.apply(take(), T0 + 529).tasks.empty());
    CHECK(f.s.has_due("q", T0 + 530));
    CHECK(f.take_one(T0 + 530).key == "a");
}

namespace {
// x, y and z, due at T0 + 3, + 1 and + 2, taken and buried at T0 + 5.
void bury_three(Fixture& f) {
    for (auto [k, t] : {std::pair{"x", T0 + 3}, {"y", T0 + 1}, {"z", T0 + 2}}) {
        REQUIRE(f.apply(put(k, t)).ok());
    }
    for (int i = 0; i < 3; ++i) {
        TakenTask t = f.take_one(T0 + 5);
        REQUIRE(f.apply(Bury{"q", t.key, t.lease}, T0 + 5).ok());
        CHECK(f.status(t.key) == Status::buried);
    }
}
}  // namespace

TEST_CASE("bury and kick: kick moves the earliest buried first, up to count", "[queue][bury]") {
    Fixture f;
    bury_three(f);
    CHECK(f.apply(take(), T0 + 5).tasks.empty());
    CHECK(f.s.stats("q", T0 + 5).buried == 3);
    Result r = f.apply(Kick{"q", 2}, T0 + 6);
    CHECK(r.kicked == 2);
    CHECK(f.status("y") == Status::ready);
    CHECK(f.status("z") == Status::ready);
    CHECK(f.status("x") == Status::buried);
    CHECK(f.s.get("q", "y")->attempts == 0);
    CHECK(f.apply(Kick{"q", 10}, T0 + 6).kicked == 1);
    CHECK(f.apply(Kick{"q", 10}, T0 + 6).kicked == 0);
}

TEST_CASE("kick by key moves that buried task only", "[queue][bury]") {
    Fixture f;
    bury_three(f);
    // Not the earliest (y): the one named.
    Result r = f.apply(Kick{"q", 1, "x"}, T0 + 6);
    CHECK(r.kicked == 1);
    CHECK(f.status("x") == Status::ready);
    CHECK(f.s.get("q", "x")->attempts == 0);
    CHECK(f.status("y") == Status::buried);
    CHECK(f.status("z") == Status::buried);
    CHECK(f.apply(Kick{"q", 1, "x"}, T0 + 6).kicked == 0);  // ready already: nothing to do
    CHECK(f.apply(Kick{"q", 1, "nope"}, T0 + 6).code == Code::not_found);
    CHECK(f.apply(Kick{"ghost", 1, "x"}, T0 + 6).code == Code::not_found);
    CHECK(f.s.stats("q", T0 + 6).buried == 2);
}

TEST_CASE("max_attempts: the failure after the last allowed take buries", "[queue][attempts]") {
    Fixture f;
    Declare d{"q"};
    d.max_attempts = 2;
    REQUIRE(f.apply(d).ok());
    REQUIRE(f.apply(put("a", T0)).ok());
    f.take_one(T0);                       // attempt 1, lease runs out
    TakenTask t = f.take_one(T0 + 1000);  // attempt 2
    CHECK(t.attempts == 2);
    f.s.advance(T0 + 2000);  // the second lease runs out: no attempts left
    CHECK(f.status("a") == Status::buried);
    CHECK(f.s.get("q", "a")->attempts == 2);
    REQUIRE(f.apply(Kick{"q", 1}, T0 + 2000).ok());
    t = f.take_one(T0 + 2000);
    CHECK(t.attempts == 1);
    t = f.take_one(T0 + 3000);
    REQUIRE(f.apply(Release{"q", "a", t.lease, 100}, T0 + 3001).ok());  // release is a failure
    CHECK(f.status("a") == Status::buried);
}

TEST_CASE("max_attempts lowered: a take buries what has used its attempts and goes on",
          "[queue][attempts]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0)).ok());
    REQUIRE(f.apply(put("b", T0)).ok());
    f.take_one(T0);  // a: attempts 1
    f.take_one(T0);  // b: attempts 1
    f.s.advance(T0 + 1000);
    f.take_one(T0 + 1000);  // a: attempts 2
    f.s.advance(T0 + 2000);
    Declare d{"q"};
    d.max_attempts = 2;
    REQUIRE(f.apply(d, T0 + 2000).ok());
    Result r = f.apply(take(5), T0 + 2000);
    CHECK(keys_of(r) == std::vector<std::string>{"b"});
    CHECK(f.status("a") == Status::buried);
}

TEST_CASE("ReleaseSession returns the session's release_on_disconnect tasks", "[queue][session]") {
    Fixture f;
    for (const char* k : {"a", "b", "c", "d"})
        REQUIRE(f.apply(put(k, T0)).ok());
    REQUIRE(f.apply(take(1, 1, true)).tasks.size() == 1);   // a: session 1
    REQUIRE(f.apply(take(1, 1, false)).tasks.size() == 1);  // b: session 1, kept on disconnect
    REQUIRE(f.apply(take(1, 2, true)).tasks.size() == 1);   // c: session 2
    // What a new leader reads to give these sessions their grace period.
    CHECK(f.s.lease_holders() == std::vector<SessionId>{1, 2});
    CHECK(f.s.holds_leases(1));
    CHECK_FALSE(f.s.holds_leases(3));
    REQUIRE(f.apply(ReleaseSession{1}, T0 + 10).ok());
    CHECK(f.s.lease_holders() == std::vector<SessionId>{2});  // b was kept on disconnect
    CHECK_FALSE(f.s.holds_leases(1));
    CHECK(f.status("a") == Status::ready);
    CHECK(f.s.get("q", "a")->attempts == 1);  // the take counted; the disconnect does not
    CHECK(f.status("b") == Status::taken);
    CHECK(f.status("c") == Status::taken);
    REQUIRE(f.apply(ReleaseSession{1}, T0 + 11).ok());  // idempotent
    REQUIRE(f.apply(ReleaseSession{99}, T0 + 11).ok());
    CHECK(f.status("c") == Status::taken);
}

TEST_CASE("ReleaseSession at max_attempts buries", "[queue][session]") {
    Fixture f;
    Declare d{"q"};
    d.max_attempts = 1;
    REQUIRE(f.apply(d).ok());
    REQUIRE(f.apply(put("a", T0)).ok());
    f.take_one();
    REQUIRE(f.apply(ReleaseSession{7}).ok());
    CHECK(f.status("a") == Status::buried);
}

TEST_CASE("delete removes a task in any status", "[queue]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0)).ok());
    TakenTask t = f.take_one();
    REQUIRE(f.apply(Delete{"q", "a"}).ok());
    CHECK_FALSE(f.s.get("q", "a"));
    CHECK(f.apply(Ack{"q", "a", t.lease}).code == Code::not_found);
    CHECK(f.apply(Delete{"q", "a"}).code == Code::not_found);
    CHECK(f.apply(Delete{"nope", "a"}).code == Code::not_found);
    f.s.advance(T0 + 10'000);  // the lease it had leaves nothing behind
    CHECK(f.s.task_count() == 0);
}

TEST_CASE("bad input is refused with bad_request and changes nothing", "[queue][errors]") {
    Store s(StoreLimits{.max_key_bytes = 8,
                        .max_payload_bytes = 16,
                        .max_take_count = 10,
                        .max_kick_count = 10,
                        .max_queue_name_bytes = 8});
    REQUIRE(s.apply(Put{"q", "a", "p"}, T0).ok());
    const std::string meta = s.encode_meta();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto declare = [](auto set) {
        Declare d{"q"};
        set(d);
        return d;
    };
    std::vector<Command> bad = {
        Put{"q", "", "p"},
        Put{"q", "123456789", "p"},
        Put{"q", "a", std::string(17, 'x')},
        Put{"", "a", "p"},
        Put{"123456789", "a", "p"},
        Put{"q", "a", "p", -1},
        Put{"q", "a", "p", std::numeric_limits<Millis>::max()},
        Put{"q", "a", "p", std::nullopt, static_cast<PutMode>(9)},
        Delete{"q", ""},
        Take{"q", 0},
        Take{"q", 11},
        Take{"q", 1, Millis{0}},
        Take{"q", 1, Millis{-5}},
        Take{"", 1},
        Touch{"q", "a", 1, Millis{-1}},
        Ack{"q", "a", 1, std::string(17, 'x')},
        Ack{"q", "a", 1, std::nullopt, Millis{-3}},
        Release{"q", "a", 1, -1},
        Bury{"q", "", 1},
        Kick{"q", 0},
        Kick{"q", 11},
        declare([](Declare& d) { d.late_share = 1.5; }),
        declare([](Declare& d) { d.late_share = -0.1; }),
        declare([&](Declare& d) { d.late_share = nan; }),
        declare([](Declare& d) { d.lead_ms = -1; }),
        declare([](Declare& d) { d.ttr_ms = 0; }),
        declare([](Declare& d) { d.retention_ms = -1; }),
        Declare{"123456789"},
    };
    for (std::size_t i = 0; i < bad.size(); ++i) {
        CAPTURE(i);
        Result r = s.apply(bad[i], T0);
        CHECK(r.code == Code::bad_request);
        CHECK_FALSE(r.message.empty());
    }
    CHECK(s.encode_meta() == meta);
    CHECK(s.task_count() == 1);
    CHECK(s.get("q", "a")->version == 1);
    CHECK(s.queue_names() == std::vector<std::string>{"q"});
}

TEST_CASE("lease errors come after validation: not_found, then lease_mismatch", "[queue][errors]") {
    Fixture f;
    CHECK(f.apply(Ack{"q", "missing", 1}).code == Code::not_found);
    CHECK(f.apply(Release{"q", "missing", 1}).code == Code::not_found);
    CHECK(f.apply(Bury{"nowhere", "missing", 1}).code == Code::not_found);
    REQUIRE(f.apply(put("a", T0)).ok());
    CHECK(f.apply(Ack{"q", "a", 1}).code == Code::lease_mismatch);  // ready, not taken
    TakenTask t = f.take_one();
    CHECK(f.apply(Ack{"q", "a", t.lease + 100}).code == Code::lease_mismatch);
    CHECK(f.status("a") == Status::taken);
}

TEST_CASE("has_due and next_event follow due times, leases and delays", "[queue][events]") {
    Fixture f;
    Declare d{"q"};
    d.lead_ms = 100;
    REQUIRE(f.apply(d).ok());
    CHECK_FALSE(f.s.has_due("q", T0));
    CHECK_FALSE(f.s.next_event("q", T0));
    CHECK_FALSE(f.s.has_due("nope", T0));
    CHECK_FALSE(f.s.next_event("nope", T0));
    REQUIRE(f.apply(put("a", T0 + 500)).ok());
    CHECK_FALSE(f.s.has_due("q", T0));
    CHECK(f.s.next_event("q", T0) == T0 + 400);
    CHECK(f.s.next_event_any(T0) == T0 + 400);
    CHECK(f.s.has_due("q", T0 + 400));
    TakenTask t = f.take_one(T0 + 400);
    CHECK(f.s.next_event("q", T0 + 400) == T0 + 1400);  // the lease runs out
    CHECK_FALSE(f.s.has_due("q", T0 + 1399));
    CHECK(f.s.has_due("q", T0 + 1400));  // before advance(): the expiry is seen anyway
    f.s.advance(T0 + 1400);
    CHECK(f.s.has_due("q", T0 + 1400));
    (void)t;
}

TEST_CASE("stats count by status and find the due and late edges", "[queue][stats]") {
    Fixture f;
    REQUIRE(f.apply(put("late", T0 - 50)).ok());
    REQUIRE(f.apply(put("now", T0)).ok());
    REQUIRE(f.apply(put("later", T0 + 50)).ok());
    REQUIRE(f.apply(put("t", T0 - 100)).ok());
    REQUIRE(f.apply(take(1)).ok());  // takes "now" (not late first)
    QueueStats st = f.s.stats("q", T0);
    CHECK(st.ready == 3);
    CHECK(st.taken == 1);
    CHECK(st.due_now == 2);
    CHECK_FALSE(st.due_now_capped);
    CHECK(st.next_due == T0 - 100);
    CHECK(st.oldest_late == T0 - 100);
    CHECK(f.s.stats("nope", T0).ready == 0);
}

TEST_CASE("stats stop counting due tasks at the cap", "[queue][stats]") {
    Fixture f;
    for (int i = 0; i < 10'050; ++i)
        REQUIRE(f.apply(put("k" + std::to_string(i), T0)).ok());
    QueueStats st = f.s.stats("q", T0);
    CHECK(st.ready == 10'050);
    CHECK(st.due_now == 10'000);
    CHECK(st.due_now_capped);
}

TEST_CASE("advance commutes with apply", "[queue][events]") {
    auto build = [](bool with_advance) {
        auto f = std::make_unique<Fixture>();
        REQUIRE(f->apply(put("a", T0)).ok());
        REQUIRE(f->apply(put("b", T0)).ok());
        f->take_one();
        TakenTask b = f->take_one();
        REQUIRE(f->apply(Release{"q", "b", b.lease, 300}, T0 + 1).ok());
        if (with_advance) {
            f->s.advance(T0 + 500);
            f->s.advance(T0 + 1200);
            f->s.advance(T0 + 1100);  // going back is ignored
        }
        REQUIRE(f->apply(put("c", T0 + 1500), T0 + 1500).ok());
        return f;
    };
    auto x = build(false), y = build(true);
    for (const char* k : {"a", "b", "c"}) {
        auto a = x->s.get("q", k), b = y->s.get("q", k);
        CHECK(a->status == b->status);
        CHECK(a->version == b->version);
        CHECK(a->hlc == b->hlc);
        CHECK(a->not_before == b->not_before);
    }
    CHECK(x->s.encode_meta() == y->s.encode_meta());
}

TEST_CASE("payloads change size in place and across reallocation", "[queue]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0, "short")).ok());
    TakenTask t = f.take_one();
    std::string big(5000, 'b');
    REQUIRE(f.apply(Ack{"q", "a", t.lease, big, T0}).ok());
    CHECK(f.s.get("q", "a")->payload == big);
    t = f.take_one();
    CHECK(t.payload == big);
    REQUIRE(f.apply(Ack{"q", "a", t.lease, std::string(""), T0}).ok());
    CHECK(f.s.get("q", "a")->payload.empty());
    REQUIRE(f.apply(put("a", T0, "same!")).ok());
    REQUIRE(f.apply(put("a", T0, "SAME!")).ok());
    CHECK(f.s.get("q", "a")->payload == "SAME!");
}

TEST_CASE("many keys: lookup survives growth and deletion", "[queue]") {
    Fixture f;
    const int n = 20'000;
    for (int i = 0; i < n; ++i)
        REQUIRE(f.apply(put("key-" + std::to_string(i), T0 + i)).ok());
    for (int i = 0; i < n; i += 3)
        REQUIRE(f.apply(Delete{"q", "key-" + std::to_string(i)}).ok());
    for (int i = 0; i < n; ++i) {
        bool present = f.s.get("q", "key-" + std::to_string(i)).has_value();
        if (present == (i % 3 == 0)) FAIL("key-" << i << " present=" << present);
    }
    CHECK(f.s.task_count() == static_cast<std::size_t>(n - (n + 2) / 3));
    CHECK(f.s.overhead_bytes() > f.s.task_count() * 64);
}

TEST_CASE("names are the wire names", "[queue]") {
    CHECK(std::string(to_string(Status::ready)) == "ready");
    CHECK(std::string(to_string(Status::taken)) == "taken");
    CHECK(std::string(to_string(Status::buried)) == "buried");
    CHECK(std::string(to_string(Status::done)) == "done");
    CHECK(std::string(to_string(Code::ok)) == "ok");
    CHECK(std::string(to_string(Code::bad_request)) == "bad_request");
    CHECK(std::string(to_string(Code::not_found)) == "not_found");
    CHECK(std::string(to_string(Code::exists)) == "exists");
    CHECK(std::string(to_string(Code::lease_mismatch)) == "lease_mismatch");
    CHECK(std::string(to_string(Code::not_leader)) == "not_leader");
    CHECK(std::string(to_string(Code::no_quorum)) == "no_quorum");
    CHECK(std::string(to_string(Code::too_large)) == "too_large");
    CHECK(std::string(to_string(Code::timeout)) == "timeout");
    CHECK(std::string(to_string(Code::unavailable)) == "unavailable");
    CHECK(std::string(to_string(Code::unauthorized)) == "unauthorized");
    CHECK(std::string(to_string(Code::internal)) == "internal");
}

TEST_CASE("queue counters count what was applied; stats count late tasks", "[queue]") {
    Fixture f;
    REQUIRE(f.apply(put("a", T0 - 50)).ok());  // late at T0
    REQUIRE(f.apply(put("b", T0 - 10)).ok());  // late at T0
    REQUIRE(f.apply(put("c", T0)).ok());       // due, not late
    REQUIRE(f.apply(put("d", T0 + 60'000)).ok());
    auto st = f.s.stats("q", T0);
    CHECK(st.due_now == 3);
    CHECK(st.late_now == 2);
    CHECK_FALSE(st.late_now_capped);

    const TakenTask a = f.take_one();  // the not-late one goes first: c
    CHECK(a.key == "c");
    REQUIRE(f.apply(Ack{"q", a.key, a.lease, std::nullopt, T0 + 3600'000}).ok());
    const TakenTask b = f.take_one();  // then the late ones
    REQUIRE(f.apply(Bury{"q", b.key, b.lease}).ok());
    f.take_one();  // its lease (ttr 1 s) runs out below
    f.s.advance(T0 + 1000);

    const QueueCounters c = f.s.counters("q");
    CHECK(c.puts == 4);
    CHECK(c.takes == 3);
    CHECK(c.late_takes == 2);
    CHECK(c.acks == 1);
    CHECK(c.buries == 1);
    CHECK(c.lease_expiries == 1);
    CHECK(f.s.counters("unknown").takes == 0);
}
