// What the leader knows about one follower's log, and how fast it may send to it
// (flow control). One Progress per peer, owned by the leader's tracker; reset at every
// election.
//
// States (after etcd's tracker, reshaped):
//  probe:     the leader does not know where the logs match. It sends one append at a
//             time and waits for the answer (or the next heartbeat interval).
//  replicate: logs match up to `match`; appends are pipelined optimistically from
//             `next`, at most max_inflight_msgs / max_inflight_bytes unacknowledged.
//  snapshot:  a snapshot is on its way; nothing else is sent until it is acknowledged
//             or given up on.
#pragma once

#include <cstdint>
#include <deque>

#include "raft/types.h"

namespace dueq::raft {

// The unacknowledged appends to one follower: (last index, bytes) of each, in order.
class Inflights {
  public:
    Inflights(std::uint64_t max_msgs, std::uint64_t max_bytes)
        : max_msgs_(max_msgs), max_bytes_(max_bytes) {}
    void add(Index last, std::uint64_t bytes);
    // Forgets every message whose last index is <= index (the follower has them).
    void free_to(Index index);
    void free_first();
    void clear();
    bool full() const { return msgs_.size() >= max_msgs_ || bytes_ >= max_bytes_; }
    std::size_t count() const { return msgs_.size(); }
    std::uint64_t bytes() const { return bytes_; }

  private:
    struct Flight {
        Index last;
        std::uint64_t bytes;
    };
    std::uint64_t max_msgs_, max_bytes_;
    std::deque<Flight> msgs_;
    std::uint64_t bytes_ = 0;
};

enum class ProgressState : std::uint8_t { probe, replicate, snapshot };

struct Progress {
    Progress(Index next_index, std::uint64_t max_msgs, std::uint64_t max_bytes)
        : next(next_index), inflights(max_msgs, max_bytes) {}

    Index match = 0;  // highest index known to be durable on the follower and to match
    Index next = 1;   // next index to send
    ProgressState state = ProgressState::probe;
    bool probe_sent = false;        // probe: one append is out, wait before sending another
    Index pending_snapshot = 0;     // snapshot: the index of the snapshot sent
    bool recent_active = false;     // heard from since the last check-quorum round (§6.2)
    int ticks_since_progress = 0;   // ticks since match last advanced (stall detection)
    std::uint64_t acked_round = 0;  // highest heartbeat round the follower answered
    // Bumped whenever the leader stops trusting what it has sent (back to probe, or a
    // snapshot). Appends carry it and replies echo it, so that a rejection of a message
    // sent before the reset (reordered or duplicated) cannot trigger another reset:
    // without this, every stale rejection restarts the pipeline and, under reordering,
    // the number of appends in flight grows without bound.
    std::uint64_t generation = 0;
    Inflights inflights;

    void become_probe();
    void become_replicate();
    void become_snapshot(Index snapshot_index);
    // A successful append_resp for `index`: returns true if match advanced.
    bool on_ack(Index index);
    // May an append be sent now?
    bool paused() const;
    // Records that entries up to `last` (costing `bytes`) were just sent.
    void on_sent(Index last, std::uint64_t bytes, bool has_entries);
};

}  // namespace dueq::raft
