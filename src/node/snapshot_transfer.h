// Snapshots between peers (§5.3), streamed in chunks instead of one message.
//
// The Raft core sends a snapshot message whose data is empty: the state it stands for
// is a storage::Checkpoint (a RocksDB view of the tasks at the snapshot's index). The
// leader's shell hands that message here; chunks of about 1 MiB go out as the peer's
// link drains. The follower collects the chunks and, after the last one, gets back the
// core's message to step; once the core accepts it, the collected records are
// installed. A stream that breaks (a lost chunk, a new leader) is dropped on both
// sides; the core sends the snapshot again when the follower stays behind.
//
// Chunk payload (after the peer frame's kind byte): be64 term, be64 index, be64
// snapshot term, be64 snapshot time, be32 sequence, u8 last, then the body. Chunk 0
// holds the sealed store-wide record; the others hold (key, sealed task) pairs.
//
// Thread-safety: one owner thread (the node's event loop).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "raft/message.h"
#include "storage/database.h"

namespace dueq::node {

class SnapshotTransfer {
  public:
    static constexpr char kKind = 'S';
    // Sends one peer payload; false if the link did not take it.
    using Send = std::function<bool(std::uint64_t to, std::string payload)>;
    using QueuedBytes = std::function<std::size_t(std::uint64_t peer)>;

    // Leader: starts streaming `cp` to m.to for the core's snapshot message `m` (whose
    // meta must be cp's). A stream already running for the same snapshot goes on.
    void start_send(const raft::Message& m, std::shared_ptr<const storage::Checkpoint> cp);
    // Sends the next chunks of every stream while the peer's queue is short.
    void pump(const Send& send, const QueuedBytes& queued);
    void cancel(std::uint64_t peer);
    void cancel_all();
    bool sending_to(std::uint64_t peer) const { return out_.count(peer) > 0; }
    std::uint64_t sent() const { return sent_; }  // streams sent to the end

    // Follower: takes one chunk from `from`. After the last chunk of a complete stream,
    // returns the snapshot message for the core (addressed to `self`). A chunk that
    // cannot belong to a stream (malformed, out of order, over the size cap) drops the
    // stream and says why in `problem`; the leader sends the snapshot again once this
    // node is seen to stay behind.
    std::optional<raft::Message> receive(std::uint64_t from, std::uint64_t self,
                                         std::string_view chunk, std::string& problem);
    // The records of the snapshot just received, until accepted or discarded.
    const storage::SnapshotInstall* received() const { return received_ ? &*received_ : nullptr; }
    void discard_received() { received_.reset(); }
    // The core accepted the snapshot just received: keep its records for installing
    // (they replace those of an earlier accepted one).
    void accept_received() {
        accepted_ = std::move(received_);
        received_.reset();
    }
    // The records of the accepted snapshot at `meta`, for installing (once).
    std::optional<storage::SnapshotInstall> take_received(const raft::SnapshotMeta& meta);
    // A stream whose records add up to more than this is dropped.
    void set_max_stream_bytes(std::uint64_t bytes) { max_stream_bytes_ = bytes; }

  private:
    struct Outgoing {
        raft::Message message;
        std::shared_ptr<const storage::Checkpoint> checkpoint;
        std::unique_ptr<storage::Checkpoint::Reader> reader;
        std::uint32_t next_seq = 0;
        bool done = false;
    };
    struct Incoming {
        raft::Term term = 0;
        raft::SnapshotMeta meta;
        std::uint32_t next_seq = 0;
        std::uint64_t bytes = 0;  // chunk bodies so far
        storage::SnapshotInstall records;
    };
    std::map<std::uint64_t, Outgoing> out_;
    std::map<std::uint64_t, Incoming> in_;
    std::optional<storage::SnapshotInstall> received_;
    std::optional<storage::SnapshotInstall> accepted_;
    std::uint64_t max_stream_bytes_ = std::uint64_t(16) << 30;
    std::uint64_t sent_ = 0;
};

}  // namespace dueq::node
