// Randomized check of the store against the naive model (model.h), and of restart:
// a twin store, rebuilt from what drain_changes + encode_meta persisted and fed every
// command through encode_command/decode_command, must stay identical to the original.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <sstream>

#include "model.h"
#include "queue/command_codec.h"
#include "queue/store.h"
#include "queue/store_loader.h"

using namespace dueq::queue;

namespace {

using Image = std::map<std::pair<std::string, std::string>, std::string>;

std::string describe(const Command& c) {
    std::ostringstream o;
    std::visit(
        [&o](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, Declare>) o << "Declare " << x.queue;
            if constexpr (std::is_same_v<T, Put>) o << "Put " << x.queue << "/" << x.key;
            if constexpr (std::is_same_v<T, Delete>) o << "Delete " << x.queue << "/" << x.key;
            if constexpr (std::is_same_v<T, Take>) o << "Take " << x.queue << " n=" << x.count;
            if constexpr (std::is_same_v<T, Touch>) o << "Touch " << x.key << " " << x.lease;
            if constexpr (std::is_same_v<T, Ack>) o << "Ack " << x.key << " " << x.lease;
            if constexpr (std::is_same_v<T, Release>) o << "Release " << x.key << " " << x.lease;
            if constexpr (std::is_same_v<T, Bury>) o << "Bury " << x.key << " " << x.lease;
            if constexpr (std::is_same_v<T, Kick>) o << "Kick " << x.queue << " " << x.count;
            if constexpr (std::is_same_v<T, ReleaseSession>) o << "ReleaseSession " << x.session;
            if constexpr (std::is_same_v<T, Advance>) o << "Advance";
            if constexpr (std::is_same_v<T, Merge>) o << "Merge " << x.key << " " << x.hlc;
        },
        c);
    return o.str();
}

void drain_into(Store& s, Image& image) {
    s.drain_changes(
        [&](std::string_view q, std::string_view k, const std::optional<std::string>& enc) {
            if (enc) {
                image[{std::string(q), std::string(k)}] = *enc;
            } else {
                image.erase({std::string(q), std::string(k)});
            }
        });
}

Image snapshot(const Store& s) {
    Image image;
    s.for_each_task([&](std::string_view q, std::string_view k, std::string_view enc) {
        image[{std::string(q), std::string(k)}] = std::string(enc);
    });
    return image;
}

void check_view(const std::optional<TaskView>& a, const std::optional<TaskView>& b) {
    REQUIRE(a.has_value() == b.has_value());
    if (!a) return;
    CHECK(a->payload == b->payload);
    CHECK(to_string(a->status) == std::string(to_string(b->status)));
    CHECK(a->time == b->time);
    CHECK(a->attempts == b->attempts);
    CHECK(a->version == b->version);
    CHECK(a->hlc == b->hlc);
    CHECK(a->lease == b->lease);
    CHECK(a->lease_until == b->lease_until);
    CHECK(a->owner == b->owner);
    CHECK(a->release_on_disconnect == b->release_on_disconnect);
    CHECK(a->not_before == b->not_before);
    CHECK(a->done_until == b->done_until);
}

void check_result(const Result& a, const Result& b) {
    REQUIRE(to_string(a.code) == std::string(to_string(b.code)));
    CHECK(a.version == b.version);
    CHECK(a.lease_until == b.lease_until);
    CHECK(a.kicked == b.kicked);
    CHECK(a.settings == b.settings);
    REQUIRE(a.tasks.size() == b.tasks.size());
    for (std::size_t i = 0; i < a.tasks.size(); ++i) {
        CHECK(a.tasks[i].key == b.tasks[i].key);
        CHECK(a.tasks[i].payload == b.tasks[i].payload);
        CHECK(a.tasks[i].time == b.tasks[i].time);
        CHECK(a.tasks[i].lease == b.tasks[i].lease);
        CHECK(a.tasks[i].lease_until == b.tasks[i].lease_until);
        CHECK(a.tasks[i].attempts == b.tasks[i].attempts);
    }
}

struct Generator {
    std::mt19937_64 rng;
    const std::vector<std::string> queues{"a", "b"};
    std::vector<std::string> keys;
    std::vector<std::tuple<std::string, std::string, LeaseId>> leases;  // handed out so far

