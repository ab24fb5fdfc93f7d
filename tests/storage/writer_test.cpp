// storage::Writer: jobs get tickets in submission order and are carried out in that
// order; everything that queues up while a batch is being written goes out together in
// the next batch, with one fsync (leveldb's group commit); on_written reports the last
// ticket carried out; installs and checkpoints fall exactly between the jobs around them.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "storage/storage_support.h"
#include "storage/writer.h"

using namespace dueq;
using namespace dueq::test;
using storage::Writer;

namespace {

// Holds the storage thread inside on_written for ticket 1 until released, the way a
// slow fsync would keep it busy, so that what is submitted meanwhile forms one batch.
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

// Records every on_written call; blocks on the gate for ticket 1.
struct Written {
    Gate gate;
    bool use_gate = true;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::uint64_t> tickets;
    void operator()(std::uint64_t t) {
        {
            std::lock_guard lock(mu);
            tickets.push_back(t);
        }
        cv.notify_all();
        if (use_gate && t == 1) gate.block_here();
    }
    // True once ticket `t` or a later one was reported; false after 20 s.
    bool wait_for(std::uint64_t t) {
        std::unique_lock lock(mu);
        return cv.wait_for(lock, std::chrono::seconds(20),
                           [&] { return !tickets.empty() && tickets.back() >= t; });
    }
    std::uint64_t last() {
        std::lock_guard lock(mu);
        return tickets.empty() ? 0 : tickets.back();
    }
    std::vector<std::uint64_t> all() {
        std::lock_guard lock(mu);
        return tickets;
    }
};

auto fail_on_error() {
    return [](const std::string& message) { FAIL("writer failed: " << message); };
}

storage::LogWrite one_entry(std::uint64_t index) {
    return log_write(index, index);
}

}  // namespace

TEST_CASE("log writes from several threads while the writer is busy share one batch") {
    TempDir dir("group-commit");
    auto db = open_db(dir.str(), true);
    Written written;
    constexpr int kThreads = 4, kPerThread = 250;
    constexpr std::uint64_t kLast = 1 + kThreads * kPerThread;
    std::uint64_t batches = 0;
    {
        Writer writer(*db, [&](std::uint64_t t) { written(t); }, fail_on_error());
        CHECK(writer.submit(one_entry(1)) == 1);
        written.gate.wait_entered();  // the writer is busy with ticket 1

        // Indexes are handed out in submission order, as the node's single loop does;
        // so the ticket of each job is its entry's index.
        std::mutex order_mu;
        std::uint64_t next = 2;
        std::atomic<int> ticket_mismatches{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&] {
                for (int i = 0; i < kPerThread; ++i) {
                    std::lock_guard lock(order_mu);
                    const std::uint64_t index = next++;
                    if (writer.submit(one_entry(index)) != index) ++ticket_mismatches;
                }
            });
        for (auto& t : threads) t.join();
        CHECK(ticket_mismatches == 0);
        written.gate.release();
        REQUIRE(written.wait_for(kLast));
        batches = writer.batches();
    }
    // Ticket 1 alone, then everything that queued behind it in one batch.
    CHECK(written.all() == std::vector<std::uint64_t>{1, kLast});
    CHECK(batches == 2);

    // Everything was written, in order, with its content.
    db.reset();
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.entries == entries(1, kLast));
}

