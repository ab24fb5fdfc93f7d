// The path of a command from a client to its answer, above the Raft shell: proposing it,
// parking a blocking take until a task comes due, waking parked takes (counting woken
// takes not applied yet against the due tasks), re-parking a take whose entry found
// nothing, the Advance the leader logs when leases and delays run out, and the sessions
// whose end releases their tasks. dueqd runs it under its event loop (node.h); the
// simulator (tests/sim) runs the same class under simulated time.
//
// Reads no clock: time comes in as arguments. The owner calls on_timer() at
// next_deadline() and on_batch_applied() after each batch of applied entries.
// Not thread-safe: one owner thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "node/client_sessions.h"
#include "node/take_waiters.h"
#include "queue/command.h"
#include "shell/raft_shell.h"
#include "wire/limits.h"

namespace dueq::node {

struct WritePathSettings {
    std::uint32_t max_take_count = limits::kMaxTakeCount.dflt;      // [limits]: per take
    std::size_t max_waiting_takes = limits::kMaxWaitingTakes.dflt;  // [limits]
    std::int64_t session_grace_ms = 5000;
    std::uint64_t node_bits = 1;      // low bits of this node's session ids
    std::uint64_t first_session = 0;  // session counter start (e.g. the clock << 12)
};

class WritePath {
  public:
    WritePath(const WritePathSettings& settings, shell::RaftShell& shell);

    ClientSessions& sessions() { return sessions_; }
    // hello {session}: the connection of `current` speaks for `wanted` from now on.
    bool resume_session(queue::SessionId current, queue::SessionId wanted, std::int64_t now);
    // As leader, the first entry of its term applied (so every entry committed before is
    // applied too): the sessions that hold leases get their grace period here.
    void on_term_started(std::int64_t now);

    // A client's command. A take with wait_ms > 0 that finds nothing due on the leader
    // waits here (parked) instead of going into the log: then it returns true, and the
    // owner's timer must look at next_deadline() again.
    bool submit(queue::Command cmd, std::int64_t wait_ms, ReplyTo to, std::int64_t now);
    // Proposes without waiting (the node's own commands: settings, ReleaseSession,
    // Advance). Returns the entry's index, or 0 if refused (and answered).
    raft::Index propose(queue::Command cmd, ReplyTo to, std::int64_t now);
    // After the shell applied a batch; `wrote`: one of them was a command.
    void on_batch_applied(bool wrote, std::int64_t now);
    // After each turn of the shell (process_ready). When this node stops leading, or
    // loses its links to a majority, its parked takes are answered at once (not_leader
    // or no_quorum, not applied), so that their clients go and park on the new leader
    // instead of waiting out their deadline here.
    void after_ready(std::int64_t now);
    // Parked takes that timed out, the Advance, sessions whose grace period ran out.
    void on_timer(std::int64_t now);
    // When on_timer() has something to do next (nullopt: nothing is pending).
    std::optional<std::int64_t> next_deadline() const;

  private:
    // Parks a take; false (and answered `unavailable`) when too many wait.
    bool wait_for_task(ReplyTo to, queue::Take take, std::int64_t deadline);
    void wake_waiters(const std::string& queue, std::int64_t now);
    // Proposes; a take that finds nothing when applied waits again until `wait_until`.
    raft::Index propose_until(queue::Command cmd, ReplyTo to,
                              std::optional<std::int64_t> wait_until, std::int64_t now);
    void on_outcome(shell::Outcome& o, const ReplyTo& to);
    std::int64_t store_now(std::int64_t now) const;

    WritePathSettings settings_;
    shell::RaftShell& shell_;
    ClientSessions sessions_;
    TakeWaiters waiters_;                 // blocking takes parked on the leader
    bool leading_ = false;                // leader with links to a majority, last turn
    std::int64_t events_seen_until_ = 0;  // store events up to this time were handled
    std::int64_t last_advance_ms_ = 0;    // when the last Advance was proposed
    raft::Index advance_index_ = 0;       // an Advance proposed and not applied yet
    static constexpr std::int64_t kAdvanceEveryMs = 250;
};

}  // namespace dueq::node