    explicit Generator(std::uint64_t seed) : rng(seed) {
        for (int i = 0; i < 24; ++i)
            keys.push_back("k" + std::to_string(i));
    }
    std::uint64_t below(std::uint64_t n) { return rng() % n; }
    bool chance(int percent) { return below(100) < static_cast<std::uint64_t>(percent); }
    template <class T>
    const T& pick(const std::vector<T>& v) {
        return v[below(v.size())];
    }

    std::string queue() { return chance(2) ? std::string() : pick(queues); }
    std::string key() {
        if (chance(1)) return std::string();
        if (chance(1)) return std::string(2000, 'x');  // over max_key_bytes
        return pick(keys);
    }
    std::string payload() { return "p" + std::to_string(below(1000)); }

    // A lease that was really handed out for some task (right or wrong), or a random one.
    void lease_target(std::string* q, std::string* k, LeaseId* lease) {
        if (!leases.empty() && chance(85)) {
            auto& [lq, lk, ll] =
                leases[leases.size() - 1 - below(std::min<std::size_t>(leases.size(), 8))];
            *q = lq;
            *k = chance(90) ? lk : pick(keys);
            *lease = ll;
        } else {
            *q = pick(queues);
            *k = pick(keys);
            *lease = below(50);
        }
    }

    Command next(Millis now) {
        const std::uint64_t kind = below(100);
        if (kind < 30) {
            Put p{queue(), key(), payload()};
            if (chance(80)) p.time = now + static_cast<Millis>(below(6000)) - 3000;
            if (chance(1)) p.time = -5;
            p.mode = static_cast<PutMode>(below(3));
            return p;
        }
        if (kind < 50) {
            Take t{queue(), static_cast<std::uint32_t>(1 + below(3))};
            if (chance(1)) t.count = 0;
            if (chance(30)) t.ttr_ms = 100 + static_cast<Millis>(below(2000));
            if (chance(1)) t.ttr_ms = 0;
            t.session = 1 + below(3);
            t.release_on_disconnect = chance(70);
            return t;
        }
        std::string q, k;
        LeaseId lease = 0;
        lease_target(&q, &k, &lease);
        if (kind < 62) {
            Ack a{q, k, lease};
            if (chance(50)) a.payload = payload();
            if (chance(60)) a.time = now + static_cast<Millis>(below(4000)) - 1000;
            return a;
        }
        if (kind < 68) {
            Release r{q, k, lease};
            if (chance(50)) r.delay_ms = static_cast<Millis>(below(1500));
            if (chance(1)) r.delay_ms = -1;
            return r;
        }
        if (kind < 72) {
            Touch t{q, k, lease};
            if (chance(50)) t.ttr_ms = 50 + static_cast<Millis>(below(1500));
            return t;
        }
        if (kind < 75) return Bury{q, k, lease};
        if (kind < 80) return Kick{queue(), static_cast<std::uint32_t>(below(3))};
        if (kind < 85) return Delete{queue(), key()};
        if (kind < 87) return ReleaseSession{1 + below(3)};
        if (kind < 88) return Advance{};
        // Not the defaults (queue ""): the model copies them into a queue when it is
        // created; the declared-defaults layering is tested in store_test.
        Declare d{pick(queues)};
        if (chance(40)) d.lead_ms = std::vector<Millis>{0, 300, 1500}[below(3)];
        if (chance(40)) d.ttr_ms = 200 + static_cast<Millis>(below(1500));
        if (chance(40)) d.max_attempts = static_cast<std::uint32_t>(below(4));
        if (chance(40)) d.retention_ms = std::vector<Millis>{0, 200, 2000}[below(3)];
        if (chance(40)) d.late_share = std::vector<double>{0, 0.25, 0.5, 1, 1.5}[below(5)];
        return d;
    }
};

