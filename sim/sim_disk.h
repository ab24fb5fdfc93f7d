// The simulator's disk for one node: the shell's Storage (shell/raft_shell.h) in memory,
// with the failure model of RocksDB's write-ahead log under a power cut.
//
//  - Jobs (log writes, applied states, snapshot installs, checkpoints) are carried out in
//    submission order, in groups, after a latency the simulator picks (a slow disk makes
//    it long): the storage thread's group commit.
//  - A written job is visible at once (a checkpoint sees it) but survives a crash only
//    once synced: a log write with `sync`, or a snapshot install, syncs everything
//    written before it too. Applied states and commit-index moves are never synced.
//  - A crash keeps the synced image plus an arbitrary prefix of the unsynced jobs (a
//    torn tail), and loses every job not yet written.
// `durable()` is what a crash now would keep at least: the checker reads it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "node/autonomy.h"
#include "queue/store.h"
#include "raft/storage.h"
#include "shell/raft_shell.h"
#include "storage/writes.h"

namespace dueq::sim {

// The applied state at one index: what a checkpoint holds and a snapshot carries.
struct StoreImage {
    raft::SnapshotMeta meta;
    std::map<std::pair<std::string, std::string>, std::string> tasks;  // (queue, key) -> encoded
    std::string store_meta;
    // A store holding exactly this, or null if a record does not decode.
    std::unique_ptr<queue::Store> load() const;
};

// Everything the disk holds.
struct DiskImage {
    raft::MemoryStorage log;  // hard state, the log, and its base as the snapshot meta
    std::uint64_t applied_index = 0;
    std::int64_t applied_time = 0;
    StoreImage store;
    std::map<std::pair<std::string, std::string>, std::string> overlay;  // autonomous mode
};

class SimDisk final : public shell::Storage, public node::OverlayStorage {
  public:
    struct Install {
        raft::SnapshotMeta meta;
        raft::HardState hard_state;
        std::shared_ptr<const StoreImage> image;
    };
    struct CheckpointJob {
        raft::SnapshotMeta meta;
    };
    using Job = std::variant<storage::LogWrite, storage::AppliedState, Install, CheckpointJob,
                             storage::OverlayWrite>;

    // What the owner does for the disk: `schedule_flush` asks for flush() to be called
    // later (once per group); `on_synced` reports each log write as it becomes durable.
    struct Hooks {
        std::function<void()> schedule_flush;
        std::function<void(const storage::LogWrite&)> on_synced;
        // The shell installs a snapshot with these records.
        std::function<void(const StoreImage&)> on_install;
    };
    explicit SimDisk(Hooks hooks) : hooks_(std::move(hooks)) {}

    // Carries out the jobs submitted so far, in order, at most `max_jobs` of them: a real
    // disk finishes one group commit while the next waits, so the shell hears of its
    // writes one group at a time. The rest wait for the next flush, asked for at once.
    // Returns the last ticket done and the checkpoints taken (the shell hears of both
    // after this returns).
    std::pair<std::uint64_t, std::vector<raft::SnapshotMeta>> flush(
        std::size_t max_jobs = SIZE_MAX);
    bool busy() const { return !queue_.empty(); }

    // Power cut: keeps the synced image and the first `keep` unsynced jobs (clamped).
    void crash(std::size_t keep);
    std::size_t unsynced_jobs() const { return unsynced_.size(); }
    // What a restart reads: the log and the store. nullopt if the image is corrupt.
    std::optional<std::pair<storage::Loaded, std::unique_ptr<queue::Store>>> load() const;

    // The snapshot stream a follower received: install_snapshot takes it.
    void set_received(std::shared_ptr<const StoreImage> image) { received_ = std::move(image); }
    // The checkpoints taken, by index (a leader sends the one its log starts from).
    std::shared_ptr<const StoreImage> checkpoint_at(const raft::SnapshotMeta& meta) const;
    // At start: the applied state now is the checkpoint of the log's snapshot.
    void checkpoint_now(const raft::SnapshotMeta& meta);

    const DiskImage& durable() const { return durable_; }

    // shell::Storage
    std::uint64_t write_log(storage::LogWrite w) override { return submit(std::move(w)); }
    std::uint64_t write_applied(storage::AppliedState s) override { return submit(std::move(s)); }
    std::optional<std::uint64_t> install_snapshot(const raft::SnapshotMeta& meta,
                                                  const raft::HardState& hs) override;
    void checkpoint(const raft::SnapshotMeta& meta) override { submit(CheckpointJob{meta}); }
    // node::OverlayStorage
    std::uint64_t write_overlay(storage::OverlayWrite w) override { return submit(std::move(w)); }

  private:
    std::uint64_t submit(Job job);
    static void carry_out(DiskImage& img, const Job& job);
    static bool syncs(const Job& job);

    Hooks hooks_;
    std::deque<std::pair<std::uint64_t, Job>> queue_;  // submitted, not written
    std::vector<Job> unsynced_;                        // written, not synced
    DiskImage visible_;                                // what is written
    DiskImage durable_;                                // what is synced
    std::uint64_t next_ticket_ = 0;
    std::shared_ptr<const StoreImage> received_;
    std::shared_ptr<const StoreImage> checkpoint_;  // the latest taken
};

}  // namespace dueq::sim
