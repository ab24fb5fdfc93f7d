// Helpers shared by the storage tests: temporary directories, building Raft log entries
// and applied states from a real queue::Store, loading a database back, comparing
// stores, and raw access to the RocksDB files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <ostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <rocksdb/db.h>

#include "queue/command.h"
#include "queue/store.h"
#include "storage/database.h"

// Printers, so that a failed comparison shows the values.
namespace dueq::raft {
std::ostream& operator<<(std::ostream& os, const Entry& e);
std::ostream& operator<<(std::ostream& os, const HardState& hs);
std::ostream& operator<<(std::ostream& os, const SnapshotMeta& m);
}  // namespace dueq::raft

namespace dueq::test {

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
public:
    explicit TempDir(const std::string& name);
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::string str() const { return path_.string(); }

private:
    std::filesystem::path path_;
};

// Opens the database or fails the test with its message.
std::unique_ptr<storage::Database> open_db(const std::string& path, bool sync,
                                           rocksdb::Env* env = nullptr);

// The log time of entry `index` in these tests: fixed, so runs are reproducible.
inline std::int64_t log_time_of(std::uint64_t index) {
    return 1'700'000'000'000 + std::int64_t(index) * 10;
}
// The term of entry `index` unless a test says otherwise: a new term every 4 entries,
// so that a term mixed up with another entry's shows.
inline raft::Term term_of(std::uint64_t index) {
    return 1 + index / 4;
}
// Entry `index`: a Put of key "k<index>" in queue "q" with a payload naming it.
queue::Put put_for(std::uint64_t index);
raft::Entry entry_for(std::uint64_t index, raft::Term term = 0);  // 0: term_of(index)
// Entries [from, to]; `term` as for entry_for.
std::vector<raft::Entry> entries(std::uint64_t from, std::uint64_t to, raft::Term term = 0);
// A synced LogWrite of entries [from, to].
storage::LogWrite log_write(std::uint64_t from, std::uint64_t to, raft::Term term = 0);
// The snapshot meta naming entry `index` as entry_for made it.
raft::SnapshotMeta meta_of(std::uint64_t index);

// Applies entries [from, to] to `store` and drains what changed into an AppliedState.
storage::AppliedState apply_records(queue::Store& store, std::uint64_t from, std::uint64_t to);

// Loads the database at `path` (opened with the default environment) into `store` and
// `out`; returns load's status.
storage::Status load_db(const std::string& path, queue::Store& store, storage::Loaded& out);
// The same, failing the test unless load succeeds.
storage::Loaded load_ok(const std::string& path, queue::Store& store);
// Loads a database that must not load (checked); returns load's message.
std::string load_error(const std::string& path);

// Everything a store holds: (queue, key) -> encoded task, and the encoded meta.
struct StoreContents {
    std::map<std::pair<std::string, std::string>, std::string> tasks;
    std::string meta;
    bool operator==(const StoreContents&) const = default;
};
StoreContents contents(const queue::Store& store);

// Copies a closed database directory (to damage a copy and keep the original).
void copy_dir(const std::filesystem::path& from, const std::filesystem::path& to);

// True if the two tasks are the same in every field get returns.
bool same_task(const queue::TaskView& a, const queue::TaskView& b);

// The log's key encoding (big-endian index), as database.cpp stores it.
std::string log_key(std::uint64_t index);

// The database's RocksDB opened directly with all its column families, to read and
// damage records behind the Database class's back. Closed by the destructor.
class RawDb {
public:
    explicit RawDb(const std::string& path);
    ~RawDb();
    rocksdb::ColumnFamilyHandle* cf(const std::string& name) const;
    std::string get(const std::string& cf, const std::string& key) const;  // fails if absent
    void put(const std::string& cf, const std::string& key, const std::string& value);
    void del(const std::string& cf, const std::string& key);
    std::vector<std::string> keys(const std::string& cf) const;
    // Flips the bits of byte `at` (counted from the end if negative) of a stored value.
    void flip_byte(const std::string& cf, const std::string& key, int at);

private:
    rocksdb::DB* db_ = nullptr;
    std::vector<std::string> names_;
    std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

}  // namespace dueq::test
