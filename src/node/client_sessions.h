// Client sessions and release on disconnect (docs/semantics.md). A session outlives its
// connection for a grace period, so that a client that reconnects and resumes it (hello
// with its session) keeps the tasks it holds. A session that took tasks and stays gone
// for the whole grace period is over: the node then proposes ReleaseSession, and the
// tasks it held with release_on_disconnect come back on every replica.
//
// Which sessions hold such tasks is replicated state (the store records each lease's
// session); which of them are connected is not. A new leader therefore gives every
// session that holds one a fresh grace period (took_over), and any node lets a client
// resume any session (resume), so a client that follows the leadership keeps its tasks.
//
// Reads no clock: time comes in as arguments, and the node's timer calls expire() at
// next_deadline(). Not thread-safe: the node's event loop owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "queue/command.h"

namespace dueq::node {

class ClientSessions {
  public:
    // Session ids are (counter << kNodeBits) | node_bits, counting up from `first`:
    // unique across the cluster while members' Raft ids differ in their low kNodeBits
    // bits and a node's counter starts past what it gave before (the clock, scaled).
    static constexpr int kNodeBits = 8;
    ClientSessions(std::uint64_t node_bits, std::uint64_t first, std::int64_t grace_ms)
        : node_bits_(node_bits & ((1u << kNodeBits) - 1)), next_(first), grace_ms_(grace_ms) {}

    // The session of a new connection.
    queue::SessionId open();
    // The connection of session `current` asks to speak for `wanted` instead (any node
    // accepts any session: it may have been made by a leader that is gone). False only
    // for session 0. Its grace period stops, and `current` loses this connection.
    // `holds_leases`: the store says `wanted` holds tasks with release_on_disconnect.
    bool resume(queue::SessionId current, queue::SessionId wanted, std::int64_t now,
                bool holds_leases);
    // This node became the leader: `holders` hold tasks with release_on_disconnect. Each
    // not connected here gets a full grace period from `now`.
    void took_over(const std::vector<queue::SessionId>& holders, std::int64_t now);
    // A connection of the session closed.
    void close(queue::SessionId session, std::int64_t now);
    // A take of the session handed out tasks it holds with release_on_disconnect (the
    // session may be gone already: its grace period starts now).
    void took_tasks(queue::SessionId session, std::int64_t now);
    // The sessions whose grace period ran out by `now`, forgotten: release each.
    std::vector<queue::SessionId> expire(std::int64_t now);
    std::optional<std::int64_t> next_deadline() const;
    std::size_t size() const { return sessions_.size(); }

  private:
    struct Session {
        int connections = 0;
        bool took_tasks = false;
        std::int64_t grace_until = -1;  // -1: not in its grace period
    };
    void start_grace(queue::SessionId id, Session& s, std::int64_t now);
    void stop_grace(queue::SessionId id, Session& s);

    std::uint64_t node_bits_;
    std::uint64_t next_;
    std::int64_t grace_ms_;
    std::unordered_map<queue::SessionId, Session> sessions_;
    std::set<std::pair<std::int64_t, queue::SessionId>> graces_;
};

}  // namespace dueq::node
