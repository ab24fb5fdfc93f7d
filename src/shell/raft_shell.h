// The Raft shell: the one piece of code that drives the Raft core for a replica of the
// task store. dueqd runs it over RocksDB and the peer mesh; the simulator (tests/sim)
// runs the same class over its in-memory disk and simulated network, so every seed
// exercises what dueqd runs.
//
// It owns the core, the in-memory mirror of the durable log the core reads, the task
// store, the proposals waiting for their entries, and the Ready cycle:
//   1. ready(): messages the core allows to leave early go out at once; the entries and
//      hard state go to Storage::write_log (fsynced when Ready::must_sync says so);
//   2. once Storage reports them durable (on_persisted), the mirror learns them, the
//      remaining messages leave, committed entries are applied to the store at their
//      log time, their proposals are answered, and what the store changed is handed to
//      Storage::write_applied; then advance(), and the next Ready.
// docs/internals/replication.md follows a put and a blocking take through it.
//
// Time: the shell reads no clock. Every input that needs the time takes `now` (ms, the
// caller's clock), used only to stamp new entries (the core does) and for deadlines.
//
// Thread-safety: none; one owner thread calls everything, including the Storage and
// Transport completions (on_persisted, on_checkpoint), which must not be called from
// inside a Storage or Transport call.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "queue/command.h"
#include "queue/store.h"
#include "raft/raft.h"
#include "shell/shell_defect.h"
#include "storage/writes.h"

namespace dueq::shell {

// Where the shell's writes go. Calls return at once; completions come back through
// RaftShell::on_persisted / on_checkpoint on the owner thread, later.
class Storage {
  public:
    virtual ~Storage() = default;
    // Writes the persistence half of a Ready, after everything submitted before it.
    // Returns a ticket; on_persisted(t >= ticket) says it is durable (if w.sync) or
    // written. Tickets grow with each call of write_log, write_applied, install_snapshot.
    virtual std::uint64_t write_log(storage::LogWrite w) = 0;
    // The applied state after applying entries (not synced: a restart replays the log).
    virtual std::uint64_t write_applied(storage::AppliedState s) = 0;
    // Replaces the log, hard state and applied state with the snapshot at `meta`, whose
    // records the caller received with the store it gave RaftShell::step_snapshot.
    // nullopt: no such records (the shell then stops the node). Synced.
    virtual std::optional<std::uint64_t> install_snapshot(const raft::SnapshotMeta& meta,
                                                          const raft::HardState& hs) = 0;
    // Takes a checkpoint (a view a lagging follower can be sent) of the applied state at
    // `meta`, once everything submitted before is written; then on_checkpoint(meta).
    virtual void checkpoint(const raft::SnapshotMeta& meta) = 0;
};

class Transport {
  public:
    virtual ~Transport() = default;
    // Sends a message to m.to. A snapshot message carries no data: the transport sends
    // the checkpoint at m.snapshot->meta, if it holds it.
    virtual void send(const raft::Message& m) = 0;
    // Whether the link to `peer` is up now.
    virtual bool connected(raft::NodeId peer) const = 0;
};

// What a proposal came to; the callback gets exactly one.
struct Outcome {
    queue::Code code = queue::Code::ok;  // ok: applied, see result (which may be a refusal)
    std::string message;                 // when not ok: why, for the client
    queue::Command* command = nullptr;   // when ok: the command as applied
    const queue::Result* result = nullptr;
    raft::Index index = 0;  // when ok: the entry that carried it
    raft::Term term = 0;
    bool local = false;  // answered by a node in autonomous mode, from its fork (no entry)
};
using Done = std::function<void(Outcome&)>;

struct Hooks {
    std::function<void()> schedule;  // input arrived: call process_ready() soon
    // After a Ready's committed entries were applied; `wrote`: one was a command.
    std::function<void(bool wrote)> applied;
    std::function<void()> term_started;  // as leader, the first entry of its term applied
    std::function<void(const std::string&)> fatal;  // the replica cannot go on
    // Observer (the simulator's checks): one applied entry, what it did (null for
    // no-ops) and the tasks it changed. Called before the proposal is answered.
    std::function<void(const raft::Entry&, const queue::Command*, const queue::Result*,
                       std::span<const storage::TaskChange>)>
        on_apply;
    std::function<void(const raft::ReadState&)> on_read_state;
    // The store's fork (autonomous mode) was rolled back: an entry is about to apply or a
    // snapshot to be installed (docs/autonomy.md).
    std::function<void()> fork_ended;
    // A Merge entry applied (on every replica), and what it did.
    std::function<void(const queue::Merge&, const queue::Result&)> merged;
    // The membership in force changed (a configuration entry reached the log or left
    // it), or the one in force became committed: Raft::membership() has it.
    std::function<void()> membership_changed;
};

struct ShellConfig {
    raft::Config raft;
    std::int64_t proposal_timeout_ms = 3000;  // then a proposal is answered `timeout`
    std::int64_t campaign_step_ms = 100;      // fast campaign: this times rank
    std::uint64_t log_keep = 1000;            // entries kept behind a snapshot
    // The applied task state goes to storage once this many entries were applied since
    // it last went, or this long after (whichever first), and before any checkpoint,
    // fork or stop. In between a task changed many times is written once; a restart
    // replays the log after the state it finds (docs/internals/replication.md).
    std::uint64_t state_write_entries = 1;
    std::int64_t state_write_ms = 0;
    // Test-only defects (acting only in builds with DUEQ_PLANTED_BUGS); the store's goes
    // to every store this shell runs, a snapshot's included.
    ShellDefect defect = ShellDefect::none;
    queue::StoreDefect store_defect = queue::StoreDefect::none;
};

class RaftShell {
  public:
    RaftShell(ShellConfig cfg, Storage& storage, Transport& transport, Hooks hooks);
    ~RaftShell();

