// The node's RocksDB: the write-ahead log of commands and the applied task state.
//
// Column families (DESIGN §3): `log` (index -> log time + command), `meta` (applied
// index, store-wide state), `tasks` ((queue, key) -> encoded task), `overlay` (reserved
// for autonomous mode). Every value starts with a CRC-32C of the rest; a record whose
// checksum does not match is reported as corruption and never served.
//
// Thread-safety: RocksDB itself is thread-safe, but this class expects one writer (the
// storage thread) and reads only during open/load, before that thread starts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocksdb {
class DB;
class Env;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace dueq::queue {
class Store;
}

namespace dueq::storage {

struct Status {
    bool ok = true;
    std::string message;
    static Status error(std::string m) { return Status{false, std::move(m)}; }
};

struct LogRecord {
    std::uint64_t index = 0;
    std::int64_t time = 0;  // the log time the command is applied at
    std::string command;    // queue::encode_command
};

struct TaskChange {
    std::string queue, key;
    std::optional<std::string> encoded;  // nullopt: the task is gone
};

// What applying commands up to `applied_index` changed, written as one atomic batch.
struct AppliedState {
    std::uint64_t applied_index = 0;
    std::int64_t applied_time = 0;
    std::vector<TaskChange> changes;
    std::string store_meta;          // queue::Store::encode_meta
    std::uint64_t trim_through = 0;  // log entries <= this may be deleted (0: none)
};

class Database {
  public:
    // Opens or creates the database in `path`. `sync`: whether log appends are fsynced
    // (the `storage.fsync` config: "always" = true). `env`: RocksDB's environment, null
    // for the default; tests pass one that can drop unsynced writes.
    static std::unique_ptr<Database> open(const std::string& path, bool sync, Status& status,
                                          rocksdb::Env* env = nullptr);
    ~Database();

    // Restart: loads the applied state into `store` (which must be empty) and returns
    // the log entries after the applied index, in order, for the caller to replay.
    Status load(queue::Store& store, std::uint64_t& applied_index, std::int64_t& applied_time,
                std::vector<LogRecord>& tail);

    // Writes appended log records and applied states in one batch; synced if any log
    // record is in it and the sync policy says so. One call = one fsync (group commit).
    Status write(const std::vector<LogRecord>& appends, const std::vector<AppliedState>& applied);

    std::uint64_t last_log_index() const { return last_log_index_; }
    std::uint64_t first_log_index() const { return first_log_index_; }
    bool syncs() const { return sync_; }

  private:
    Database() = default;
    rocksdb::DB* db_ = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // default, log, meta, tasks, overlay
    bool sync_ = true;
    std::uint64_t last_log_index_ = 0, first_log_index_ = 1;
};

// Record encoding, exposed for tests: CRC-32C (4 bytes, big-endian) + body. The CRC
// covers the record's key too, so a valid value stored under another key is caught.
std::string seal(std::string_view body, std::string_view key = {});
// nullopt: checksum mismatch.
std::optional<std::string_view> unseal(std::string_view record, std::string_view key = {});
std::string task_key(std::string_view queue, std::string_view key);

}  // namespace dueq::storage