TEST_CASE("tickets count every kind of job; on_written ends at the last one") {
    TempDir dir("tickets");
    auto db = open_db(dir.str(), true);
    Written written;
    written.use_gate = false;
    queue::Store store;
    std::vector<std::uint64_t> tickets;
    std::uint64_t batches = 0;
    {
        Writer writer(*db, [&](std::uint64_t t) { written(t); }, fail_on_error());
        for (std::uint64_t i = 1; i <= 50; ++i) {
            tickets.push_back(writer.submit(one_entry(i)));
            if (i % 10 == 0) {
                tickets.push_back(writer.submit(apply_records(store, i - 9, i)));
                storage::LogWrite commit;  // a commit index move: hard state only
                commit.hard_state = raft::HardState{term_of(i), 1, i};
                commit.sync = false;
                tickets.push_back(writer.submit(commit));
            }
        }
        REQUIRE(written.wait_for(tickets.back()));
        batches = writer.batches();
    }
    REQUIRE(tickets.size() == 60);
    for (std::size_t i = 0; i < tickets.size(); ++i) CHECK(tickets[i] == i + 1);
    const auto reported = written.all();
    REQUIRE(!reported.empty());
    for (std::size_t i = 1; i < reported.size(); ++i) CHECK(reported[i] > reported[i - 1]);
    CHECK(reported.back() == 60);
    CHECK(reported.size() == batches);  // one report per batch (no installs here)
    CHECK(batches <= 60);

    db.reset();
    queue::Store loaded;
    const auto got = load_ok(dir.str(), loaded);
    CHECK(got.entries == entries(1, 50));
    CHECK(got.applied_index == 50);
    CHECK(got.hard_state == raft::HardState{term_of(50), 1, 50});
    CHECK(contents(loaded) == contents(store));
}

TEST_CASE("a checkpoint request sees every job before it and none after it") {
    TempDir dir("checkpoint-request");
    auto db = open_db(dir.str(), true);
    Written written;
    queue::Store store;
    std::shared_ptr<const storage::Checkpoint> cp;
    std::uint64_t cp_ticket = 0, written_at_done = ~std::uint64_t(0);
    int done_calls = 0;
    StoreContents at5;
    {
        Writer writer(*db, [&](std::uint64_t t) { written(t); }, fail_on_error());
        CHECK(writer.submit(log_write(1, 10)) == 1);
        written.gate.wait_entered();
        // One batch: applied state 5, the request, applied state 8 with a delete.
        CHECK(writer.submit(apply_records(store, 1, 5)) == 2);
        at5 = contents(store);
        cp_ticket = writer.submit(storage::CheckpointRequest{
            meta_of(5), [&](std::shared_ptr<const storage::Checkpoint> c) {
                ++done_calls;
                written_at_done = written.last();
                cp = std::move(c);
            }});
        CHECK(cp_ticket == 3);
        REQUIRE(store.apply(queue::Delete{"q", "k1"}, log_time_of(6)).ok());
        CHECK(writer.submit(apply_records(store, 7, 8)) == 4);
        written.gate.release();
    }
    // The destructor carried everything out.
    CHECK(written.all() == std::vector<std::uint64_t>{1, 4});
    REQUIRE(done_calls == 1);
    CHECK(written_at_done < cp_ticket);  // done ran before its batch was reported
    REQUIRE(cp);
    CHECK(cp->meta() == meta_of(5));

    queue::Store fresh;
    {
        // The reader holds a RocksDB iterator: it must go before the database.
        storage::Checkpoint::Reader reader(std::move(cp));
        REQUIRE(storage::load_store_meta(fresh, reader.store_meta()));
        std::string chunk;
        CHECK_FALSE(reader.next(chunk, 1 << 20));
        std::vector<std::pair<std::string, std::string>> pairs;
        REQUIRE(storage::split_pairs(chunk, pairs));
        for (const auto& [k, v] : pairs) REQUIRE(storage::load_task_record(fresh, k, v));
    }
    CHECK(contents(fresh) == at5);
    CHECK(fresh.get("q", "k1"));
    CHECK_FALSE(fresh.get("q", "k7"));

    db.reset();
    queue::Store loaded;
    const auto got = load_ok(dir.str(), loaded);
    CHECK(got.applied_index == 8);
    CHECK(contents(loaded) == contents(store));
}