void compare_all(const Store& s, const model::Model& m, const Generator& g, Millis now) {
    REQUIRE(s.task_count() == m.task_count());
    for (const auto& q : g.queues) {
        for (const auto& k : g.keys)
            check_view(s.get(q, k), m.get(q, k));
        QueueStats a = s.stats(q, now), b = m.stats(q);
        CHECK(a.ready == b.ready);
        CHECK(a.taken == b.taken);
        CHECK(a.buried == b.buried);
        CHECK(a.done == b.done);
        CHECK(a.due_now == b.due_now);
        CHECK(a.next_due == b.next_due);
        CHECK(a.oldest_late == b.oldest_late);
        CHECK(s.next_event(q, now) == m.next_event(q));
        CHECK(s.settings(q) == (m.queues.count(q) ? m.queues.at(q).s : m.defaults));
        // has_due must agree with what a take would do now.
        model::Model copy = m;
        bool would_take = !copy.apply(Take{q, 1}, now).tasks.empty();
        bool lowered_max = false;  // a take that buries instead (max_attempts lowered)
        if (m.queues.count(q)) {
            const auto& mq = m.queues.at(q);
            for (const auto& [key, t] : mq.tasks) {
                lowered_max |= t.st == model::St::ready && mq.s.max_attempts != 0 &&
                               t.attempts >= mq.s.max_attempts;
            }
        }
        if (!lowered_max) CHECK(s.has_due(q, now) == would_take);
        if (would_take) CHECK(s.has_due(q, now));
    }
}

// The defaults travel in the meta record, as in a real restart.
std::unique_ptr<Store> restart(const Store& from, const Image& image, const QueueSettings& d) {
    auto s = std::make_unique<Store>();
    REQUIRE(Store::Loader(*s).meta(from.encode_meta()));
    REQUIRE(s->default_settings() == d);
    for (const auto& [qk, enc] : image)
        REQUIRE(Store::Loader(*s).task(qk.first, qk.second, enc));
    return s;
}

void run_seed(std::uint64_t seed, int steps) {
    CAPTURE(seed);
    Generator g(seed);
    QueueSettings defaults;
    defaults.ttr_ms = 1000;
    defaults.retention_ms = 1500;
    defaults.lead_ms = 500;
    model::Model m;
    m.defaults = defaults;
    Store s;
    REQUIRE(s.apply(Declare{std::string(kDefaultsQueue), defaults.lead_ms, defaults.ttr_ms,
                            defaults.retention_ms, defaults.max_attempts, defaults.late_share},
                    0)
                .ok());
    Image image;
    std::unique_ptr<Store> twin = restart(s, image, defaults);
    Image twin_image;

    Millis now = 1'000'000;
    for (int step = 0; step < steps; ++step) {
        CAPTURE(step);
        Millis next = now + static_cast<Millis>(g.below(g.chance(10) ? 3000 : 250));
        if (g.chance(20) && next > now + 1) {
            // advance() commutes with apply(): only the original gets these calls.
            s.advance(now + 1 + static_cast<Millis>(g.below(next - now - 1)));
        }
        now = next;
        Command cmd = g.next(now);
        CAPTURE(describe(cmd));
        Result want = m.apply(cmd, now);
        Result got = s.apply(cmd, now);
        check_result(got, want);
        auto decoded = decode_command(encode_command(cmd));
        REQUIRE(decoded.has_value());
        REQUIRE(encode_command(*decoded) == encode_command(cmd));
        check_result(twin->apply(*decoded, now), want);
        for (const auto& t : got.tasks) {
            g.leases.emplace_back(std::get<Take>(cmd).queue, t.key, t.lease);
        }
        drain_into(s, image);
        drain_into(*twin, twin_image);
        compare_all(s, m, g, now);
        compare_all(*twin, m, g, now);
        if (g.chance(3)) {
            // What storage holds must be exactly the live state, on both sides.
            REQUIRE(image == snapshot(s));
            REQUIRE(twin_image == snapshot(*twin));
            REQUIRE(twin->encode_meta() == s.encode_meta());
            twin = restart(s, image, defaults);
            twin_image = image;
            REQUIRE(snapshot(*twin) == image);
            REQUIRE(twin->encode_meta() == s.encode_meta());
        }
    }
}

}  // namespace

// The sanitizer pass runs three of the seeds: all eight took 31 s there (3 s here), and
// the plain build runs every one of them.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kModelSeeds = 3;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int kModelSeeds = 3;
#else
constexpr int kModelSeeds = 8;
#endif
#else
constexpr int kModelSeeds = 8;
#endif

TEST_CASE("store matches the reference model, with restarts, over random commands",
          "[queue][model]") {
    for (std::uint64_t seed = 1; seed <= kModelSeeds; ++seed)
        run_seed(seed, 2500);
}

TEST_CASE("random seed from the environment", "[queue][model][.]") {
    const char* env = std::getenv("DUEQ_SEED");
    std::uint64_t seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    run_seed(seed, 20000);
}
