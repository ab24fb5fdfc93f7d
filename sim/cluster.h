// Internals of the simulator: the cluster, its event queue, network, faults and
// workload. Not a public interface; sim.h is.
//
// Model:
//  - Simulated time in microseconds; a priority queue of events ordered by
//    (time, sequence number), so ties break the same way on every run.
//  - Each node is the shell dueqd runs (shell::RaftShell, with the real Raft core and
//    the real queue::Store) over a SimDisk (sim_disk.h: group commit, lost and torn
//    unsynced writes) and the simulated network. A crash loses what the disk had not
//    synced and everything in memory; a restart loads what the disk kept, as dueqd does.
//  - Each node ticks every 10 ms of its own clock; clocks drift (rate) and are offset,
//    and the offset clock is the `now` the shell gets.
//  - The network delays, drops, duplicates and reorders messages, and partitions
//    (symmetric or one-way) block them. A link blocked for a while, or to a crashed
//    node, goes down (the shell hears of it, as from the peer mesh), and comes back up.
//  - Above each shell runs dueqd's write path (node/write_path.h): blocking takes,
//    sessions and their release on disconnect, the leader's Advance; and its autonomous
//    mode (node/autonomy.h): a node cut off for a while serves the workload's queue on
//    its own when that queue is autonomous (half the seeds), and merges later through
//    the leader (Merge frames travel the simulated network).
//  - The workload is the product's (clients.cpp): clients connect to a node, put, take
//    (some blocking) with leases, ack with new times, touch, release, bury, abandon
//    leases, disconnect and resume their sessions, or go away for good.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <vector>

#include "node/autonomy.h"
#include "node/write_path.h"
#include "raft/random.h"
#include "shell/raft_shell.h"
#include "sim/checker.h"
#include "sim/digest.h"
#include "sim/sim.h"
#include "sim/sim_disk.h"
#include "sim/task_history.h"

namespace dueq::sim {

class Cluster {
  public:
    explicit Cluster(const SimOptions& opts);
    ~Cluster();
    SimResult run();

  private:
    enum class EventKind : std::uint8_t {
        tick,
        deliver,
        disk_flush,
        restart,
        chaos,
        client,
        heal,
        unpartition,
        link_check,
        check_live,
        merges
    };
    struct Event {
        std::uint64_t time;
        std::uint64_t seq;
        EventKind kind;
        int node;
        std::uint64_t arg;  // incarnation, message slot or partition generation
        bool operator>(const Event& o) const {
            return time != o.time ? time > o.time : seq > o.seq;
        }
    };
    // One node: the shell dueqd runs, over this node's disk and its end of the network.
    struct Node final : shell::Transport {
        Cluster& cluster;
        int k;
        raft::NodeId id;
        std::unique_ptr<SimDisk> disk;
        std::unique_ptr<shell::RaftShell> shell;
        std::unique_ptr<node::WritePath> writes;     // after shell: it proposes through it
        std::unique_ptr<node::Autonomy> autonomy;    // after writes: it uses its sessions
        std::shared_ptr<const StoreImage> sendable;  // the checkpoint the log starts from
        StoreDigest digest;
        bool up = false;
        bool joined = true;       // a spare (membership changes) starts once it is added
        bool retired = false;     // removed, or its machine lost for good: never starts again
        raft::Term led_term = 0;  // the last term this node was seen to lead
        std::uint64_t incarnation = 0;
        bool slow_disk = false;
        double rate = 1.0;           // clock speed relative to simulated time
        std::int64_t offset_ms = 0;  // clock offset

        Node(Cluster& c, int index) : cluster(c), k(index), id(raft::NodeId(index + 1)) {}
        void send(const raft::Message& m) override { cluster.net_send(k, m); }
        bool connected(raft::NodeId peer) const override { return cluster.link_up_[k][peer - 1]; }
    };
    struct Held {  // a lease a client holds
        std::string key;
        queue::LeaseId lease;
        queue::Millis until;
    };
    struct Client {
        int node = -1;                  // the node it is connected to, or -1
        std::uint64_t incarnation = 0;  // of that node when it connected
        queue::SessionId session = 0;
        std::shared_ptr<bool> open;  // the connection is up (its answers arrive)
        std::vector<Held> held;
    };
    class ClientReply;  // a node::Replier that answers a simulated client (clients.cpp)
    struct PendingRead {
        raft::NodeId node;
        raft::Index min_index;  // highest index acknowledged before the read was issued
    };
    struct Slot {
        raft::Message message;
        std::shared_ptr<const StoreImage> snapshot;  // a snapshot message's records
    };

    // events and nodes (cluster.cpp)
    void schedule(std::uint64_t at, EventKind kind, int node, std::uint64_t arg = 0);
    void dispatch(const Event& ev);
    shell::ShellConfig node_config(int k) const;
    std::int64_t clock_ms(const Node& n) const;
    std::uint64_t tick_interval(const Node& n) const;
    void start_node(int k);
    void crash_node(int k);
    void pump(int k);
    void flush_disk(int k);
    void on_apply(int k, const raft::Entry& e, const queue::Command* cmd,
                  const queue::Result* result, std::span<const storage::TaskChange> changes);
    void net_send(int from, const raft::Message& m);
    void send_merges(int from, raft::NodeId leader, const std::vector<queue::Merge>& merges);
    void deliver_merges(int to, std::uint64_t slot);
    void deliver(int k, std::size_t slot);
    void set_link(int a, int b, bool up);
    void check_links();
    void trace(const char* fmt, ...) const;

