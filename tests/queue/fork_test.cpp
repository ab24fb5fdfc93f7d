// The store's fork (autonomous mode) and the Merge rules (docs/autonomy.md), with a model
// test: random writes on both sides of a partition, merged, compared with a naive
// reference of "per key, the write with the larger hlc wins".
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "queue/store.h"
#include "queue/store_loader.h"

using namespace dueq::queue;

namespace {

constexpr Millis T0 = 1'700'000'000'000;
constexpr LeaseId kBase = kAutonomousLeases | (LeaseId{3} << 56);

using Image = std::map<std::pair<std::string, std::string>, std::string>;

Image image_of(const Store& s) {
    Image img;
    s.for_each_task([&](std::string_view q, std::string_view k, std::string_view enc) {
        img[{std::string(q), std::string(k)}] = std::string(enc);
    });
    return img;
}

void declare(Store& s, const std::string& queue, bool autonomous, Millis at) {
    Declare d;
    d.queue = queue;
    d.autonomous = autonomous;
    REQUIRE(s.apply(d, at).ok());
}

void drain(Store& s) {
    s.drain_changes([](auto, auto, const auto&) {});
}

// A second replica with the same state (as a snapshot would give it).
std::unique_ptr<Store> copy_of(const Store& s) {
    auto c = std::make_unique<Store>(kApplyLimits);
    REQUIRE(Store::Loader(*c).meta(s.encode_meta()));
    s.for_each_task([&](std::string_view q, std::string_view k, std::string_view enc) {
        REQUIRE(Store::Loader(*c).task(q, k, enc));
    });
    return c;
}

// `majority` with auto/k holding `payload`, and a copy of it forked as a cut-off node.
std::unique_ptr<Store> forked_copy(Store& majority, const std::string& payload) {
    declare(majority, "auto", true, T0);
    REQUIRE(majority.apply(Put{"auto", "k", payload, T0}, T0).ok());
    drain(majority);
    auto minority = copy_of(majority);
    REQUIRE(minority->fork(kBase));
    return minority;
}

using Overlay = std::map<std::pair<std::string, std::string>, OverlayRecord>;

void drain_into(Store& s, Overlay& overlay) {
    s.drain_fork([&](std::string_view q, std::string_view k, const OverlayRecord& r) {
        auto& slot = overlay[{std::string(q), std::string(k)}];
        const std::uint64_t base = slot.hlc != 0 ? slot.base_hlc : r.base_hlc;
        slot = r;
        slot.base_hlc = base;
    });
}

std::vector<Merge> merges_of(const Overlay& overlay, std::uint64_t origin) {
    std::vector<Merge> out;
    for (const auto& [qk, r] : overlay)
        out.push_back(Merge{qk.first, qk.second, r.task, r.hlc, r.base_hlc, origin});
    return out;
}

}  // namespace

TEST_CASE("a fork starts only from a drained store and refuses what needs the majority") {
    Store s(kApplyLimits);
    declare(s, "auto", true, T0);
    declare(s, "strict", false, T0);
    REQUIRE(s.apply(Put{"strict", "k", "p", T0}, T0).ok());
    CHECK_FALSE(s.fork(kBase));  // undrained changes
    drain(s);
    CHECK_FALSE(s.fork(42));  // not an autonomous lease id
    REQUIRE(s.fork(kBase));
    CHECK(s.forked());
    CHECK_FALSE(s.fork(kBase));
    CHECK(s.apply(Put{"strict", "k2", "p", T0}, T0 + 1).code == Code::no_quorum);
    CHECK(s.apply(Take{"strict", 1}, T0 + 1).code == Code::no_quorum);
    CHECK(s.apply(Declare{"auto"}, T0 + 1).code == Code::no_quorum);
    CHECK(s.apply(Merge{"auto", "k", std::nullopt, 5, 0, 2}, T0 + 1).code == Code::no_quorum);
    REQUIRE(s.apply(Put{"auto", "a", "p", T0}, T0 + 1).ok());
    auto took = s.apply(Take{"auto", 1}, T0 + 2);
    REQUIRE(took.tasks.size() == 1);
    CHECK(took.tasks[0].lease == kBase);
    // The strict queue's task is still there, untouched, and not reported.
    CHECK(s.get("strict", "k").has_value());
    int reported = 0;
    s.drain_changes([&](auto, auto, const auto&) { ++reported; });
    CHECK(reported == 0);
}