TEST_CASE("an install through the writer falls between the log writes around it") {
    TempDir dir("writer-install");
    auto db = open_db(dir.str(), true);
    Written written;
    queue::Store source;
    apply_records(source, 1, 20);
    storage::SnapshotInstall snap;
    snap.meta = meta_of(20);
    snap.hard_state = {term_of(20), 2, 20};
    for (const auto& [qk, encoded] : contents(source).tasks) {
        const std::string key = storage::task_key(qk.first, qk.second);
        snap.tasks.emplace_back(key, storage::seal(encoded, key));
    }
    snap.store_meta_sealed = storage::seal_store_meta(source.encode_meta());
    {
        Writer writer(*db, [&](std::uint64_t t) { written(t); }, fail_on_error());
        writer.submit(log_write(1, 3, 1));
        written.gate.wait_entered();
        queue::Store old;
        writer.submit(log_write(4, 30, 1));            // wiped by the install
        writer.submit(apply_records(old, 1, 4));       // wiped too
        writer.submit(snap);
        writer.submit(log_write(21, 23));              // kept
        written.gate.release();
    }
    CHECK(written.all() == std::vector<std::uint64_t>{1, 5});
    db.reset();
    queue::Store loaded;
    const auto got = load_ok(dir.str(), loaded);
    CHECK(got.base == meta_of(20));
    CHECK(got.entries == entries(21, 23));
    CHECK(got.applied_index == 20);
    CHECK(got.hard_state == snap.hard_state);
    CHECK(contents(loaded) == contents(source));
}

TEST_CASE("inline writes: the submitter writes when the writer is idle, the thread otherwise") {
    TempDir dir("inline-writes");
    auto db = open_db(dir.str(), true);
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::pair<std::uint64_t, std::thread::id>> reports;
    auto reported = [&](std::uint64_t t) {
        std::unique_lock lock(mu);
        return cv.wait_for(lock, std::chrono::seconds(20),
                           [&] { return !reports.empty() && reports.back().first >= t; });
    };
    const auto self = std::this_thread::get_id();
    Gate gate;
    std::uint64_t last = 0;
    {
        Writer writer(
            *db,
            [&](std::uint64_t t) {
                std::lock_guard lock(mu);
                reports.emplace_back(t, std::this_thread::get_id());
                cv.notify_all();
            },
            fail_on_error());
        writer.set_inline_writes(true, std::chrono::hours(1));

        // Idle: written before submit returns, and reported on this thread.
        CHECK(writer.submit(one_entry(1)) == 1);
        {
            std::lock_guard lock(mu);
            REQUIRE(reports.size() == 1);
            CHECK(reports[0] == std::make_pair(std::uint64_t{1}, self));
        }
        CHECK(writer.inline_batches() == 1);

        // A write behind (here a commit-index move) is left to the thread: nobody waits
        // for it.
        storage::LogWrite commit;
        commit.hard_state = raft::HardState{term_of(1), 1, 1};
        commit.sync = false;
        CHECK(writer.submit(commit) == 2);
        REQUIRE(reported(2));
        CHECK(writer.inline_batches() == 1);

        // A checkpoint is never carried out inline; while it holds the thread, a write waits
        // behind it and the thread reports both.
        CHECK(writer.submit(storage::CheckpointRequest{
                  meta_of(1),
                  [&](std::shared_ptr<const storage::Checkpoint>) { gate.block_here(); }}) == 3);
        gate.wait_entered();
        CHECK(writer.submit(one_entry(2)) == 4);
        {
            std::lock_guard lock(mu);
            CHECK(reports.size() == 2);
        }
        gate.release();
        REQUIRE(reported(4));
        {
            std::lock_guard lock(mu);
            CHECK(reports.back().first == 4);
            CHECK(reports.back().second != self);
        }
        CHECK(writer.inline_batches() == 1);

        // Once the thread is idle again, writes are inline again...
        std::uint64_t next = 3;
        for (int i = 0; i < 2000 && writer.inline_batches() == 1; ++i) {
            CHECK(writer.submit(one_entry(next)) == next + 2);
            ++next;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        REQUIRE(writer.inline_batches() == 2);
        // ...until a write took longer than the limit (here: any time at all): then the
        // thread writes, though it is idle.
        writer.set_inline_writes(true, std::chrono::nanoseconds(0));
        CHECK(writer.submit(one_entry(next)) == next + 2);
        REQUIRE(reported(next + 2));
        CHECK(writer.inline_batches() == 2);
        {
            std::lock_guard lock(mu);
            CHECK(reports.back().second != self);
        }
        last = next;
    }
    db.reset();
    queue::Store loaded;
    CHECK(load_ok(dir.str(), loaded).entries == entries(1, last));
}
