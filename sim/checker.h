// Invariant checks for the simulator, run after every step (after logcabin's
// RaftConsensusInvariants). The checker keeps a global history (who led which term,
// what was committed at each index, what was applied) and compares every node's
// behaviour with it. The first violation is kept; later ones are ignored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "raft/raft.h"
#include "raft/storage.h"
#include "storage/writes.h"

namespace dueq::sim {

// What the checker may look at for one node: `storage` is what its disk has synced
// (the log, hard state and log base); raft is null while the node is down.
struct NodeView {
    raft::NodeId id = 0;
    const raft::MemoryStorage* storage = nullptr;
    const raft::Raft* raft = nullptr;
};

class Checker {
  public:
    Checker(std::vector<NodeView> nodes, bool contract_checks)
        : nodes_(std::move(nodes)), contract_checks_(contract_checks) {}

    bool failed() const { return !failure_.empty(); }
    const std::string& failure() const { return failure_; }
    void fail(const std::string& what);
    void set_time(std::uint64_t now_us) { now_us_ = now_us; }

    // The node's core was (re)created (or destroyed: nullptr).
    void set_raft(raft::NodeId id, const raft::Raft* r);
    // A node (re)started from its storage, with its store at `applied` (digest).
    void on_start(raft::NodeId id, const raft::SnapshotMeta& applied, std::uint64_t digest);
    // After every call into a node's core: roles, terms and commit indexes.
    void after_step(raft::NodeId id);
    // A log write is about to become durable (synced) on the node's disk.
    void on_synced(raft::NodeId id, const storage::LogWrite& w);
    // Each message as it leaves.
    void on_send(const raft::Message& m);
    // The state machine applied an entry (digest = its digest afterwards).
    void on_apply(raft::NodeId id, const raft::Entry& e, std::uint64_t digest);
    // A snapshot replaced the node's state machine.
    void on_install(raft::NodeId id, const raft::SnapshotMeta& meta, std::uint64_t digest);

    raft::Index max_committed() const { return committed_.empty() ? 0 : committed_.size() - 1; }
    raft::Term committed_term(raft::Index i) const {
        return i < committed_.size() ? committed_[i] : 0;
    }
    std::size_t leader_terms() const { return leaders_.size(); }

  private:
    struct NodeTrack {
        raft::Term term = 0;
        raft::Role role = raft::Role::follower;
        raft::Index commit = 0;
        raft::Index applied = 0;
        raft::Millis applied_time = 0;
        bool fresh = true;  // just (re)started: no history in this life yet
        // The voters of the membership it last used (kept while it is down: it comes
        // back with the same log, so with the same membership or a later one).
        std::vector<raft::NodeId> voters;
    };
    struct Applied {
        raft::Term term;
        std::uint64_t digest;
    };
    struct LogKey {
        raft::Index index;
        raft::Term term;
        bool operator==(const LogKey&) const = default;
    };
    struct LogKeyHash {
        std::size_t operator()(const LogKey& k) const { return k.index * 1000003ULL ^ k.term; }
    };
    struct LogValue {
        std::uint64_t data_hash;
        raft::Term prev_term;
    };

    const NodeView& view(raft::NodeId id) const;
    NodeTrack& track(raft::NodeId id) { return tracks_[id]; }
    void record_commit(raft::NodeId id, raft::Index from, raft::Index to);
    void check_leader_completeness(raft::NodeId id);
    void check_commit_safe(raft::NodeId id, raft::Index index);
    void check_changes(raft::NodeId id);

    std::vector<NodeView> nodes_;
    std::map<raft::NodeId, NodeTrack> tracks_;
    std::map<raft::Term, raft::NodeId> leaders_;                         // at most one per term
    std::map<std::pair<raft::NodeId, raft::Term>, raft::NodeId> votes_;  // granted
    std::map<std::pair<raft::NodeId, raft::Term>, raft::NodeId> durable_votes_;  // persisted
    std::vector<raft::Term> committed_{0};                          // index -> term (0: unknown)
    std::vector<raft::Term> commit_term_{0};  // index -> the term it was committed in (0: unknown)
    std::vector<Applied> applied_{{0, 0}};                          // index -> first application
    std::unordered_map<LogKey, LogValue, LogKeyHash> log_entries_;  // log matching
    std::string failure_;
    std::uint64_t now_us_ = 0;
    bool contract_checks_ = true;
};

}  // namespace dueq::sim