    // Starts from what storage loaded: `store` holds the applied state at
    // loaded.applied_index. Returns a message if the stored log does not line up.
    std::optional<std::string> start(const storage::Loaded& loaded,
                                     std::unique_ptr<queue::Store> store);

    // --- inputs ---
    void tick(std::int64_t now);
    // A message from peer `from`; an empty string if the core took it, else why it was
    // refused before the core saw it (raft/message_check.h).
    std::string step(raft::NodeId from, const raft::Message& m);
    // A snapshot message whose records the transport received and decoded into `store`.
    // True if the core accepted it: the transport keeps those records for
    // Storage::install_snapshot (and drops them otherwise).
    bool step_snapshot(const raft::Message& m, std::unique_ptr<queue::Store> store);
    void on_link_change(raft::NodeId peer, bool up, std::int64_t now);
    // Proposes `cmd`; `done` hears how it ends (errors included, at once for a refusal).
    // Returns the entry's index, or 0 if refused.
    raft::Index propose(queue::Command cmd, std::int64_t now, Done done);
    // Proposes a membership (raft::Raft::propose_membership); `done` hears ok once it is
    // applied, or why not (invalid_argument with the core's reason for a refusal).
    raft::Index propose_membership(raft::Membership next, std::int64_t now, Done done);
    // A linearizable read point (Raft §6.4); the answer comes to Hooks::on_read_state.
    raft::Status read_index(std::uint64_t context);
    // Autonomous mode: hands what is applied to storage, then forks the store
    // (queue::Store::fork). The fork ends (rollback, then Hooks::fork_ended) before any
    // entry applies or a snapshot is installed, or when end_fork() is called.
    bool fork_store(queue::LeaseId lease_base);
    void end_fork();
    // Hands the applied state to storage now (a clean stop: the restart replays nothing).
    void write_applied_state() {
        if (!failed_ && store_) persist_applied();
    }
    // The store while forked, for the autonomous node's own commands; else nullptr.
    queue::Store* fork() { return store_ && store_->forked() ? store_.get() : nullptr; }
    void process_ready();
    void on_persisted(std::uint64_t ticket);
    // The checkpoint at `meta` is taken. Returns true if it is now the snapshot the log
    // starts from (the one to send to lagging followers).
    bool on_checkpoint(const raft::SnapshotMeta& meta);

    // --- what it holds ---
    const raft::Raft& raft() const { return *raft_; }
    raft::Raft& raft_for_tests() { return *raft_; }
    const raft::MemoryStorage& log() const { return log_; }
    const queue::Store& store() const { return *store_; }
    const raft::SnapshotMeta& applied() const { return applied_; }
    bool is_leader() const { return raft_ && raft_->role() == raft::Role::leader; }
    // This node and the peers it is linked to make a majority.
    bool reaches_quorum() const;
    std::size_t pending_proposals() const { return proposals_.size(); }
    std::uint64_t snapshots_installed() const { return snapshots_installed_; }
    bool busy() const { return inflight_.has_value(); }
    // The latest time an input carried: "now" for what happens as entries apply.
    std::int64_t now() const { return now_; }

