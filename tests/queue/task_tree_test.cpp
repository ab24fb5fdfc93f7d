// The tree that links tasks by 32-bit references, against a std::multiset of the same
// (time, key) pairs; the region (one per store) it takes its memory from; and records too
// large for the arena's small blocks, which keep their key and payload outside the region.
#include <catch2/catch.hpp>

#include <cstdio>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "queue/task.h"
#include "queue/task_region.h"

using dueq::queue::Millis;
using dueq::queue::detail::Task;
using dueq::queue::detail::TaskArena;
using dueq::queue::detail::TaskRegion;
using dueq::queue::detail::TimeProbe;
using dueq::queue::detail::TimeTree;

namespace {

using Entry = std::pair<Millis, std::string>;

Entry entry_of(const Task& t) {
    return {Millis(t.time), std::string(t.key())};
}

std::vector<Entry> contents(const TimeTree& tree) {
    std::vector<Entry> out;
    for (auto it = tree.begin(); it != tree.end(); ++it)
        out.push_back(entry_of(*it));
    return out;
}

struct Model {
    TaskRegion region;
    TaskArena arena{region};
    TimeTree tree{region};
    std::multiset<Entry> expected;
    std::vector<Task*> live;

    ~Model() {
        tree.clear_and_dispose([this](Task* t) { Task::destroy(arena, t); });
    }

    void insert(Millis time, const std::string& key, bool hinted) {
        Task* t = Task::create(arena, 0, key, "payload");
        t->time = time;
        if (hinted)
            tree.insert(tree.end(), *t);
        else
            tree.insert(*t);
        expected.emplace(time, key);
        live.push_back(t);
    }
    void erase_at(std::size_t i) {
        Task* t = live[i];
        expected.erase(expected.find(entry_of(*t)));
        tree.erase(tree.iterator_to(*t));
        Task::destroy(arena, t);
        live[i] = live.back();
        live.pop_back();
    }
    void check(Millis probe) {
        REQUIRE(tree.size() == expected.size());
        REQUIRE(tree.well_formed());
        // A red-black tree's longest path is at most twice its shortest: 2 log2(n + 1).
        REQUIRE(tree.depth() <= 2 * std::log2(double(tree.size()) + 1));
        REQUIRE(tree.empty() == expected.empty());
        REQUIRE(contents(tree) == std::vector<Entry>(expected.begin(), expected.end()));
        auto lb = tree.lower_bound(probe, TimeProbe{});
        auto want_lb = expected.lower_bound(Entry{probe, ""});
        REQUIRE((lb == tree.end()) == (want_lb == expected.end()));
        if (lb != tree.end()) REQUIRE(entry_of(*lb) == *want_lb);
        const TimeTree& ctree = tree;
        auto ub = ctree.upper_bound(probe, TimeProbe{});
        auto want_ub = std::find_if(expected.begin(), expected.end(),
                                    [&](const Entry& e) { return e.first > probe; });
        REQUIRE((ub == ctree.end()) == (want_ub == expected.end()));
        if (ub != ctree.end()) REQUIRE(entry_of(*ub) == *want_ub);
    }
};

}  // namespace

TEST_CASE("the region tree keeps the order of a multiset through inserts and erases") {
    std::mt19937_64 rng(GENERATE(1, 2, 3));
    Model m;
    // Few distinct times, so ties broken by key are common; some keys repeat too.
    for (int step = 0; step < 20'000; ++step) {
        const int dice = int(rng() % 100);
        if (dice < 55 || m.live.empty()) {
            const Millis time = Millis(rng() % 50) - 10;
            m.insert(time, "k" + std::to_string(rng() % 400), dice % 2 == 0);
        } else {
            m.erase_at(rng() % m.live.size());
        }
        if (step % 500 == 0) m.check(Millis(rng() % 60) - 15);
    }
    m.check(0);
    // Erasing from the front, as takes do.
    while (!m.tree.empty()) {
        Task* first = &*m.tree.begin();
        REQUIRE(entry_of(*first) == *m.expected.begin());
        m.expected.erase(m.expected.begin());
        m.tree.erase(m.tree.begin());
        Task::destroy(m.arena, first);
    }
    m.live.clear();
    m.check(0);
}

