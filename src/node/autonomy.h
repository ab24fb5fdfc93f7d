// Autonomous mode (docs/autonomy.md): a member cut off from every leader that holds a
// quorum keeps serving the queues that opt in, from its own fork of the store, and
// merges what it did when it follows such a leader again.
//
//   normal --(no quorum leader for after_ms)--> autonomous --(a leader again; the shell
//   rolls the fork back)--> merging --(every overlay record applied as a Merge)--> normal
//
// While autonomous, each command applies to the fork at this node's clock; what it changed
// goes to the overlay (in RAM and in the `overlay` column family, fsynced) before the
// client hears the answer. Blocking takes wait here, leases run out on this node's timer,
// and ended sessions release their tasks, as on a leader. While merging, the overlay is
// sent to the leader as Merge commands in windows of merge_batch, resent until each one
// is seen applied in this node's own log; only then is a record removed, so a crash on
// either side only means sending it again (a Merge applied twice changes nothing).
//
// Reads no clock; the owner calls on_tick() on every tick, on_timer() at next_deadline(),
// and the Storage completion on_persisted(). Not thread-safe: one owner thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "node/client_sessions.h"
#include "node/replier.h"
#include "node/take_waiters.h"
#include "queue/store.h"
#include "shell/raft_shell.h"
#include "storage/writes.h"
#include "wire/limits.h"

namespace dueq::node {

struct AutonomySettings {
    std::int64_t after_ms = 3000;  // 0: never autonomous
    raft::NodeId self = 1;
    std::size_t members = 1;
    std::size_t merge_batch = 256;        // Merge commands in flight at once
    std::int64_t merge_resend_ms = 3000;  // a Merge not seen applied by then is sent again
    std::size_t max_waiting_takes = limits::kMaxWaitingTakes.dflt;
};

// Where overlay writes go; the completion comes back as Autonomy::on_persisted.
class OverlayStorage {
  public:
    virtual ~OverlayStorage() = default;
    // Returns a ticket; on_persisted(t >= ticket) says it is durable (if w.sync).
    virtual std::uint64_t write_overlay(storage::OverlayWrite w) = 0;
};

class Autonomy {
  public:
    enum class Mode { normal, autonomous, merging };
    // Sends Merge commands to the leader (a peer frame in dueqd).
    using SendMerges = std::function<void(raft::NodeId leader, const std::vector<queue::Merge>&)>;

    // What one heal did (the latest), and totals since start.
    struct Counts {
        std::uint64_t served = 0;      // commands applied in autonomous mode
        std::uint64_t merged = 0;      // overlay records seen applied as Merges
        std::uint64_t taken_over = 0;  // ... whose write became the task
        std::uint64_t kept = 0;        // ... dropped: the majority had a newer write
        std::uint64_t both_sides = 0;  // ... for keys written on both sides of the cut
    };

    Autonomy(const AutonomySettings& settings, shell::RaftShell& shell, ClientSessions& sessions,
             OverlayStorage& storage, SendMerges send, std::int64_t now);

    // At start: the overlay as the node left it (records not merged yet).
    bool load(const std::vector<storage::OverlayChange>& stored);

    Mode mode() const { return mode_; }
    bool serving() const { return mode_ == Mode::autonomous; }
    std::int64_t mode_since() const { return since_; }
    std::size_t overlay_size() const { return overlay_.size(); }
    const Counts& last_heal() const { return heal_; }
    const Counts& totals() const { return totals_; }

    void on_tick(std::int64_t now);
    // A client's command while serving(). A take with wait_ms > 0 that finds nothing
    // waits here: then it returns true, and the owner's timer must look at
    // next_deadline() again.
    bool submit(queue::Command cmd, std::int64_t wait_ms, ReplyTo to, std::int64_t now);
    void on_timer(std::int64_t now);
    std::optional<std::int64_t> next_deadline() const;
    void on_persisted(std::uint64_t ticket);

    // Shell hooks.
    void on_fork_ended();
    void on_merge_applied(const queue::Merge& merge, const queue::Result& result);
    // Leader: Merge commands from member `from`; an empty string if proposed, else why not.
    std::string receive_merges(raft::NodeId from, std::vector<queue::Merge> merges,
                               std::int64_t now);

  private:
    using Key = std::pair<std::string, std::string>;  // (queue, key)
    struct Pending {
        std::uint64_t ticket;
        ReplyTo to;
        queue::Command command;
        queue::Result result;
    };
    bool quorum_leader_known() const;
    void enter(std::int64_t now);
    queue::Result apply(queue::Store& fork, queue::Command& cmd, std::int64_t now);
    // Moves what the fork changed into the overlay and onto disk; the answer (if `to`)
    // waits for it, and for every write before it.
    void write_changes(ReplyTo to, queue::Command cmd, queue::Result result);
    void wake_waiters(queue::Store& fork, std::int64_t now);
    void send_merges(std::int64_t now);
    void finish_merge();

    AutonomySettings settings_;
    shell::RaftShell& shell_;
    ClientSessions& sessions_;
    OverlayStorage& storage_;
    SendMerges send_;
    Mode mode_ = Mode::normal;
    std::int64_t since_ = 0;
    std::int64_t now_ = 0;          // the latest time an input carried
    std::int64_t leader_seen_ = 0;  // last time a leader holding a quorum was known
    std::map<Key, queue::OverlayRecord> overlay_;
    std::map<Key, std::int64_t> sent_at_;  // Merges sent and not seen applied yet
    std::deque<Pending> pending_;          // answers waiting for their overlay write
    std::uint64_t last_ticket_ = 0, persisted_ = 0;
    TakeWaiters waiters_;
    Counts heal_, totals_;
};

const char* to_string(Autonomy::Mode m);

}  // namespace dueq::node