  private:
    std::uint64_t snapshots_installed_ = 0;
    struct Proposal {
        raft::Term term;
        std::int64_t deadline;
        Done done;
        raft::EntryType type = raft::EntryType::normal;  // of the entry it made
    };
    // Raft::start's membership: the one the applied state holds, else the configured one.
    raft::Config raft_config() const;
    // Registers a proposal the core took at `index` (answering those it overwrote).
    void track(raft::Index index, Proposal p);
    void notice_membership();
    void finish_ready();
    // Applies what committed while a write is in flight (ready.h, step 3a).
    void apply_while_writing();
    // The newest index up to which the core's log is on disk once the write in flight is
    // done; 0 if that cannot be told.
    raft::Index written_prefix() const;
    // Applies entries in order; returns whether any was a command.
    bool apply_entries(const std::vector<raft::Entry>& entries);
    // Makes batch_ the commands of entries[from...] up to the first entry that is not a
    // command; returns how many (0 while the planted defect merge_dropped is on: it needs
    // each entry alone).
    std::size_t batch_run(const std::vector<raft::Entry>& entries, std::size_t from);
    // Applies batch_ (from entries[from] on), each entry as apply_entry would; returns how
    // many commands the store applied. Sets `wrote` if one was applied.
    std::size_t apply_run(const std::vector<raft::Entry>& entries, std::size_t from, bool& wrote);
    void install_snapshot(raft::Ready& rd);
    // One entry, by itself.
    void apply_entry(const raft::Entry& e);
    // What applying an entry starts with: a fork ends, the applied position moves to it,
    // and the proposals it overwrote are answered. Returns the proposal it carries, if
    // it is a command.
    std::optional<Proposal> begin_entry(const raft::Entry& e);
    void apply_command(const raft::Entry& e, std::optional<Proposal> mine);
    // What follows the store's part: hooks, and the proposal's answer.
    void finish_command(const raft::Entry& e, queue::Command& cmd, queue::Result& result,
                        std::optional<Proposal> mine);
    void finish_other(const raft::Entry& e);  // a no-op or a configuration entry
    void persist_applied(const raft::SnapshotMeta& trim = {});
    // persist_applied if state_write_entries or state_write_ms says it is time.
    void persist_applied_when_due();
    // Moves what the store changed into unwritten_; returns where this batch starts.
    std::size_t collect_changes();
    void take_checkpoint();
    // Where the log may be trimmed to (at most `trim`): a member catching up after a
    // snapshot keeps the entries it needs.
    raft::Index kept_for_peers(raft::Index trim) const;
    void answer(Proposal& p, queue::Code code, const std::string& message);
    void expire_proposals(std::int64_t now);
    void fail(const std::string& message);
    bool planted(ShellDefect d) const;

    ShellConfig cfg_;
    Storage& storage_;
    Transport& transport_;
    Hooks hooks_;
    raft::MemoryStorage log_;  // what the core reads: the durable log, mirrored
    std::unique_ptr<raft::Raft> raft_;
    std::unique_ptr<queue::Store> store_;
    std::unique_ptr<queue::Store> received_store_;  // from step_snapshot, until installed
    // Proposed here, not yet applied, by index: proposals only ever go at the back.
    std::deque<std::pair<raft::Index, Proposal>> proposals_;
    std::optional<raft::Ready> inflight_;           // the Ready being persisted
    std::uint64_t inflight_ticket_ = 0;             // 0: nothing to wait for
    raft::SnapshotMeta applied_;                    // the last applied entry
    storage::AppliedState unwritten_;               // changes applied, not handed off yet
    std::vector<queue::LoggedCommand> batch_;       // apply_entries' run, kept for its room
    std::uint64_t handed_index_ = 0;                // applied index last handed off
    std::int64_t handed_at_ = 0;                    // now_ when it was handed off
    raft::Index replay_until_ = 0;  // last entry on disk at start, until it is applied
    bool checkpoint_pending_ = false;
    std::int64_t campaign_at_ = -1;  // fast campaign after the leader's link broke
    std::int64_t now_ = 0;           // the latest time an input carried
    bool failed_ = false;
    // What membership_changed last reported: the index of the one in force, and whether
    // it was committed.
    raft::Index noticed_conf_ = ~raft::Index(0);
    bool noticed_committed_ = false;
};

}  // namespace dueq::shell