TEST_CASE("a tree filled in order stays balanced") {
    Model m;
    for (int i = 0; i < 100'000; ++i)
        m.insert(i, "k", i % 2 == 0);
    m.check(50'000);
    CHECK(m.tree.depth() <= 34);  // 2 log2(100001)
}

TEST_CASE("a tree built at once from sorted tasks is a red-black tree that works on") {
    // Every size up to 300 (each shape of a deepest level), and a few large ones.
    std::vector<std::size_t> sizes;
    for (std::size_t n = 0; n <= 300; ++n)
        sizes.push_back(n);
    for (std::size_t n : {511, 512, 513, 1023, 1024, 100'000})
        sizes.push_back(n);
    std::mt19937_64 rng(7);
    for (std::size_t n : sizes) {
        Model m;
        std::vector<Task*> sorted;
        for (std::size_t i = 0; i < n; ++i) {
            Task* t = Task::create(m.arena, 0, "k" + std::to_string(100'000 + i), "p");
            t->time = Millis(i / 3);  // ties on time, broken by key
            sorted.push_back(t);
            m.expected.emplace(entry_of(*t));
            m.live.push_back(t);
        }
        INFO("n = " << n);
        REQUIRE(m.tree.assign_sorted(sorted.data(), sorted.size()));
        m.check(Millis(n / 6));
        // Then it takes inserts and erases like any other.
        for (int step = 0; step < 200; ++step) {
            if (step % 3 == 0 && !m.live.empty())
                m.erase_at(rng() % m.live.size());
            else
                m.insert(Millis(rng() % (n / 3 + 2)), "x" + std::to_string(step), step % 2 == 0);
        }
        m.check(Millis(n / 6));
    }
}

TEST_CASE("a bulk build refuses tasks out of order, and a tree that is not empty") {
    for (std::size_t swap_at : {0, 1, 500, 998}) {
        Model m;
        std::vector<Task*> tasks;
        for (int i = 0; i < 1000; ++i) {
            Task* t = Task::create(m.arena, 0, "k" + std::to_string(1000 + i), "p");
            t->time = 7;  // all tied: the order is the keys'
            tasks.push_back(t);
            m.live.push_back(t);
        }
        std::swap(tasks[swap_at], tasks[swap_at + 1]);
        CHECK_FALSE(m.tree.assign_sorted(tasks.data(), tasks.size()));
        CHECK(m.tree.empty());
        CHECK(m.tree.begin() == m.tree.end());
        for (Task* t : tasks) {  // and the tree still takes them one by one
            m.tree.insert(m.tree.end(), *t);
            m.expected.emplace(entry_of(*t));
        }
        m.check(7);
        Task* one_more = Task::create(m.arena, 0, "z", "p");
        CHECK_FALSE(m.tree.assign_sorted(&one_more, 1));
        CHECK(m.tree.size() == 1000);
        Task::destroy(m.arena, one_more);
    }
}

TEST_CASE("a hinted insert at the end goes where an unhinted one would") {
    Model m;
    // In order, then out of order: the hint is only a hint.
    for (int i = 0; i < 1000; ++i)
        m.insert(i, "a", true);
    for (int i = 0; i < 1000; ++i)
        m.insert(999 - i, "b", true);
    m.check(500);
}

TEST_CASE("a task record keeps its times, counters and bytes in a 48-byte header") {
    TaskRegion region;
    TaskArena arena(region);
    Task* t = Task::create(arena, 7, "key", "payload");
    const Millis far = dueq::queue::detail::kMaxStoredTime;
    t->time = far;
    t->aux = -far;
    t->version = dueq::queue::detail::kMaxVersion;
    t->attempts = dueq::queue::detail::kMaxAttemptsCount;
    t->hlc = ~std::uint64_t{0};
    CHECK(t->time == far);
    CHECK(t->aux == -far);
    CHECK(t->queue_id == 7);
    CHECK(t->key_len == 3);
    CHECK(t->version == dueq::queue::detail::kMaxVersion);
    CHECK(t->attempts == dueq::queue::detail::kMaxAttemptsCount);
    CHECK(t->key() == "key");
    CHECK(t->payload() == "payload");
    CHECK(!t->indirect);
    Task::destroy(arena, t);
    CHECK(arena.used_bytes() == 0);
}

TEST_CASE("records too large for a small block keep key and payload outside the region") {
    TaskRegion region;
    TaskArena arena(region);
    TimeTree tree(region);
    std::vector<Task*> tasks;
    // A 16-byte key: a record of 48 + 16 + 960 bytes is the largest that stays inline.
    const std::pair<std::size_t, bool> cases[] = {{0, false},
                                                  {200, false},
                                                  {959, false},
                                                  {960, false},
                                                  {961, true},
                                                  {5000, true},
                                                  {std::size_t(1) << 20, true}};
    for (auto [payload, indirect] : cases) {
        std::string p(payload, 'p');
        for (std::size_t i = 0; i < p.size(); ++i)
            p[i] = char('a' + (i * 7 + payload) % 26);
        char key[17];
        std::snprintf(key, sizeof key, "key-%012zu", payload);
        Task* t = Task::create(arena, 1, key, p);
        t->time = Millis(payload);
        tree.insert(*t);
        CHECK(bool(t->indirect) == indirect);
        CHECK(t->payload() == p);
        CHECK(t->key() == key);
        tasks.push_back(t);
    }
    CHECK(tree.size() == tasks.size());
    std::size_t n = 0;
    for (auto it = tree.begin(); it != tree.end(); ++it, ++n)
        CHECK(&*it == tasks[n]);
    CHECK(arena.content_bytes > (std::size_t(1) << 20));
    tree.clear_and_dispose([&](Task* t) { Task::destroy(arena, t); });
    CHECK(tree.empty());
    CHECK(arena.content_bytes == 0);
    CHECK(arena.used_bytes() == 0);
}

TEST_CASE("the region hands slabs out aligned and takes them back for reuse") {
    constexpr std::size_t kSlab = 256 * 1024;
    TaskRegion region;
    CHECK(region.reserved_bytes() == 0);  // nothing reserved before the first slab
    char* a = region.take_slab(kSlab);
    REQUIRE(reinterpret_cast<std::uintptr_t>(a) % kSlab == 0);
    CHECK(region.holds(a));
    // Reference 0 means no node: no slab may start where references count from.
    CHECK(TaskRegion::ref_of(a) != 0);
    CHECK(TaskRegion::at(a, TaskRegion::ref_of(a + 8)) == a + 8);
    CHECK(TaskRegion::at(a + kSlab - 8, TaskRegion::ref_of(a)) == a);
    CHECK(TaskRegion::ref_of(nullptr) == 0);
    CHECK(TaskRegion::at(a, 0) == nullptr);
    a[0] = 1;
    a[kSlab - 1] = 2;
    const std::size_t in_use = region.slab_bytes_in_use();
    region.give_slab(a, kSlab);
    CHECK(region.slab_bytes_in_use() == in_use - kSlab);
    char* b = region.take_slab(kSlab);
    CHECK(b == a);
    CHECK(b[0] == 0);  // emptied when given back
    region.give_slab(b, kSlab);
    CHECK(region.reserved_bytes() > 0);
    CHECK(region.reserved_bytes() <= TaskRegion::kMaxBytes);
}

TEST_CASE("each region is its own range, and gives it back when destroyed") {
    constexpr std::size_t kSlab = 64 * 1024;
    auto one = std::make_unique<TaskRegion>();
    TaskRegion two;
    char* a = one->take_slab(kSlab);
    char* b = two.take_slab(kSlab);
    CHECK(one->holds(a));
    CHECK(!one->holds(b));
    CHECK(two.holds(b));
    CHECK(!two.holds(a));
    // A reference is read back in its own region, whichever block that is.
    CHECK(TaskRegion::at(b, TaskRegion::ref_of(b + 64)) == b + 64);
    // Many regions one after another (a simulator's stores) reuse the address space.
    one.reset();
    for (int i = 0; i < 2000; ++i) {
        TaskRegion r;
        r.take_node();
    }
}

TEST_CASE("stores on several threads, each with its own region") {
    auto work = [](int seed) {
        std::mt19937_64 rng(seed);
        Model m;
        for (int i = 0; i < 20'000; ++i)
            m.insert(Millis(rng() % 1000), "k" + std::to_string(i), false);
        for (int i = 0; i < 5'000; ++i)
            m.erase_at(rng() % m.live.size());
        return contents(m.tree) == std::vector<Entry>(m.expected.begin(), m.expected.end());
    };
    bool ok[4] = {};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
        threads.emplace_back([&, i] { ok[i] = work(i); });
    for (auto& t : threads)
        t.join();
    for (bool b : ok)
        CHECK(b);
}
