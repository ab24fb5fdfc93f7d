// Store::list, the `list` op's pages (docs/protocol.md): every status in its order, pages
// that resume after a position, and pages that stay small whatever the queue holds.
#include <catch2/catch.hpp>

#include "queue/store.h"

using namespace dueq::queue;

namespace {

constexpr Millis T0 = 1'700'000'000'000;

Put put(const std::string& key, Millis time) {
    return Put{"q", key, "\xa1p", time, PutMode::upsert};
}

// Every key of `status`, page by page of `limit`, each page from the previous one's last.
std::vector<std::string> all_pages(const Store& s, ListStatus status, std::size_t limit, Millis now,
                                   std::size_t* pages = nullptr) {
    std::vector<std::string> keys;
    std::optional<std::pair<Millis, std::string>> after;
    for (std::size_t n = 1;; ++n) {
        const ListPage page = s.list("q", status, after, limit, now);
        REQUIRE(page.tasks.size() <= limit);
        for (const auto& t : page.tasks)
            keys.push_back(t.key);
        if (pages) *pages = n;
        if (!page.more) return keys;
        REQUIRE_FALSE(page.tasks.empty());
        after.emplace(page.tasks.back().order, page.tasks.back().key);
    }
}

}  // namespace

TEST_CASE("list pages through ready and late tasks in due order, each once") {
    Store s;
    // Same times for many keys: a page must resume inside a run of equal times.
    for (int i = 0; i < 250; ++i)
        REQUIRE(
            s.apply(put("k" + std::to_string(1000 + i), T0 - 10'000 + (i / 50) * 1000), T0).ok());
    for (int i = 0; i < 30; ++i)
        REQUIRE(s.apply(put("f" + std::to_string(100 + i), T0 + 60'000), T0).ok());
    std::size_t pages = 0;
    const auto late = all_pages(s, ListStatus::late, 7, T0, &pages);
    CHECK(late.size() == 250);
    CHECK(pages == 36);
    CHECK(late.front() == "k1000");
    CHECK(late.back() == "k1249");
    CHECK(std::is_sorted(late.begin(), late.end()));  // here due order is key order
    const auto ready = all_pages(s, ListStatus::ready, 100, T0);
    CHECK(ready.size() == 280);
    CHECK(ready.back() == "f129");  // the future ones come last
    const ListPage first = s.list("q", ListStatus::late, std::nullopt, 3, T0);
    REQUIRE(first.tasks.size() == 3);
    CHECK(first.more);
    CHECK(first.tasks[0].status == Status::ready);
    CHECK(first.tasks[0].time == T0 - 10'000);
    CHECK(first.tasks[0].order == T0 - 10'000);
}

TEST_CASE("list shows taken tasks by lease end, buried and done ones") {
    Store s;
    for (int i = 0; i < 10; ++i)
        REQUIRE(s.apply(put("k" + std::to_string(i), T0 - 1000 + i), T0).ok());
    Take t{"q", 4};
    t.session = 1;
    const Result taken = s.apply(t, T0);
    REQUIRE(taken.tasks.size() == 4);
    const ListPage page = s.list("q", ListStatus::taken, std::nullopt, 100, T0);
    REQUIRE(page.tasks.size() == 4);
    CHECK_FALSE(page.more);
    for (const auto& x : page.tasks) {
        CHECK(x.status == Status::taken);
        CHECK(x.lease_until > T0);
        CHECK(x.order == x.lease_until);
        CHECK(x.attempts == 1);
    }
    REQUIRE(s.apply(Bury{"q", taken.tasks[0].key, taken.tasks[0].lease}, T0).ok());
    REQUIRE(s.apply(Ack{"q", taken.tasks[1].key, taken.tasks[1].lease, {}, {}}, T0).ok());
    CHECK(all_pages(s, ListStatus::buried, 10, T0) == std::vector<std::string>{taken.tasks[0].key});
    CHECK(all_pages(s, ListStatus::done, 10, T0) == std::vector<std::string>{taken.tasks[1].key});
    CHECK(all_pages(s, ListStatus::taken, 1, T0).size() == 2);
    CHECK(all_pages(s, ListStatus::ready, 100, T0).size() == 6);
    CHECK(s.list("nope", ListStatus::ready, std::nullopt, 10, T0).tasks.empty());
}

TEST_CASE("a page resumes after a position even when that task is gone") {
    Store s;
    for (int i = 0; i < 20; ++i)
        REQUIRE(s.apply(put("k" + std::to_string(10 + i), T0 - 1000), T0).ok());
    const ListPage first = s.list("q", ListStatus::late, std::nullopt, 5, T0);
    REQUIRE(first.tasks.back().key == "k14");
    REQUIRE(s.apply(Delete{"q", "k14"}, T0).ok());
    CHECK_FALSE(s.list_position("q", ListStatus::late, "k14", T0));
    const ListPage next = s.list("q", ListStatus::late,
                                 std::pair{first.tasks.back().order, std::string("k14")}, 5, T0);
    REQUIRE(next.tasks.size() == 5);
    CHECK(next.tasks.front().key == "k15");
    CHECK(s.list_position("q", ListStatus::late, "k15", T0) == T0 - 1000);
    CHECK_FALSE(s.list_position("q", ListStatus::taken, "k15", T0));
    CHECK_FALSE(s.list_position("q", ListStatus::late, "k15", T0 - 2000));  // not late then
}
