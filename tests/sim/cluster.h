// Internals of the simulator: the cluster, its event queue, network, faults and
// workload. Not a public interface; sim.h is.
//
// Model:
//  - Simulated time in microseconds; a priority queue of events ordered by
//    (time, sequence number), so ties break the same way on every run.
//  - Each node is the real raft::Raft plus a shell that carries out Ready batches:
//    persist (to a MemoryStorage, which is what survives a crash), then send, then
//    apply. While a Ready is being persisted (a slow disk makes that long) the node
//    keeps taking messages and ticks, but its next Ready waits. A crash loses the
//    Ready in progress and everything the core had not handed out yet.
//  - Each node ticks every 10 ms of its own clock; clocks drift (rate) and are offset,
//    and the offset clock is what a leader stamps on entries.
//  - The network delays, drops, duplicates and reorders messages, and partitions
//    (symmetric or one-way) block them.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <vector>

#include "raft/raft.h"
#include "sim/checker.h"
#include "sim/sim.h"
#include "sim/state_machine.h"

namespace dueq::sim {

class Cluster {
  public:
    explicit Cluster(const SimOptions& opts);
    SimResult run();

  private:
    enum class EventKind : std::uint8_t {
        tick,
        deliver,
        persist_done,
        restart,
        chaos,
        client,
        heal,
        unpartition,
        check_live
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
    struct Node {
        raft::NodeId id = 0;
        raft::MemoryStorage storage;
        std::unique_ptr<raft::Raft> raft;
        SimStateMachine sm;
        bool up = true;
        std::uint64_t incarnation = 0;
        bool persisting = false;
        std::uint64_t busy_until = 0;
        raft::Ready pending;
        double rate = 1.0;           // clock speed relative to simulated time
        std::int64_t offset_ms = 0;  // clock offset
        bool slow_disk = false;
    };
    struct Command {
        bool acked = false;
        std::uint64_t last_attempt = 0;
    };
    struct PendingRead {
        raft::NodeId node;
        raft::Index min_index;  // highest index acknowledged before the read was issued
    };

    // events and nodes (cluster.cpp)
    void schedule(std::uint64_t at, EventKind kind, int node, std::uint64_t arg = 0);
    void dispatch(const Event& ev);
    raft::Config node_config(int k) const;
    raft::Millis clock_ms(const Node& n) const;
    std::uint64_t tick_interval(const Node& n) const;
    void start_node(int k);
    void crash_node(int k);
    void pump(int k);
    void complete_ready(int k, raft::Ready rd);
    void apply_entries(int k, const std::vector<raft::Entry>& entries);
    void net_send(const raft::Message& m);
    void deliver(int k, std::size_t slot);
    void trace(const char* fmt, ...) const;

    // faults, workload, liveness (workload.cpp)
    void chaos();
    void heal();
    void client_action();
    void on_read_state(int k, const raft::ReadState& rs);
    void on_applied_command(int k, const raft::Entry& e);
    bool cluster_live(std::string* why) const;
    void check_live();
    int leader_guess();

    SimOptions opts_;
    raft::Random rng_;         // faults and network
    raft::Random client_rng_;  // workload
    std::vector<Node> nodes_;
    std::unique_ptr<Checker> checker_;
    std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
    std::uint64_t seq_ = 0;
    std::uint64_t now_ = 0;
    bool done_ = false;

    // network
    std::vector<raft::Message> slots_;
    std::vector<std::size_t> free_slots_;
    std::vector<std::vector<bool>> blocked_;  // blocked_[from][to]
    std::uint64_t partition_gen_ = 0;
    double drop_ = 0, dup_ = 0, slow_net_ = 0;
    std::uint64_t max_delay_us_ = 0;
    std::uint64_t link_latency_us_ = 500;

    // per-seed shape
    int heartbeat_tick_ = 1;
    bool lease_read_ = false;
    std::uint64_t max_entries_ = 64, max_inflight_ = 64, max_inflight_bytes_ = 1 << 20;
    std::uint64_t snapshot_threshold_ = 32, keep_entries_ = 0;
    double crash_rate_ = 0, partition_rate_ = 0, slow_disk_rate_ = 0, transfer_rate_ = 0;
    bool healed_ = false;
    std::uint64_t healed_at_ = 0;

    // workload
    std::vector<Command> commands_;      // command id k+1 at [k]
    std::deque<std::uint64_t> unacked_;  // ids not yet acknowledged (may hold acked ones)
    std::map<std::pair<raft::NodeId, raft::Index>, std::pair<raft::Term, std::uint64_t>> attempts_;
    std::map<std::uint64_t, PendingRead> reads_;
    std::uint64_t next_read_ = 1;
    raft::Index acked_max_index_ = 0;
    int leader_hint_ = 0;

    SimStats stats_;
};

}  // namespace dueq::sim
