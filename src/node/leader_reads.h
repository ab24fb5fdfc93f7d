// Reads with consistency "leader" (docs/protocol.md): answered only once this node has
// confirmed it still leads, by the core's ReadIndex (Raft §6.4: the read waits for a
// heartbeat round sent after it arrived to be answered by a majority, and for the store
// to apply up to the commit index the read saw). A leader cut off from the others never
// gets that confirmation, so it never answers a stale read: its reads end `not_leader`
// once it steps down, or `timeout`.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

#include "raft/ready.h"
#include "raft/types.h"
#include "wire/error_code.h"

namespace dueq::shell {
class RaftShell;
}

namespace dueq::node {

class LeaderReads {
  public:
    // `ok`: serve the read from the store now; any other code: refuse it with that code.
    using Done = std::function<void(wire::Code code, const char* why)>;

    // `schedule`: have flush() called soon (before the shell's next Ready).
    LeaderReads(shell::RaftShell& shell, std::int64_t timeout_ms, std::function<void()> schedule);

    // Queues a read; `done` hears once, maybe at once. Reads queued between two flushes
    // share one read point, so a burst costs one heartbeat round, not one per read.
    void read(Done done, std::int64_t now);
    // Asks the core for one read point for every read queued since the last flush.
    void flush();
    // The core's answer (shell::Hooks::on_read_state).
    void on_read_state(const raft::ReadState& rs);
    // After a batch of entries was applied: serves the reads whose index is now applied.
    void on_applied();
    // Each tick: refuses every read once this node no longer leads, and those past their
    // deadline (a read the core dropped, or a round a majority never answered).
    void on_tick(bool leader, std::int64_t now);

    std::size_t pending() const { return reads_.size(); }

  private:
    struct Read {
        std::uint64_t context = 0;
        std::int64_t deadline = 0;
        raft::Index index = 0;  // the confirmed read point (0: not yet confirmed)
        Done done;
    };
    void serve_applied();
    void refuse_all(wire::Code code, const char* why);

    shell::RaftShell& shell_;
    std::int64_t timeout_ms_;
    std::function<void()> schedule_;
    std::uint64_t next_context_ = 1;  // the context the reads queued now will share
    bool queued_ = false;             // reads wait for flush() under next_context_
    std::deque<Read> reads_;          // by context: the core confirms reads in the order asked
};

}  // namespace dueq::node
