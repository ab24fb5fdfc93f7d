// The task lookup table against a std::map, through many growths, with inserts, erases,
// replacements and lookups landing while a growth is still moving entries.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "queue/task_table.h"

using dueq::queue::detail::Task;
using dueq::queue::detail::TaskArena;
using dueq::queue::detail::TaskRegion;
using dueq::queue::detail::TaskTable;

namespace {

struct Model {
    TaskRegion region;
    TaskArena arena{region};
    TaskTable table;
    std::map<std::pair<std::uint16_t, std::string>, Task*> tasks;
    std::size_t ops_while_growing = 0;

    std::pair<std::uint16_t, std::string> some_key(std::mt19937_64& rng, std::uint64_t range) {
        // Few queues and short keys: equal keys in other queues must stay apart.
        return {std::uint16_t(rng() % 3), "k" + std::to_string(rng() % range)};
    }

    void step(std::mt19937_64& rng, std::uint64_t range, int insert_share) {
        if (table.growing()) ++ops_while_growing;
        auto k = some_key(rng, range);
        auto it = tasks.find(k);
        REQUIRE(table.find(k.first, k.second) == (it == tasks.end() ? nullptr : it->second));
        const int dice = int(rng() % 100);
        if (it == tasks.end()) {
            if (dice >= insert_share) return;
            Task* t = Task::create(arena, k.first, k.second, "p");
            table.insert(t);
            tasks[k] = t;
        } else if (dice < 50) {
            table.erase(it->second);
            Task::destroy(arena, it->second);
            tasks.erase(it);
        } else {
            Task* n = Task::create(arena, k.first, k.second, "payload that is longer");
            table.replace(it->second, n);
            Task::destroy(arena, it->second);
            it->second = n;
        }
    }

    void check_all() {
        REQUIRE(table.size() == tasks.size());
        for (const auto& [k, t] : tasks)
            REQUIRE(table.find(k.first, k.second) == t);
    }
};

}  // namespace

TEST_CASE("the task table agrees with a map through growths under way") {
    const auto seed = GENERATE(1u, 2u, 3u);
    std::mt19937_64 rng(seed);
    Model m;
    // Mostly inserts, so it grows many times; then mostly erases, so it shrinks back to
    // few entries (it never shrinks its arrays), then inserts again.
    for (int i = 0; i < 60000; ++i)
        m.step(rng, 100000, 90);
    m.check_all();
    for (int i = 0; i < 60000; ++i)
        m.step(rng, 100000, 5);
    m.check_all();
    for (int i = 0; i < 60000; ++i)
        m.step(rng, 100000, 95);
    m.check_all();
    INFO("seed " << seed);
    // The test is only worth something if lookups, erases and replacements met a growth
    // that was half done.
    CHECK(m.ops_while_growing > 1000);
    for (auto& [k, t] : m.tasks)
        Task::destroy(m.arena, t);
}

TEST_CASE("a growth moves its entries a few slots per insert, not all at once") {
    TaskRegion region;
    TaskArena arena(region);
    TaskTable table;
    std::vector<Task*> tasks;
    std::size_t longest_growth = 0, growth = 0, growths = 0;
    for (int i = 0; i < 200000; ++i) {
        Task* t = Task::create(arena, 0, "key" + std::to_string(i), "");
        table.insert(t);
        tasks.push_back(t);
        if (table.growing()) {
            if (growth++ == 0) ++growths;
        } else {
            longest_growth = std::max(longest_growth, growth);
            growth = 0;
        }
    }
    CHECK(growths > 10);
    // The largest array before the last growth had at most 200000 * 8/7 slots; moving it
    // kMoveSlots at a time takes about that over kMoveSlots inserts, and more than one.
    CHECK(longest_growth > 1);
    CHECK(longest_growth <= 200000 * 8 / 7 / TaskTable::kMoveSlots + 1);
    for (Task* t : tasks)
        REQUIRE(table.find(0, t->key()) == t);
    for (Task* t : tasks)
        Task::destroy(arena, t);
}

TEST_CASE("lookups alone finish a growth that inserts started") {
    TaskRegion region;
    TaskArena arena(region);
    TaskTable table;
    std::vector<Task*> tasks;
    while (tasks.size() < 1000 || !table.growing()) {
        tasks.push_back(Task::create(arena, 0, "key" + std::to_string(tasks.size()), ""));
        table.insert(tasks.back());
    }
    // From here on only lookups, as in a store whose tokens are only refreshed.
    std::size_t lookups = 0;
    while (table.growing() && lookups < 1'000'000) {
        REQUIRE(table.find(0, tasks[lookups % tasks.size()]->key()) ==
                tasks[lookups % tasks.size()]);
        ++lookups;
    }
    CHECK_FALSE(table.growing());
    CHECK(lookups <= tasks.size() * 8 / 7 / TaskTable::kMoveSlots + 1);
    for (Task* t : tasks)
        REQUIRE(table.find(0, t->key()) == t);
    for (Task* t : tasks)
        Task::destroy(arena, t);
}
