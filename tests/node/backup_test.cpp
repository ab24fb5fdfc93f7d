// Backups (the `backup` op): the file format refuses any damage, a node's streams are
// consistent, ordered, bounded and owned by one connection, and a restore seeds a data dir
// that loads as the state backed up, without its membership.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "node/backups.h"
#include "node/restore.h"
#include "storage/backup_file.h"
#include "storage/storage_support.h"
#include "wire/limits.h"

using namespace dueq;
using namespace dueq::test;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::string& path, const std::string& data) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << data;
}

const storage::BackupHeader kHeader{1234,   7,    1'700'000'000'123, 1'700'000'100'000,
                                    "east", "n2", "0.1.0 (abc)"};

// A file of: store record "meta", then pairs (k0..k<n-1>, v...) over three chunks.
void write_sample(const std::string& path, int n = 30) {
    storage::BackupFileWriter w;
    REQUIRE(w.open(path, kHeader));
    REQUIRE(w.chunk("meta"));
    std::string chunk;
    for (int i = 0; i < n; ++i) {
        storage::append_pair(chunk, "k" + std::to_string(i), "value " + std::to_string(i));
        if (i % 10 == 9) {
            REQUIRE(w.chunk(chunk));
            chunk.clear();
        }
    }
    REQUIRE(w.finish());
    CHECK(w.tasks() == std::uint64_t(n));
}

// Reads the whole file; the error, or "" with the chunks in `out`.
std::string read_all(const std::string& path, std::vector<std::string>* out = nullptr) {
    storage::BackupFileReader r;
    if (!r.open(path)) return r.error();
    std::string chunk;
    while (r.next(chunk))
        if (out) out->push_back(chunk);
    return r.done() ? "" : r.error();
}

// Tasks with payloads of `bytes` in queue "big": keys b<from>..b<to>, applied as entry
// `index`.
storage::AppliedState big_tasks(queue::Store& store, int from, int to, std::size_t bytes,
                                std::uint64_t index) {
    for (int i = from; i <= to; ++i) {
        queue::Put p;
        p.queue = "big";
        p.key = "b" + std::to_string(i);
        p.payload = "\xc6" + std::string("\x00\x00", 2) + char(bytes >> 8) + char(bytes & 0xff) +
                    std::string(bytes, char('a' + i % 26));  // msgpack bin 32
        REQUIRE(store.apply(p, log_time_of(index)).ok());
    }
    storage::AppliedState s;
    s.applied_index = index;
    s.applied_time = log_time_of(index);
    store.drain_changes(
        [&](std::string_view q, std::string_view k, const std::optional<std::string>& encoded) {
            s.changes.push_back(storage::TaskChange{std::string(q), std::string(k), encoded});
        });
    s.store_meta = store.encode_meta();
    return s;
}

}  // namespace

TEST_CASE("a backup file reads back as written and any damage to it is refused") {
    TempDir dir("backup-file");
    const std::string path = (dir.path() / "b.bak").string();
    write_sample(path);
    CHECK_FALSE(std::filesystem::exists(path + ".partial"));
    storage::BackupFileReader r;
    REQUIRE(r.open(path));
    CHECK(r.header() == kHeader);
    std::vector<std::string> chunks;
    REQUIRE(read_all(path, &chunks).empty());
    REQUIRE(chunks.size() == 4);
    CHECK(chunks[0] == "meta");
    std::vector<std::pair<std::string, std::string>> pairs;
    for (std::size_t i = 1; i < chunks.size(); ++i)
        REQUIRE(storage::split_pairs(chunks[i], pairs));
    REQUIRE(pairs.size() == 30);
    CHECK(pairs[29] == std::pair<std::string, std::string>("k29", "value 29"));

    const std::string good = read_file(path);
    const std::string bad = (dir.path() / "bad.bak").string();
    for (std::size_t at = 0; at < good.size(); ++at) {
        std::string flipped = good;
        flipped[at] = char(flipped[at] ^ 0x04);
        write_file(bad, flipped);
        INFO("byte " << at << " flipped");
        CHECK_FALSE(read_all(bad).empty());
    }
    for (std::size_t n = 0; n < good.size(); ++n) {
        write_file(bad, good.substr(0, n));
        INFO("cut to " << n << " bytes");
        CHECK_FALSE(read_all(bad).empty());
    }
    write_file(bad, good + "x");
    CHECK(read_all(bad).find("after its end record") != std::string::npos);
    write_file(bad, "not a backup at all");
    CHECK(read_all(bad).find("not a dueq backup") != std::string::npos);
}

TEST_CASE("a backup file is written whole or not at all") {
    TempDir dir("backup-partial");
    const std::string path = (dir.path() / "b.bak").string();
    storage::BackupFileWriter w;
    REQUIRE(w.open(path, kHeader));
    REQUIRE(w.chunk("meta"));
    CHECK_FALSE(w.chunk(std::string("\x00\x00\x00\x09k", 5)));  // a pair that lies
    CHECK_FALSE(w.chunk(""));
    CHECK(std::filesystem::exists(path + ".partial"));
    CHECK_FALSE(std::filesystem::exists(path));
    w.abandon();
    CHECK_FALSE(std::filesystem::exists(path + ".partial"));
    storage::BackupFileWriter none;
    REQUIRE(none.open(path, kHeader));
    CHECK_FALSE(none.finish());  // no store-wide record
}