TEST_CASE("rollback puts back every task, lease and counter the fork changed") {
    Store s(kApplyLimits);
    declare(s, "auto", true, T0);
    for (int i = 0; i < 20; ++i)
        REQUIRE(s.apply(Put{"auto", "k" + std::to_string(i), "p", T0 + i}, T0).ok());
    auto held = s.apply(Take{"auto", 3, 60'000, 9}, T0 + 100);
    REQUIRE(held.tasks.size() == 3);
    drain(s);
    const Image before = image_of(s);
    const std::string meta = s.encode_meta();

    REQUIRE(s.fork(kBase));
    auto took = s.apply(Take{"auto", 5}, T0 + 200);
    // What a checkpoint writes as the applied state while forked is the committed meta.
    CHECK(s.encode_meta() == meta);
    REQUIRE(took.tasks.size() == 5);
    REQUIRE(s.apply(Ack{"auto", took.tasks[0].key, took.tasks[0].lease, "new", T0 + 9000}, T0 + 300)
                .ok());
    REQUIRE(s.apply(Delete{"auto", "k19"}, T0 + 300).ok());
    REQUIRE(s.apply(Put{"auto", "fresh", "p", T0}, T0 + 300).ok());
    REQUIRE(s.apply(ReleaseSession{9}, T0 + 400).ok());
    s.advance(T0 + 120'000);  // every lease runs out
    CHECK(image_of(s) != before);

    s.rollback();
    CHECK_FALSE(s.forked());
    CHECK(image_of(s) == before);
    CHECK(s.encode_meta() == meta);
    // The committed leases still fence: the held ones ack, the fork's do not.
    CHECK(s.apply(Ack{"auto", held.tasks[0].key, held.tasks[0].lease}, T0 + 500).ok());
    CHECK(s.apply(Ack{"auto", took.tasks[1].key, took.tasks[1].lease}, T0 + 500).code ==
          Code::lease_mismatch);
}

TEST_CASE("drain_fork reports each change with its hlc and the key's hlc before the fork") {
    Store s(kApplyLimits);
    declare(s, "auto", true, T0);
    REQUIRE(s.apply(Put{"auto", "old", "p", T0}, T0).ok());
    drain(s);
    const std::uint64_t old_hlc = s.get("auto", "old")->hlc;
    REQUIRE(s.fork(kBase));
    REQUIRE(s.apply(Put{"auto", "new", "p", T0}, T0 + 10).ok());
    REQUIRE(s.apply(Delete{"auto", "old"}, T0 + 20).ok());
    Overlay o;
    drain_into(s, o);
    REQUIRE(o.size() == 2);
    const OverlayRecord& added = o.at({"auto", "new"});
    CHECK(added.task.has_value());
    CHECK(added.base_hlc == 0);
    CHECK(added.hlc == s.get("auto", "new")->hlc);
    const OverlayRecord& gone = o.at({"auto", "old"});
    CHECK_FALSE(gone.task.has_value());
    CHECK(gone.base_hlc == old_hlc);
    CHECK(gone.hlc > old_hlc);
    CHECK(gone.hlc >= std::uint64_t(T0 + 20) << 16);
    // Round trip through the overlay's encoding.
    CHECK(decode_overlay_record(encode_overlay_record(added)) == added);
    CHECK(decode_overlay_record(encode_overlay_record(gone)) == gone);
    CHECK_FALSE(decode_overlay_record("\x93\x01\xc0\x01").has_value());
}

TEST_CASE("a merge keeps per key the write with the larger hlc, deletions included") {
    Store s(kApplyLimits);
    declare(s, "auto", true, T0);
    REQUIRE(s.apply(Put{"auto", "k", "majority", T0}, T0 + 100).ok());
    const std::uint64_t here = s.get("auto", "k")->hlc;

    Store other(kApplyLimits);
    declare(other, "auto", true, T0);
    REQUIRE(other.apply(Put{"auto", "k", "minority", T0 + 5}, T0 + 200).ok());
    std::string newer_task;
    other.for_each_task([&](auto, auto, std::string_view e) { newer_task = std::string(e); });
    const std::uint64_t newer = other.get("auto", "k")->hlc;
    REQUIRE(newer > here);

    auto older = s.apply(Merge{"auto", "k", newer_task, here - 1, 0, 2}, T0 + 300);
    CHECK(older.merge == MergeOutcome::kept);
    CHECK(older.both_sides_wrote);
    CHECK(s.get("auto", "k")->payload == "majority");

    auto wins = s.apply(Merge{"auto", "k", newer_task, newer, 0, 2}, T0 + 300);
    CHECK(wins.merge == MergeOutcome::taken_over);
    CHECK(s.get("auto", "k")->payload == "minority");
    CHECK(s.get("auto", "k")->hlc == newer);
    CHECK(s.get("auto", "k")->version > 1);
    // Sent again (a resumed merge): nothing changes.
    const Image once = image_of(s);
    CHECK(s.apply(Merge{"auto", "k", newer_task, newer, 0, 2}, T0 + 400).merge ==
          MergeOutcome::kept);
    CHECK(image_of(s) == once);

    auto gone = s.apply(Merge{"auto", "k", std::nullopt, newer + 1, newer, 2}, T0 + 500);
    CHECK(gone.merge == MergeOutcome::taken_over);
    CHECK_FALSE(gone.both_sides_wrote);
    CHECK_FALSE(s.get("auto", "k").has_value());

    CHECK(s.apply(Merge{"auto", "k", std::string("junk"), newer + 9, 0, 2}, T0 + 600).code ==
          Code::bad_request);
    CHECK_FALSE(s.get("auto", "k").has_value());
}

TEST_CASE("a lease granted by a cut-off node is still good after its write wins the merge") {
    Store majority(kApplyLimits);
    auto minority = forked_copy(majority, "p");
    // A take alone is no write: it would not win. A put, then a take, does.
    REQUIRE(minority->apply(Put{"auto", "k", "refreshed", T0}, T0 + 900).ok());
    auto took = minority->apply(Take{"auto", 1, 60'000, 5}, T0 + 1000);
    REQUIRE(took.tasks.size() == 1);
    Overlay o;
    drain_into(*minority, o);
    for (auto& m : merges_of(o, 3))
        REQUIRE(majority.apply(m, T0 + 2000).merge == MergeOutcome::taken_over);
    // A lease id the majority gives out never equals the minority's.
    auto mine = majority.apply(Take{"auto", 1}, T0 + 2000);
    CHECK(mine.tasks.empty());
    CHECK(
        majority.apply(Ack{"auto", "k", took.tasks[0].lease, "fresh", T0 + 9000}, T0 + 3000).ok());
}

// The model test. Both sides start from one committed state; the majority applies at its
// log time, the cut-off node at its own clock, which runs ahead or behind. Afterwards the
// node's overlay is merged into the majority in a random order, and every key must hold
// what a naive reference says: the side whose last write has the larger hlc.
TEST_CASE("a take, a lease running out or a release is no write, and never wins a merge") {
    Store majority(kApplyLimits);
    auto minority = forked_copy(majority, "old");
    auto took = minority->apply(Take{"auto", 1, 1000, 5}, T0 + 100);
    REQUIRE(took.tasks.size() == 1);
    minority->advance(T0 + 5000);  // the lease runs out
    REQUIRE(minority->apply(Take{"auto", 1, 1000, 5}, T0 + 5000).tasks.size() == 1);
    Overlay o;
    drain_into(*minority, o);
    REQUIRE(o.size() == 1);
    CHECK(o.begin()->second.hlc == o.begin()->second.base_hlc);
    // Meanwhile the majority refreshed it: its ack must survive the merge.
    auto mine = majority.apply(Take{"auto", 1}, T0 + 200);
    REQUIRE(majority.apply(Ack{"auto", "k", mine.tasks[0].lease, "new", T0 + 9000}, T0 + 300).ok());
    for (auto& m : merges_of(o, 3)) {
        auto r = majority.apply(m, T0 + 6000);
        CHECK(r.merge == MergeOutcome::kept);
        CHECK_FALSE(r.both_sides_wrote);
    }
    CHECK(majority.get("auto", "k")->payload == "new");
}

TEST_CASE("merges match a naive last-writer-wins reference over random histories") {
    const int kRuns = 300;
    for (int run = 0; run < kRuns; ++run) {
        std::mt19937_64 rng(run);
        auto pick = [&](int n) { return int(rng() % std::uint64_t(n)); };
        Store base(kApplyLimits);
        declare(base, "auto", true, T0);
        const int kKeys = 12;
        for (int i = 0; i < kKeys; i += 2)
            REQUIRE(base.apply(Put{"auto", "k" + std::to_string(i), "base", T0 + i}, T0).ok());
        drain(base);
        auto majority = copy_of(base);
        auto minority = copy_of(base);
        REQUIRE(minority->fork(kBase));
        std::map<std::string, std::uint64_t> base_hlc;
        for (int i = 0; i < kKeys; ++i) {
            const std::string key = "k" + std::to_string(i);
            auto v = base.get("auto", key);
            base_hlc[key] = v ? v->hlc : base.tombstone_hlc("auto", key).value_or(0);
        }
        // Each side's clock: the minority's may be up to 2 s off the majority's.
        Millis t_major = T0 + 10, t_minor = T0 + 10 + Millis(pick(4001)) - 2000;
        auto step = [&](Store& s, Millis& t) {
            t += 1 + pick(300);
            const std::string key = "k" + std::to_string(pick(kKeys));
            switch (pick(6)) {
                case 0:
                    s.apply(Put{"auto", key, "v" + std::to_string(rng() % 1000), t + pick(5000)},
                            t);
                    break;
                case 1:
                    s.apply(Delete{"auto", key}, t);
                    break;
                default: {
                    auto took = s.apply(Take{"auto", 1, 1000}, t);
                    if (took.tasks.empty()) break;
                    const auto& tk = took.tasks[0];
                    t += pick(200);
                    if (pick(4) != 0)
                        s.apply(Ack{"auto", tk.key, tk.lease, "r" + std::to_string(t),
                                    t + 1000 + pick(5000)},
                                t);
                }
            }
        };
        const int steps = 5 + pick(60);
        for (int i = 0; i < steps; ++i) {
            if (pick(2) == 0)
                step(*majority, t_major);
            else
                step(*minority, t_minor);
        }
        Overlay overlay;
        drain_into(*minority, overlay);
        minority->rollback();
        REQUIRE(image_of(*minority) == image_of(base));

        // Leases that run out by the time of the merge do so first on the majority.
        const Millis at = std::max(t_major, t_minor) + 1;
        majority->advance(at);
        drain(*majority);
        auto replica = copy_of(*majority);  // another member of the majority

        // The reference, from the two sides' final views.
        struct Want {
            std::optional<TaskView> task;
            bool both;
        };
        std::map<std::string, Want> want;
        for (int i = 0; i < kKeys; ++i) {
            const std::string key = "k" + std::to_string(i);
            auto here = majority->get("auto", key);
            auto it = overlay.find({"auto", key});
            // A key the majority deleted is remembered with the deletion's stamp.
            const std::uint64_t h =
                here ? here->hlc : majority->tombstone_hlc("auto", key).value_or(0);
            if (it == overlay.end()) {
                want[key] = {here, false};
                continue;
            }
            const OverlayRecord& r = it->second;
            std::optional<TaskView> theirs;
            if (r.task) {
                Store one(kApplyLimits);
                REQUIRE(Store::Loader(one).task("auto", key, *r.task));
                one.advance(at);  // a lease that ran out by the merge ends with it
                theirs = one.get("auto", key);
            }
            want[key] = {r.hlc > h ? theirs : here, h > base_hlc[key] && r.hlc > base_hlc[key]};
        }

        auto merges = merges_of(overlay, 3);
        std::shuffle(merges.begin(), merges.end(), rng);
        std::map<std::string, bool> both;
        for (const auto& m : merges) {
            auto r1 = majority->apply(m, at);
            auto r2 = replica->apply(m, at);
            REQUIRE(r1.ok());
            REQUIRE(r1.merge == r2.merge);
            both[m.key] = r1.both_sides_wrote;
        }
        INFO("seed " << run << ", " << steps << " steps, " << merges.size() << " merges");
        for (const auto& [key, w] : want) {
            INFO("key " << key);
            auto got = majority->get("auto", key);
            REQUIRE(got.has_value() == w.task.has_value());
            if (got) {
                CHECK(got->payload == w.task->payload);
                CHECK(got->time == w.task->time);
                CHECK(got->status == w.task->status);
                CHECK(got->hlc == w.task->hlc);
                CHECK(got->lease == w.task->lease);
            }
            if (overlay.count({"auto", key})) CHECK(both[key] == w.both);
        }
        CHECK(image_of(*majority) == image_of(*replica));
    }
}

TEST_CASE("the autonomous setting is replicated state and survives a restart") {
    Store s(kApplyLimits);
    declare(s, "auto", true, T0);
    CHECK(s.settings("auto").autonomous);
    CHECK_FALSE(s.settings("other").autonomous);
    declare(s, std::string(kDefaultsQueue), true, T0);
    CHECK(s.settings("other").autonomous);
    declare(s, "strict", false, T0);
    auto c = copy_of(s);
    CHECK(c->settings("auto").autonomous);
    CHECK(c->settings("other").autonomous);
    CHECK_FALSE(c->settings("strict").autonomous);
}

TEST_CASE("a merged lease that already ran out ends when the merge applies") {
    Store majority(kApplyLimits);
    auto minority = forked_copy(majority, "p");
    REQUIRE(minority->apply(Put{"auto", "k", "fresh", T0}, T0 + 100).ok());
    REQUIRE(minority->apply(Take{"auto", 1, 500, 5}, T0 + 200).tasks.size() == 1);
    Overlay o;
    drain_into(*minority, o);
    for (auto& m : merges_of(o, 3))
        REQUIRE(majority.apply(m, T0 + 5000).merge == MergeOutcome::taken_over);
    auto t = majority.get("auto", "k");
    REQUIRE(t.has_value());
    CHECK(t->status == Status::ready);
    CHECK(t->payload == "fresh");
    CHECK(t->attempts == 1);
}

TEST_CASE("a key deleted on the majority stays deleted unless the merged write is newer") {
    Store majority(kApplyLimits);
    Declare d{"auto"};
    d.autonomous = true;
    d.retention_ms = 60'000;
    REQUIRE(majority.apply(d, T0).ok());
    REQUIRE(majority.apply(Put{"auto", "k", "p", T0}, T0).ok());
    drain(majority);
    auto minority = copy_of(majority);
    REQUIRE(minority->fork(kBase));
    REQUIRE(minority->apply(Put{"auto", "k", "older", T0}, T0 + 100).ok());
    REQUIRE(minority->apply(Put{"auto", "j", "newer", T0}, T0 + 900).ok());
    Overlay o;
    drain_into(*minority, o);
    // The majority deletes both keys between the two writes of the cut-off node.
    REQUIRE(majority.apply(Delete{"auto", "k"}, T0 + 500).ok());
    REQUIRE(majority.apply(Put{"auto", "j", "p", T0}, T0 + 500).ok());
    REQUIRE(majority.apply(Delete{"auto", "j"}, T0 + 500).ok());
    CHECK(majority.tombstone_hlc("auto", "k") > o.at({"auto", "k"}).base_hlc);
    // The tombstone is applied state: a replica rebuilt from what was persisted has it.
    std::map<std::pair<std::string, std::string>, std::optional<std::string>> persisted;
    majority.drain_changes([&](std::string_view q, std::string_view k, const auto& e) {
        persisted[{std::string(q), std::string(k)}] = e;
    });
    REQUIRE(persisted.at({"auto", "k"}).has_value());
    auto replica = copy_of(majority);
    CHECK(replica->tombstone_hlc("auto", "k") == majority.tombstone_hlc("auto", "k"));
    for (Store* s : {&majority, replica.get()})
        for (auto& m : merges_of(o, 3))
            s->apply(m, T0 + 1000);
    CHECK_FALSE(majority.get("auto", "k").has_value());    // the deletion was newer
    CHECK(majority.get("auto", "j")->payload == "newer");  // the write was newer
    CHECK(image_of(majority) == image_of(*replica));
    // After retention the deletion is forgotten, on every replica the same way.
    majority.advance(T0 + 500 + 60'000);
    CHECK_FALSE(majority.tombstone_hlc("auto", "k").has_value());
    std::optional<std::string> gone = std::string("x");
    majority.drain_changes([&](auto, std::string_view k, const auto& e) {
        if (k == "k") gone = e;
    });
    CHECK_FALSE(gone.has_value());
}

// Simulator seed 5000352 (3 nodes, 60 s of faults): on a cut-off node whose clock runs
// behind the key's stamps, a put after the fork's own deletion was stamped below that
// deletion and below the node's earlier writes, so it lost merges it should have won.
TEST_CASE("in a fork, a put after a deletion of its key is stamped above that deletion") {
    Store majority(kApplyLimits);
    Declare d{"auto"};
    d.autonomous = true;
    d.retention_ms = 60'000;
    REQUIRE(majority.apply(d, T0).ok());
    REQUIRE(majority.apply(Put{"auto", "k", "p", T0}, T0 + 5'000).ok());
    drain(majority);
    auto minority = copy_of(majority);
    REQUIRE(minority->fork(kBase));
    // The cut-off node's clock is seconds behind the stamp the majority gave the key.
    REQUIRE(minority->apply(Put{"auto", "k", "refreshed", T0}, T0 + 1'000).ok());
    const std::uint64_t written = minority->get("auto", "k")->hlc;
    REQUIRE(minority->apply(Delete{"auto", "k"}, T0 + 1'000).ok());
    const auto deleted = minority->tombstone_hlc("auto", "k");
    REQUIRE(deleted.has_value());  // the fork's own deletion, though it keeps no tombstone
    CHECK(*deleted > written);
    REQUIRE(minority->apply(Put{"auto", "k", "again", T0}, T0 + 1'000).ok());
    CHECK(minority->get("auto", "k")->hlc > *deleted);
    CHECK_FALSE(minority->tombstone_hlc("auto", "k").has_value());  // the key is there
    Overlay o;
    drain_into(*minority, o);
    CHECK(o.at({"auto", "k"}).hlc > *deleted);
    // Merged, the last write of the cut-off node wins over the key's state before the cut.
    REQUIRE(majority.apply(merges_of(o, 3).at(0), T0 + 6'000).merge == MergeOutcome::taken_over);
    CHECK(majority.get("auto", "k")->payload == "again");
}
