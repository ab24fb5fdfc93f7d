// The backups a node streams to clients (the `backup` op; docs/operations.md, "Backing
// up"). Each reads one storage::Checkpoint, a RocksDB view of the applied state at one
// index, so what it streams is consistent however long the client takes while writes go
// on. The client asks for chunk after chunk on the connection that started the backup;
// chunk 0 is the sealed store-wide record, the others hold (key, sealed task) pairs.
//
// Bounded: at most limits::kMaxBackups at once (each pins a RocksDB snapshot), a stream
// not asked for a chunk in limits::kBackupIdleMs is dropped, and one ends with its
// connection. A chunk is read on the event loop, about limits::kBackupChunkBytes at a time.
//
// Thread-safety: one owner thread (the node's event loop).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "storage/database.h"

namespace dueq::node {

class Backups {
  public:
    struct Chunk {
        std::uint64_t backup = 0;
        std::uint32_t seq = 0;
        raft::SnapshotMeta meta;
        std::string data;
        bool last = false;
    };

    // Holds a place for a backup whose checkpoint is being taken; false when
    // limits::kMaxBackups are running or held.
    bool reserve();
    void unreserve();
    // Starts a stream over `cp` in the place reserve() held, for `owner` (the connection's
    // session); returns its chunk 0. A read error of the view shows in `problem` (and no
    // stream is left).
    std::optional<Chunk> begin(std::shared_ptr<const storage::Checkpoint> cp, std::uint64_t owner,
                               std::int64_t now, std::string& problem);
    // Chunk `seq` of backup `backup`, which `owner` started and whose chunk seq-1 it was
    // sent. Otherwise, or on a read error, nullopt and why in `problem`; a stream asked out
    // of order is dropped. The stream ends with its last chunk.
    std::optional<Chunk> next(std::uint64_t backup, std::uint64_t owner, std::uint32_t seq,
                              std::int64_t now, std::string& problem);
    // The connection with this session closed: its streams end.
    void end_owner(std::uint64_t owner);
    // Drops the streams not asked for a chunk in limits::kBackupIdleMs.
    void sweep(std::int64_t now);
    std::size_t running() const { return streams_.size(); }
    std::uint64_t completed() const { return completed_; }

  private:
    struct Stream {
        std::uint64_t owner = 0;
        std::shared_ptr<const storage::Checkpoint> checkpoint;
        std::unique_ptr<storage::Checkpoint::Reader> reader;
        std::uint32_t next_seq = 1;
        std::int64_t last_asked = 0;
    };
    std::map<std::uint64_t, Stream> streams_;
    std::size_t reserved_ = 0;
    std::uint64_t next_id_ = 1;
    std::uint64_t completed_ = 0;
};

}  // namespace dueq::node
