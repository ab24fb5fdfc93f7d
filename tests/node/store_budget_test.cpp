// Memory admission (node/store_budget.h) against a real store, without a network.
#include <catch2/catch.hpp>

#include "node/store_budget.h"

using dueq::node::StoreBudget;
namespace q = dueq::queue;

namespace {
q::Put put(const std::string& key, std::size_t payload_bytes) {
    // A msgpack str 32 header, then the bytes: one valid value of that size.
    std::string payload = "\xdb" + std::string(4, '\0') + std::string(payload_bytes, 'p');
    const auto n = std::uint32_t(payload_bytes);
    for (int i = 0; i < 4; ++i)
        payload[1 + i] = char((n >> (24 - 8 * i)) & 0xff);
    return q::Put{"tokens", key, payload, q::Millis(1000), q::PutMode::upsert};
}

bool refused(const std::variant<std::uint64_t, std::string>& v) {
    return std::holds_alternative<std::string>(v);
}
}  // namespace

TEST_CASE("memory_bytes grows with puts and falls with deletes") {
    q::Store store;
    const std::size_t empty = store.memory_bytes();
    for (int i = 0; i < 1000; ++i)
        REQUIRE(store.apply(put("k" + std::to_string(i), 200), 1).ok());
    const std::size_t full = store.memory_bytes();
    // Each task: its key and payload, and no more than the budget's estimate beside them.
    CHECK(full - empty >= 1000 * 200);
    CHECK(full - empty <= 1000 * (StoreBudget::kTaskOverheadBytes + 4 + 205 + 8));
    for (int i = 0; i < 1000; ++i)
        REQUIRE(store.apply(q::Delete{"tokens", "k" + std::to_string(i)}, 2).ok());
    // The records' space is free again; the deleted keys are remembered for a while
    // (tombstones, about 180 bytes each), which costs less than the records did.
    INFO("empty " << empty << ", full " << full << ", deleted " << store.memory_bytes());
    CHECK(full - store.memory_bytes() >= 1000 * 50);
    CHECK(store.region_bytes() > 0);
    CHECK(store.region_limit_bytes() >= store.region_bytes());
}

TEST_CASE("writes past the budget are refused; deletes, takes and shrinking acks pass") {
    q::Store store;
    const std::uint64_t limit =
        store.memory_bytes() + 100 * (StoreBudget::kTaskOverheadBytes + 300);
    StoreBudget budget(limit);
    int admitted = 0;
    for (int i = 0; i < 1000; ++i) {
        const q::Command cmd = put("k" + std::to_string(i), 200);
        auto a = budget.admit(store, cmd);
        if (refused(a)) {
            CHECK(std::get<std::string>(a).find("store is full") != std::string::npos);
            break;
        }
        ++admitted;
        REQUIRE(store.apply(cmd, 1).ok());
        budget.release(std::get<std::uint64_t>(a));
    }
    CHECK(admitted > 50);
    CHECK(admitted < 1000);
    CHECK(store.memory_bytes() <= limit);
    CHECK(budget.in_flight() == 0);

    // Replacing a task with one no larger, deleting, taking: all pass when full.
    CHECK_FALSE(refused(budget.admit(store, q::Command(put("k0", 150)))));
    CHECK_FALSE(refused(budget.admit(store, q::Command(q::Take{"tokens", 1, {}, 1, false}))));
    CHECK_FALSE(refused(budget.admit(store, q::Command(q::Delete{"tokens", "k1"}))));
    CHECK_FALSE(refused(
        budget.admit(store, q::Command(q::Ack{"tokens", "k2", 7, std::string("\xa1x"), {}}))));
    // A larger payload on an ack grows the task: refused.
    CHECK(refused(
        budget.admit(store, q::Command(q::Ack{"tokens", "k2", 7, std::string(4000, '\xc0'), {}}))));

    // Deleting makes room at once.
    for (int i = 0; i < 20; ++i)
        REQUIRE(store.apply(q::Delete{"tokens", "k" + std::to_string(i)}, 3).ok());
    CHECK_FALSE(refused(budget.admit(store, q::Command(put("new", 200)))));
}

TEST_CASE("writes admitted and not answered count against the budget") {
    q::Store store;
    StoreBudget budget(store.memory_bytes() + 10 * (StoreBudget::kTaskOverheadBytes + 300));
    int admitted = 0;
    std::uint64_t held = 0;
    // Nothing applies: a pipelined burst must still stop at the budget.
    for (int i = 0; i < 100; ++i) {
        auto a = budget.admit(store, q::Command(put("k" + std::to_string(i), 200)));
        if (refused(a)) break;
        held += std::get<std::uint64_t>(a);
        ++admitted;
    }
    CHECK(admitted >= 9);
    CHECK(admitted <= 14);
    CHECK(budget.in_flight() == held);
    budget.release(held);
    CHECK(budget.in_flight() == 0);
    CHECK_FALSE(refused(budget.admit(store, q::Command(put("again", 200)))));
}

TEST_CASE("a node without a configured budget keeps within half its RAM") {
    using dueq::node::effective_store_budget;
    const std::uint64_t gib = std::uint64_t{1} << 30;
    CHECK(effective_store_budget(8 * gib, false, 64 * gib) == 8 * gib);
    CHECK(effective_store_budget(8 * gib, false, 4 * gib) == 2 * gib);
    CHECK(effective_store_budget(12 * gib, true, 4 * gib) == 12 * gib);  // set: as written
    CHECK(effective_store_budget(8 * gib, false, 0) == 8 * gib);         // RAM unknown
    CHECK(dueq::node::physical_memory_bytes() > 0);
}
