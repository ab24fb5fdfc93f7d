// storage::Writer: group commit. Everything that queues up while a batch is being
// written goes out together in the next batch, with one fsync (leveldb's group commit).
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "storage/storage_support.h"
#include "storage/writer.h"

using namespace dueq;
using namespace dueq::test;

namespace {

// Holds the storage thread inside its first on_written call until released, the way a
// slow fsync would keep it busy.
struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false, open = false;
    void block_here() {
        std::unique_lock lock(mu);
        entered = true;
        cv.notify_all();
        cv.wait(lock, [&] { return open; });
    }
    void wait_entered() {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return entered; });
    }
    void release() {
        {
            std::lock_guard lock(mu);
            open = true;
        }
        cv.notify_all();
    }
};

}  // namespace

TEST_CASE("appends from several threads while the writer is busy share batches") {
    TempDir dir("group-commit");
    auto db = open_db(dir.str(), true);
    Gate gate;
    std::mutex written_mu;  // guards written
    std::vector<std::uint64_t> written;
    constexpr int kThreads = 4, kPerThread = 250;
    constexpr std::uint64_t kLast = 1 + kThreads * kPerThread;
    std::size_t batches = 0;
    {
        storage::Writer writer(
            *db,
            [&](std::uint64_t index) {
                {
                    std::lock_guard lock(written_mu);
                    written.push_back(index);
                }
                if (index == 1) gate.block_here();
            },
            [](const std::string& message) { FAIL("writer failed: " << message); });

        writer.append(record_for(1));
        gate.wait_entered();  // the writer is busy with entry 1

        // Indexes are handed out in append order, as the node's single loop does.
        std::mutex order_mu;
        std::uint64_t next = 2;
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&] {
                for (int i = 0; i < kPerThread; ++i) {
                    std::lock_guard lock(order_mu);
                    writer.append(record_for(next++));
                }
            });
        for (auto& t : threads) t.join();
        gate.release();
        // The destructor writes what is still queued before it returns.
    }
    {
        std::lock_guard lock(written_mu);
        REQUIRE(!written.empty());
        for (std::size_t i = 1; i < written.size(); ++i) CHECK(written[i] > written[i - 1]);
        CHECK(written.back() == kLast);
        batches = written.size();
    }
    INFO(batches << " batches for " << kLast << " appends");
    // Entry 1 alone, then everything that queued behind it in one batch.
    CHECK(batches == 2);
    CHECK(db->last_log_index() == kLast);

    // Everything was written, in order, with its content.
    db.reset();
    auto again = open_db(dir.str(), true);
    queue::Store store;
    std::uint64_t applied = 0;
    std::int64_t time = 0;
    std::vector<storage::LogRecord> tail;
    REQUIRE(again->load(store, applied, time, tail).ok);
    REQUIRE(tail.size() == kLast);
    for (std::uint64_t i = 0; i < kLast; ++i) {
        const auto want = record_for(i + 1);
        CHECK(tail[i].index == want.index);
        CHECK(tail[i].command == want.command);
    }
}

TEST_CASE("the writer's batch counter and on_written agree; applied states ride along") {
    TempDir dir("batches");
    auto db = open_db(dir.str(), true);
    std::atomic<std::uint64_t> last_written{0};
    std::atomic<int> calls{0};
    queue::Store store;
    std::uint64_t batches = 0;
    {
        storage::Writer writer(
            *db,
            [&](std::uint64_t index) {
                CHECK(index > last_written.load());
                last_written = index;
                ++calls;
            },
            [](const std::string& message) { FAIL("writer failed: " << message); });
        for (std::uint64_t i = 1; i <= 50; ++i) {
            writer.append(record_for(i));
            if (i % 10 == 0) writer.apply(apply_records(store, i - 9, i));
        }
        // Batches that hold only applied states report nothing through on_written.
        writer.apply(apply_records(store, 51, 50));
        // The destructor drains the queue; batches() is read before it stops.
        while (last_written.load() < 50) std::this_thread::yield();
        batches = writer.batches();
    }
    CHECK(last_written == 50);
    CHECK(calls.load() >= 1);
    CHECK(std::uint64_t(calls.load()) <= batches);
    CHECK(batches <= 51);

    db.reset();
    auto again = open_db(dir.str(), true);
    queue::Store loaded;
    std::uint64_t applied = 0;
    std::int64_t time = 0;
    std::vector<storage::LogRecord> tail;
    REQUIRE(again->load(loaded, applied, time, tail).ok);
    CHECK(applied == 50);
    CHECK(tail.empty());
    CHECK(loaded.task_count() == 50);
}
