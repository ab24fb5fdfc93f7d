// The node's RocksDB: the Raft log and hard state, and the applied task state.
//
// Column families (docs/internals/replication.md): `log` (index -> term, log time, type, data),
// `meta` (hard state, applied index, log base, store-wide state), `tasks` ((queue, key) -> encoded
// task), `overlay` (an autonomous node's writes not merged yet, docs/autonomy.md: (queue,
// key) -> queue::encode_overlay_record). Every value starts with a CRC-32C of
// its key and body; a record whose checksum does not match is reported as corruption and
// never served.
//
// A checkpoint is a RocksDB snapshot of `tasks` and `meta` taken right after the
// applied state of some index was written: it is the Raft snapshot a lagging follower
// is sent, read in chunks while writes go on.
//
// Thread-safety: one writer at a time (storage/writer.h) calls write/install/checkpoint; load
// runs before that thread starts. Reading a Checkpoint is safe from any one thread
// while the writer runs (RocksDB snapshots are immutable views).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "queue/store.h"
#include "raft/types.h"
#include "storage/pairs.h"
#include "storage/writes.h"

namespace rocksdb {
class WriteBatch;
class DB;
class Env;
class ColumnFamilyHandle;
class Iterator;
class Snapshot;
}  // namespace rocksdb

namespace dueq::storage {

struct Status {
    bool ok = true;
    std::string message;
    static Status error(std::string m) { return Status{false, std::move(m)}; }
};

class Database;
class FlushedApplied;

// A consistent view of the applied state at one index. Releasing the last reference
// releases the RocksDB snapshot. The Database must outlive every Checkpoint and Reader.
class Checkpoint {
  public:
    ~Checkpoint();
    const raft::SnapshotMeta& meta() const { return meta_; }

    // Reads the view in order. Each call appends up to about max_bytes of
    // length-prefixed (key, sealed record) pairs to `out`; returns false once the
    // view is exhausted (out then has the last ones, possibly none).
    class Reader {
      public:
        explicit Reader(std::shared_ptr<const Checkpoint> cp);
        ~Reader();
        bool next(std::string& out, std::size_t max_bytes);
        // The store-wide record (meta/store) of the view, sealed (an empty one if the view
        // has none). A read error shows in status().
        std::string store_meta();
        Status status() const;

      private:
        std::shared_ptr<const Checkpoint> cp_;
        std::unique_ptr<rocksdb::Iterator> it_;
        Status meta_status_;
    };

  private:
    friend class Database;
    Checkpoint() = default;
    Database* db_ = nullptr;
    const rocksdb::Snapshot* snap_ = nullptr;
    raft::SnapshotMeta meta_;
};

class Database {
  public:
    // Opens or creates the database in `path`. `sync`: whether log writes are fsynced
    // (the `storage.fsync` config: "always" = true). `env`: RocksDB's environment, null
    // for the default; tests pass one that can drop unsynced writes.
    static std::unique_ptr<Database> open(const std::string& path, bool sync, Status& status,
                                          rocksdb::Env* env = nullptr);
    ~Database();

    // Restart: loads the applied state into `store` (which must be empty) and the log.
    Status load(queue::Store& store, Loaded& out);
    // About how many bytes the task records take uncompressed (for a load to plan by).
    std::uint64_t raw_task_bytes() const;
    // Which member of which cluster this data dir belongs to: the node writes it once, at
    // its first start, and checks it at every later one. Empty when none was written.
    Status read_member(std::string& record) const;
    Status write_member(std::string_view record);  // synced

    // Writes log writes and overlay writes as one batch, synced if any of them asks for
    // it and the sync policy says so (group commit); then the applied states as a second
    // batch, without RocksDB's WAL. The applied state is durable once RocksDB flushes it
    // to files (a restart replays the log from the last one there), so a trim of the log
    // waits until the applied state it came with is in files; it is then done with a
    // later write.
    // `written`, if given, gets the batches' size and whether they were synced.
    struct Written {
        std::uint64_t bytes = 0;
        bool synced = false;
    };
    Status write(const std::vector<LogWrite>& logs, const std::vector<AppliedState>& applied,
                 const std::vector<OverlayWrite>& overlay = {}, Written* written = nullptr);
    // Replaces the log, the hard state and the applied state with a snapshot; synced.
    Status install(const SnapshotInstall& snap);
    // A view of what is written now, which must be the applied state at `meta.index`.
    std::shared_ptr<const Checkpoint> checkpoint(const raft::SnapshotMeta& meta);