TEST_CASE("a node's backup streams a checkpoint in order to its owner, two at most") {
    TempDir dir("backups");
    auto db = open_db(dir.str(), true);
    queue::Store store;
    REQUIRE(db->write({}, {big_tasks(store, 0, 599, 4096, 10)}).ok);  // 2.4 MiB
    const raft::SnapshotMeta meta{10, 3, raft::Millis(log_time_of(10))};
    auto cp = db->checkpoint(meta);
    // Written after the view: not in it.
    REQUIRE(db->write({}, {big_tasks(store, 600, 609, 16, 11)}).ok);

    node::Backups backups;
    REQUIRE(backups.reserve());
    REQUIRE(backups.reserve());
    CHECK_FALSE(backups.reserve());
    backups.unreserve();  // the second one's checkpoint never came
    std::string problem;
    auto first = backups.begin(cp, /*owner=*/7, 0, problem);
    REQUIRE(first);
    CHECK(first->seq == 0);
    CHECK(first->meta == meta);
    queue::Store check;
    REQUIRE(storage::load_store_meta(check, first->data));
    CHECK_FALSE(backups.next(first->backup, /*owner=*/8, 1, 0, problem));  // not its own
    CHECK(problem.find("on this connection") != std::string::npos);

    std::size_t tasks = 0, chunks = 0;
    for (std::uint32_t seq = 1;; ++seq) {
        auto c = backups.next(first->backup, 7, seq, std::int64_t(seq), problem);
        INFO(problem);
        REQUIRE(c);
        CHECK(c->meta == meta);
        ++chunks;
        CHECK(c->data.size() <= limits::kBackupChunkBytes + 8192);
        REQUIRE(storage::for_each_pair(c->data, [&](std::string_view k, std::string_view v) {
            REQUIRE(storage::load_task_record(check, k, v));
            ++tasks;
        }));
        if (c->last) break;
    }
    CHECK(chunks >= 3);
    CHECK(tasks == 600);
    CHECK_FALSE(check.get("big", "b600"));
    CHECK(backups.completed() == 1);
    CHECK(backups.running() == 0);
    CHECK_FALSE(backups.next(first->backup, 7, std::uint32_t(chunks + 1), 0, problem));

    // Out of order: the stream is dropped, even for the right chunk after.
    REQUIRE(backups.reserve());
    auto second = backups.begin(cp, 7, 0, problem);
    REQUIRE(second);
    CHECK_FALSE(backups.next(second->backup, 7, 2, 0, problem));
    CHECK(problem.find("expected chunk 1") != std::string::npos);
    CHECK_FALSE(backups.next(second->backup, 7, 1, 0, problem));

    // Idle streams and those of a closed connection end.
    REQUIRE(backups.reserve());
    auto idle = backups.begin(cp, 7, 1000, problem);
    REQUIRE(backups.reserve());
    auto closed = backups.begin(cp, 9, 1000, problem);
    REQUIRE((idle && closed));
    backups.sweep(1000 + limits::kBackupIdleMs - 1);
    CHECK(backups.running() == 2);
    backups.end_owner(9);
    CHECK(backups.running() == 1);
    backups.sweep(1000 + limits::kBackupIdleMs);
    CHECK(backups.running() == 0);
    CHECK_FALSE(backups.next(idle->backup, 7, 1, 0, problem));
    CHECK(problem.find("idle") != std::string::npos);
}

TEST_CASE("a restore seeds a fresh data dir with the state backed up, without its membership") {
    TempDir dir("restore");
    const std::string source_dir = (dir.path() / "source").string();
    const std::string file = (dir.path() / "b.bak").string();
    queue::Store store;
    store.set_membership("old members");
    const raft::SnapshotMeta meta{40, 6, raft::Millis(log_time_of(40))};
    {
        auto db = open_db(source_dir, true);
        REQUIRE(db->write({}, {apply_records(store, 1, 40)}).ok);
        auto cp = db->checkpoint(meta);
        node::Backups backups;
        REQUIRE(backups.reserve());
        std::string problem;
        auto c = backups.begin(cp, 1, 0, problem);
        REQUIRE(c);
        storage::BackupFileWriter w;
        REQUIRE(w.open(file, storage::BackupHeader{meta.index, meta.term, meta.time, 0, "east",
                                                   "n1", "test"}));
        REQUIRE(w.chunk(c->data));
        for (std::uint32_t seq = 1; !c->last; ++seq) {
            c = backups.next(c->backup, 1, seq, 0, problem);
            REQUIRE(c);
            if (!c->data.empty()) REQUIRE(w.chunk(c->data));
        }
        REQUIRE(w.finish());
        CHECK(w.tasks() == 40);
    }
    node::Config config;
    config.data_dir = (dir.path() / "fresh").string();
    node::RestoreSummary summary;
    auto err = node::restore_backup(config, file, summary);
    INFO(err.value_or(""));
    REQUIRE_FALSE(err);
    CHECK(summary.tasks == 40);
    CHECK(summary.header.cluster == "east");

    queue::Store restored;
    auto loaded = load_ok(config.data_dir, restored);
    CHECK(loaded.base == meta);
    CHECK(loaded.applied_index == 40);
    CHECK(loaded.hard_state == raft::HardState{6, raft::kNoNode, 40});
    CHECK(loaded.entries.empty());
    CHECK(restored.membership().empty());
    store.set_membership("");
    CHECK(contents(restored) == contents(store));

    // Never over a data dir in use, never from a damaged file.
    err = node::restore_backup(config, file, summary);
    REQUIRE(err);
    CHECK(err->find("not empty") != std::string::npos);
    std::string damaged = read_file(file);
    damaged[damaged.size() - 40] = char(damaged[damaged.size() - 40] ^ 1);
    write_file(file, damaged);
    config.data_dir = (dir.path() / "other").string();
    err = node::restore_backup(config, file, summary);
    REQUIRE(err);
    CHECK(err->find("damaged") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(config.data_dir));
}