    // membership changes (membership.cpp)
    int slots() const { return static_cast<int>(nodes_.size()); }
    // After node k's step: a node that leads a new term may try a change at once; nodes a
    // committed membership left out stop for good.
    void after_leader_step(int k);
    void change_membership(int k);
    void retire(int k);
    // Proposes on leader k the removal of `id`, a member lost for good.
    void remove_lost(int k, raft::NodeId id);
    // The member ids of the leader's membership; every slot when there is no leader.
    bool in_membership(const shell::RaftShell& leader, int k) const;

    // faults, workload, liveness (workload.cpp)
    void chaos();
    void partition();
    void heal();
    void run_timers(int k);

    // clients (clients.cpp)
    void client_action();
    bool connect(Client& c);
    void disconnect(Client& c);
    void submit(Client& c, queue::Command cmd, std::int64_t wait_ms);
    void on_answer(std::size_t client, const shell::Outcome& o);
    void propose(int k, queue::Command cmd, std::function<void(const shell::Outcome&)> then);
    queue::Command next_command(Client& c, std::int64_t now);
    void on_read_state(int k, const raft::ReadState& rs);
    bool cluster_live(std::string* why);
    void check_live();
    int leader_guess();

    SimOptions opts_;
    raft::Random rng_;         // faults and network
    raft::Random client_rng_;  // workload
    raft::Random disk_rng_;    // how much of its queue a disk flush writes
    std::vector<std::unique_ptr<Node>> nodes_;
    std::unique_ptr<Checker> checker_;
    std::unique_ptr<TaskHistory> history_;
    std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
    std::uint64_t seq_ = 0;
    std::uint64_t now_ = 0;
    bool done_ = false;

    // network
    std::vector<Slot> slots_;
    std::vector<std::size_t> free_slots_;
    std::vector<std::vector<bool>> blocked_;  // blocked_[from][to]
    std::vector<std::vector<bool>> link_up_;  // symmetric: the mesh's view of the link
    std::uint64_t partition_gen_ = 0;
    double drop_ = 0, dup_ = 0, slow_net_ = 0;
    std::uint64_t max_delay_us_ = 0;
    std::uint64_t link_latency_us_ = 500;
    std::map<std::uint64_t, std::pair<int, std::vector<queue::Merge>>> merge_slots_;
    std::uint64_t next_merge_slot_ = 0;

    // per-seed shape
    int heartbeat_tick_ = 1;
    bool lease_read_ = false;
    std::uint64_t max_entries_ = 64, max_inflight_ = 64, max_inflight_bytes_ = 1 << 20;
    std::uint64_t snapshot_threshold_ = 32, keep_entries_ = 0;
    std::uint64_t state_write_entries_ = 1;
    std::int64_t state_write_ms_ = 0;
    double crash_rate_ = 0, partition_rate_ = 0, slow_disk_rate_ = 0, transfer_rate_ = 0;
    double torn_rate_ = 0;
    bool membership_changes_ = false;
    double membership_rate_ = 0;
    raft::Random member_rng_{0};    // membership changes: their own stream
    raft::Index changes_seen_ = 0;  // the last committed configuration counted
    bool healed_ = false;
    std::uint64_t healed_at_ = 0;

    // workload
    std::vector<Client> clients_;
    std::int64_t session_grace_ms_ = 100;
    std::map<std::uint64_t, PendingRead> reads_;
    std::uint64_t next_read_ = 1;
    raft::Index acked_max_index_ = 0;
    std::uint64_t outstanding_ = 0;  // proposals whose outcome has not come back
    bool declared_ = false;          // the workload's queue settings are applied
    bool autonomous_queue_ = false;  // the workload's queue is served by cut-off nodes
    // Per key, the largest hlc of a write answered by a node in autonomous mode since the
    // key was last removed or done (then its history starts over: a put that re-creates
    // it is stamped afresh). G4, checked at the end: the key's hlc is at least that.
    std::map<std::string, std::uint64_t> autonomous_writes_;
    // Per key, the node that answered the write autonomous_writes_ holds: a node removed
    // (or lost for good) before it merged takes its writes with it (docs/autonomy.md).
    std::map<std::string, int> autonomous_writer_;
    std::map<std::string, std::uint64_t> removed_hlc_;  // per key, the newest removal's stamp
    // Per node, the stamp its current fork last gave each key, in the order it answered:
    // per key, stamps only grow (docs/autonomy.md), past the fork's own deletions too.
    struct ForkStamps {
        std::uint64_t incarnation = 0;
        std::int64_t since = 0;  // Autonomy::mode_since() of the fork
        std::map<std::string, std::uint64_t> last;
    };
    std::map<int, ForkStamps> fork_stamps_;
    void check_fork_stamp(int k, const queue::Command& cmd, const queue::Result& r);
    void key_removed(const queue::Command& cmd, const queue::Result& r, const queue::Store& after);
    raft::Index removals_seen_ = 0;
    bool marker_acked_ = false;  // after healing: a put got through
    int leader_hint_ = 0;

    SimStats stats_;
};

}  // namespace dueq::sim