    bool syncs() const { return sync_; }
    // A clean stop's last write: RocksDB's memtables go to files, so that the next start
    // has no WAL to replay (about 0.8 s for the 256 MiB it may hold) and no log to apply
    // again, and the log trims that waited for it are done. Only once the storage thread
    // has stopped (or in a test, between writes).
    Status flush();
    // Stops RocksDB's flushes and compactions and waits for the running ones to end (the
    // power-cut harness: nothing may read the files while they go back to what was synced).
    void halt_background_work();

  private:
    friend class Checkpoint;
    Database() = default;
    rocksdb::DB* db_ = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // default, log, meta, tasks, overlay
    bool sync_ = true;
    std::uint64_t last_log_index_ = 0, first_log_index_ = 1;
    // write()'s batches (the logged one, the applied state's), kept between writes: their
    // buffers have grown to a usual batch's size once, instead of growing (and copying
    // what they hold) while every batch is built.
    std::unique_ptr<rocksdb::WriteBatch> batch_, applied_batch_;
    // Up to which applied index the applied state is in RocksDB's files, and what of the
    // log a flush leaves out (flushed_applied.h).
    std::shared_ptr<FlushedApplied> flushed_applied_;
    std::uint64_t last_applied_written_ = 0;
    void trim_log(rocksdb::WriteBatch& batch);
    // The parts of write(): each adds to a batch; add_logs and add_overlay return whether
    // a write asked to be synced, add_applied the last applied index.
    bool add_logs(rocksdb::WriteBatch& batch, const std::vector<LogWrite>& logs);
    std::uint64_t add_applied(rocksdb::WriteBatch& states,
                              const std::vector<AppliedState>& applied);
    bool add_overlay(rocksdb::WriteBatch& batch, const std::vector<OverlayWrite>& overlay);
    // After open: what of the applied state is durable, and where the log starts and ends.
    void find_extent();
    // The parts of load(), in order.
    Status load_positions(Loaded& out) const;  // applied index, hard state, log base
    Status load_tasks(queue::Store& store, Loaded& out) const;
    Status load_overlay(Loaded& out) const;
    Status load_log(Loaded& out) const;
    // meta/`key` into `value`, its body (of `size` bytes, if not 0) into `body`: empty if
    // there is no such record.
    Status read_meta(std::string_view key, std::size_t size, std::string& value,
                     std::string_view& body) const;
};

// Record encoding, exposed for tests: CRC-32C (4 bytes, big-endian) + body. The CRC
// covers the record's key too, so a valid value stored under another key is caught.
std::string seal(std::string_view body, std::string_view key = {});
// nullopt: checksum mismatch.
std::optional<std::string_view> unseal(std::string_view record, std::string_view key = {});
std::string task_key(std::string_view queue, std::string_view key);
// The (queue, key) of a task_key; nullopt if it is malformed.
std::optional<std::pair<std::string_view, std::string_view>> split_task_key(std::string_view k);
// Decodes one record of the `log` column family (key: be64 index; value: sealed be64
// term, be64 time, u8 type, data); nullopt if the key is not 8 bytes, the checksum does
// not match, the body is short or the entry type is unknown.
std::optional<raft::Entry> decode_log_record(std::string_view key, std::string_view value);
// Loads one sealed tasks record; false if it is corrupt. With a store rather than a
// Loader, the record is in the store's indexes on return.
bool load_task_record(queue::Store::Loader& loader, std::string_view key, std::string_view sealed);
bool load_task_record(queue::Store& store, std::string_view key, std::string_view sealed);
// Loads a sealed meta/store record; false if it is corrupt.
bool load_store_meta(queue::Store::Loader& loader, std::string_view sealed);
bool load_store_meta(queue::Store& store, std::string_view sealed);
// A store holding exactly the records of a snapshot (a stream a follower received, a
// backup being restored), or null if one of them does not decode.
std::unique_ptr<queue::Store> store_of(const SnapshotInstall& records);
// Seals a store-meta body the way the meta column family holds it.
std::string seal_store_meta(std::string_view body);

}  // namespace dueq::storage
