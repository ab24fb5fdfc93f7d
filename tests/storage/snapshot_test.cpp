// Raft snapshots in storage::Database: install() replaces everything a node holds;
// checkpoint() is a consistent view of the applied state that later writes do not
// change, read in chunks of (key, sealed record) pairs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>

#include "storage/storage_support.h"

using namespace dueq;
using namespace dueq::test;
using storage::AppliedState;

namespace {

// Reads a whole checkpoint into a fresh store, `max_bytes` at a time; every chunk must
// parse on its own. Returns the number of chunks.
std::size_t read_checkpoint(std::shared_ptr<const storage::Checkpoint> cp, queue::Store& out,
                            std::size_t max_bytes,
                            const std::function<void()>& between_chunks = {}) {
    storage::Checkpoint::Reader reader(std::move(cp));
    REQUIRE(storage::load_store_meta(out, reader.store_meta()));
    std::size_t chunks = 0;
    for (bool more = true; more;) {
        std::string chunk;
        more = reader.next(chunk, max_bytes);
        ++chunks;
        REQUIRE(chunks < 100'000);  // next() must end
        std::vector<std::pair<std::string, std::string>> pairs;
        REQUIRE(storage::split_pairs(chunk, pairs));
        for (const auto& [k, v] : pairs) REQUIRE(storage::load_task_record(out, k, v));
        if (more && between_chunks) between_chunks();
    }
    REQUIRE(reader.status().ok);
    return chunks;
}

// The snapshot a leader would send for `store` at `meta`, records sealed as stored.
storage::SnapshotInstall snapshot_of(const queue::Store& store, raft::SnapshotMeta meta,
                                     raft::HardState hs) {
    storage::SnapshotInstall snap;
    snap.meta = meta;
    snap.hard_state = hs;
    for (const auto& [qk, encoded] : contents(store).tasks) {
        const std::string key = storage::task_key(qk.first, qk.second);
        snap.tasks.emplace_back(key, storage::seal(encoded, key));
    }
    snap.store_meta_sealed = storage::seal_store_meta(store.encode_meta());
    return snap;
}

// A store with tasks other than put_for's: queue "s", keys "s<i>".
void fill_other(queue::Store& store, int n, raft::Millis now) {
    for (int i = 0; i < n; ++i) {
        queue::Put p = put_for(std::uint64_t(i));
        p.queue = "s";
        p.key = "s" + std::to_string(i);
        REQUIRE(store.apply(p, now).ok());
    }
}

}  // namespace

TEST_CASE("install replaces the tasks, the log, the hard state and the applied index") {
    TempDir dir("install");
    queue::Store source;
    const raft::SnapshotMeta meta{50, 7, raft::Millis(log_time_of(50))};
    fill_other(source, 12, meta.time);
    const raft::HardState hs{7, 3, 50};
    {
        auto db = open_db(dir.str(), true);
        queue::Store old;
        // The old state reaches past the snapshot: entries 1..60, applied 40, trimmed.
        REQUIRE(db->write({log_write(1, 60)}, {}).ok);
        AppliedState a = apply_records(old, 1, 40);
        a.trim = meta_of(10);
        REQUIRE(db->write({}, {a}).ok);
        REQUIRE(db->install(snapshot_of(source, meta, hs)).ok);
    }
    {
        RawDb raw(dir.str());
        CHECK(raw.keys("log").empty());
        CHECK(raw.keys("tasks").size() == 12);
    }
    queue::Store store;
    auto got = load_ok(dir.str(), store);
    CHECK(contents(store) == contents(source));  // exactly: none of the old "q" tasks
    CHECK_FALSE(store.get("q", "k1"));
    CHECK(store.task_count() == 12);
    CHECK(got.entries.empty());
    CHECK(got.base == meta);
    CHECK(got.applied_index == 50);
    CHECK(got.applied_time == log_time_of(50));
    CHECK(got.hard_state == hs);

    // The log goes on after the snapshot, across a reopen.
    {
        auto db = open_db(dir.str(), true);
        REQUIRE(db->write({log_write(51, 54)}, {}).ok);
        REQUIRE(db->write({log_write(53, 53, 8)}, {}).ok);  // and its suffix is replaced
    }
    queue::Store again;
    got = load_ok(dir.str(), again);
    CHECK(got.base == meta);
    std::vector<raft::Entry> want = entries(51, 52);
    want.push_back(entry_for(53, 8));
    CHECK(got.entries == want);
}

TEST_CASE("install without a reopen: writes after it continue from the snapshot") {
    TempDir dir("install-live");
    queue::Store source;
    fill_other(source, 3, raft::Millis(log_time_of(20)));
    {
        auto db = open_db(dir.str(), true);
        REQUIRE(db->write({log_write(1, 30)}, {}).ok);
        REQUIRE(db->install(snapshot_of(source, meta_of(20), {5, 1, 20})).ok);
        // The writer's idea of the log was reset too: appending 21.. is no gap, and
        // a trim after the snapshot deletes only what came after it.
        REQUIRE(db->write({log_write(21, 25)}, {}).ok);
        AppliedState a = apply_records(source, 21, 23);
        a.trim = meta_of(22);
        REQUIRE(db->write({}, {a}).ok);
        // The trim is done once the applied state is in files.
        REQUIRE(db->flush().ok);
        REQUIRE(db->write({}, {}).ok);
    }
    queue::Store store;
    const auto got = load_ok(dir.str(), store);
    CHECK(got.base == meta_of(22));
    CHECK(got.entries == entries(23, 25));
    CHECK(got.applied_index == 23);
    CHECK(contents(store) == contents(source));
}

TEST_CASE("a checkpoint keeps the state at its index while writes go on") {
    TempDir dir("checkpoint");
    auto db = open_db(dir.str(), true);
    queue::Store live;
    REQUIRE(db->write({log_write(1, 20)}, {apply_records(live, 1, 10)}).ok);
    const StoreContents at10 = contents(live);
    auto cp = db->checkpoint(meta_of(10));
    CHECK(cp->meta() == meta_of(10));

    // Everything the view must not see: new tasks, a deleted one, a new store meta,
    // and a trim of the log.
    auto write_more = [&, next = std::uint64_t(11)]() mutable {
        if (next > 17) return;
        if (next == 11) REQUIRE(live.apply(queue::Delete{"q", "k2"}, log_time_of(11)).ok());
        AppliedState a = apply_records(live, next + 1, next + 2);
        a.trim = meta_of(next);
        REQUIRE(db->write({}, {a}).ok);
        next += 3;
    };
    queue::Store fresh;
    SECTION("all written before reading") {
        for (int i = 0; i < 4; ++i) write_more();
        CHECK(read_checkpoint(cp, fresh, 1 << 20) == 1);
    }
    SECTION("written between chunks of one pair each") {
        CHECK(read_checkpoint(cp, fresh, 1, write_more) == 10);
    }
    CHECK_FALSE(live.get("q", "k2"));
    CHECK(live.task_count() > 10);
    CHECK(fresh.get("q", "k2"));
    CHECK(fresh.task_count() == 10);
    CHECK(contents(fresh) == at10);

    // A second reader of the same checkpoint sees the same, from the start.
    queue::Store twice;
    read_checkpoint(cp, twice, 100);
    CHECK(contents(twice) == at10);
}

TEST_CASE("a checkpoint sent to another node and installed there reproduces the store") {
    TempDir leader_dir("cp-leader"), follower_dir("cp-follower");
    auto leader = open_db(leader_dir.str(), true);
    queue::Store store;
    REQUIRE(leader->write({log_write(1, 40)}, {apply_records(store, 1, 37)}).ok);
    auto cp = leader->checkpoint(meta_of(37));

    storage::SnapshotInstall snap;
    snap.meta = cp->meta();
    snap.hard_state = {term_of(40), 1, 37};
    storage::Checkpoint::Reader reader(cp);
    snap.store_meta_sealed = reader.store_meta();
    for (bool more = true; more;) {
        std::string chunk;
        more = reader.next(chunk, 200);  // several pairs per chunk, none split
        REQUIRE(storage::split_pairs(chunk, snap.tasks));
    }
    CHECK(snap.tasks.size() == 37);
    {
        auto follower = open_db(follower_dir.str(), true);
        REQUIRE(follower->write({log_write(1, 5, 1)}, {}).ok);
        REQUIRE(follower->install(snap).ok);
    }
    queue::Store installed;
    const auto got = load_ok(follower_dir.str(), installed);
    CHECK(contents(installed) == contents(store));
    CHECK(got.base == meta_of(37));
    CHECK(got.applied_index == 37);
    CHECK(got.entries.empty());
}

TEST_CASE("a checkpoint of an empty database is empty and loads") {
    TempDir dir("checkpoint-empty");
    auto db = open_db(dir.str(), true);
    auto cp = db->checkpoint({});
    storage::Checkpoint::Reader reader(cp);
    std::string chunk;
    CHECK_FALSE(reader.next(chunk, 1000));
    CHECK(chunk.empty());
    queue::Store store;
    CHECK(storage::load_store_meta(store, reader.store_meta()));
    CHECK(store.task_count() == 0);
}

TEST_CASE("sealed records from a checkpoint are checked when loaded") {
    queue::Store store;
    const std::string key = storage::task_key("q", "k1");
    queue::Store source;
    apply_records(source, 1, 2);
    const std::string encoded = contents(source).tasks.at({"q", "k1"});
    const std::string sealed = storage::seal(encoded, key);
    CHECK(storage::load_task_record(store, key, sealed));
    std::string bad = sealed;
    bad.back() = char(bad.back() ^ 1);
    CHECK_FALSE(storage::load_task_record(store, storage::task_key("q", "k9"), bad));
    // Moved under another key.
    CHECK_FALSE(storage::load_task_record(store, storage::task_key("q", "k2"), sealed));
    CHECK_FALSE(storage::load_task_record(store, "", sealed));
    CHECK_FALSE(store.get("q", "k2"));
    CHECK_FALSE(store.get("q", "k9"));

    const std::string meta = storage::seal_store_meta(source.encode_meta());
    CHECK(storage::load_store_meta(store, meta));
    CHECK_FALSE(storage::load_store_meta(store, meta.substr(0, meta.size() - 1)));
    CHECK_FALSE(storage::load_store_meta(store, storage::seal(source.encode_meta(), "applied")));
}

TEST_CASE("split_pairs reads what append_pair wrote and refuses truncated input") {
    const std::vector<std::pair<std::string, std::string>> want{
        {"a", "first value"},
        {"", ""},
        {std::string("\0\0\x01k", 4), std::string(300, '\xff')},
        {"last", "v"},
    };
    std::string chunk;
    std::vector<std::size_t> boundaries{0};
    for (const auto& [k, v] : want) {
        storage::append_pair(chunk, k, v);
        boundaries.push_back(chunk.size());
    }
    std::vector<std::pair<std::string, std::string>> got;
    REQUIRE(storage::split_pairs(chunk, got));
    CHECK(got == want);

    for (std::size_t n = 0; n < chunk.size(); ++n) {
        INFO("prefix of " << n << " bytes");
        std::vector<std::pair<std::string, std::string>> part;
        const bool at_boundary =
            std::find(boundaries.begin(), boundaries.end(), n) != boundaries.end();
        CHECK(storage::split_pairs(std::string_view(chunk).substr(0, n), part) == at_boundary);
    }
    // A length that claims more than there is.
    std::string lying;
    storage::append_pair(lying, "k", "value");
    lying[4 + 1 + 3] = char(lying[4 + 1 + 3] + 1);  // value length 6, 5 bytes follow
    CHECK_FALSE(storage::split_pairs(lying, got));
    lying = std::string("\xff\xff\xff\xff", 4) + "k";
    CHECK_FALSE(storage::split_pairs(lying, got));
}
