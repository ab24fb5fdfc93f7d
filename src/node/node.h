// One dueq node: the event loop that owns the Raft core, the task store, the client
// sessions and the blocking takes, plus the storage thread and the peer mesh.
//
// Every mutating request becomes a command, proposed to Raft on the leader (followers
// answer not_leader with the leader's client address). Raft stamps each entry with the
// log time; every replica applies committed entries in order at those times, so all end
// in the same state, and the client is answered once its entry is applied on the
// leader. A standalone node is a cluster of one.
//
// Ready handling (raft/ready.h), one Ready at a time: its entries and hard state go to
// the storage thread; the leader's appends leave at once (the leader counts itself
// only once its own write is durable, so writing in parallel is safe); every other
// message waits for the write. Then committed entries are applied and advance() called.
// Proposals made meanwhile collect in the next Ready: that is the group commit.
//
// Thread-safety: everything except the storage writer runs on the io_context thread
// passed in; call start()/stop() from that thread (or before it runs).
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "net/log_limiter.h"
#include "net/peer_mesh.h"
#include "net/request.h"
#include "net/server.h"
#include "node/clock.h"
#include "node/config.h"
#include "node/snapshot_transfer.h"
#include "node/take_waiters.h"
#include "queue/store.h"
#include "raft/raft.h"
#include "storage/database.h"
#include "storage/writer.h"

namespace dueq::node {

// Test-only defects, selected with dueqd --plant (compiled in with DUEQ_PLANTED_BUGS).
enum class NodeBug : std::uint8_t {
    none,
    reply_before_commit,  // the leader answers a write as soon as it is proposed
};

class Node {
  public:
    Node(boost::asio::io_context& io, Config config);
    ~Node();

    // Opens the database, loads the state, starts the storage thread, the peer mesh and
    // the client listener. Returns a message on failure (corruption, bad address).
    std::optional<std::string> start();
    void stop();
    std::uint16_t client_port() const;

    // Tests only, before start(): the RocksDB environment (e.g. one that drops unsynced
    // writes to simulate a power cut).
    void set_storage_env(rocksdb::Env* env) { storage_env_ = env; }
    void plant(NodeBug bug) { bug_ = bug; }
    // A defect of the Raft core (raft/config.h), e.g. apply_uncommitted; before start().
    void plant(raft::PlantedBug bug) { raft_bug_ = bug; }

    // For tests and tools: numbers the node has reached.
    std::uint64_t applied_index() const { return applied_.index; }
    const queue::Store& store() const { return *store_; }

  private:
    struct Proposal {
        raft::Term term;
        Reply reply;
        std::int64_t deadline;  // now_ms() after which it is answered `timeout`
    };
    struct Session {
        int connections = 0;
        bool took_tasks = false;
        std::unique_ptr<boost::asio::steady_timer> grace;
    };

    // --- clients (node.cpp) ---
    void on_frame(const std::shared_ptr<net::Connection>& conn, std::string_view frame);
    void on_close(const std::shared_ptr<net::Connection>& conn);
    void handle(const std::shared_ptr<net::Connection>& conn, net::Request&& req);
    void handle_read(const std::shared_ptr<net::Connection>& conn, const net::Request& req);
    void handle_hello(const std::shared_ptr<net::Connection>& conn, const net::Request& req);
    void answer(const Reply& reply, const queue::Result& result);
    void answer_error(const Reply& reply, queue::Code code, const std::string& message);
    void on_applied(queue::Command& cmd, const queue::Result& result, Reply& reply);

    std::unique_ptr<queue::Store> make_store() const;  // empty
    // Leader: proposes a declare for each queue whose [queues] settings in this node's
    // config differ from the replicated ones (and for [queues.default]).
    void propose_configured_settings();
    std::int64_t now_ms() const;
    std::int64_t store_now() const;  // the store's time, or the clock if later

    void wait_for_task(Reply reply, queue::Take take, std::int64_t deadline);
    void wake_waiters(const std::string& queue);
    void on_timer();
    void arm_timer();

    void detach_session(std::uint64_t session);  // one connection of it closed or moved
    void start_grace(std::uint64_t session);
    void end_session(std::uint64_t session);

    // --- replication (replication.cpp) ---
    std::optional<std::string> start_raft(const storage::Loaded& loaded);
    void propose(queue::Command cmd, Reply reply);
    bool is_leader() const;
    std::string leader_client_address() const;
    void on_tick();
    void expire_proposals(std::int64_t now);
    // This node and the peers its mesh is connected to make a majority.
    bool reaches_quorum() const;
    void schedule_ready();
    void process_ready();
    void on_persisted(std::uint64_t ticket);
    void finish_ready();
    void send_message(const raft::Message& m);
    void on_peer_frame(std::uint64_t from, std::string_view payload);
    // Counts and logs (rate-limited) peer input that was refused before the core saw it.
    void drop_peer_input(std::uint64_t from, const std::string& problem);
    void on_peer_change(std::uint64_t peer, bool connected);
    void apply_entry(const raft::Entry& e);
    // Queues the applied state (changed tasks, applied index); trim: log entries to drop.
    void persist_applied(const raft::SnapshotMeta& trim = {});
    void request_checkpoint(const raft::SnapshotMeta& meta,
                            std::function<void(std::shared_ptr<const storage::Checkpoint>)> done);
    void take_checkpoint();
    void install_snapshot(const raft::Snapshot& snap);
    // A store holding exactly `records`, or null if one of them does not decode.
    std::unique_ptr<queue::Store> store_from(const storage::SnapshotInstall& records);
    void fail_stop(const std::string& message);

    boost::asio::io_context& io_;
    Config config_;
    std::uint64_t raft_id_ = 1;
    NodeBug bug_ = NodeBug::none;
    mutable NodeClock clock_;  // every time the node reads goes through it (clock.h)
    raft::PlantedBug raft_bug_ = raft::PlantedBug::none;
    std::unique_ptr<queue::Store> store_;
    std::unique_ptr<storage::Database> db_;
    std::unique_ptr<storage::Writer> writer_;
    std::unique_ptr<net::Server> server_;
    std::unique_ptr<net::PeerMesh> mesh_;

    // Raft: the core reads the in-memory mirror of the durable log.
    raft::MemoryStorage log_;
    std::unique_ptr<raft::Raft> raft_;
    boost::asio::steady_timer tick_timer_;
    boost::asio::steady_timer campaign_timer_;  // fast election after the leader's link broke
    std::optional<raft::Ready> inflight_;       // the Ready being persisted
    std::uint64_t inflight_ticket_ = 0;         // its storage ticket (0: nothing to wait for)
    bool ready_scheduled_ = false;
    std::map<raft::Index, Proposal> proposals_;  // proposed here, not yet applied
    raft::SnapshotMeta applied_;                  // the last applied entry
    std::uint64_t persisted_index_ = 0;           // applied index last handed to the writer
    raft::Index replay_until_ = 0;  // last entry on disk at start, until it is applied
    std::shared_ptr<const storage::Checkpoint> checkpoint_;
    bool checkpoint_pending_ = false;
    raft::Index advance_index_ = 0;  // an Advance proposed and not applied yet
    SnapshotTransfer transfer_;
    std::unique_ptr<queue::Store> received_store_;  // the received snapshot's, checked
    std::uint64_t peer_input_dropped_ = 0;  // peer frames refused (malformed or insane)
    net::LogLimiter peer_input_log_{std::chrono::seconds(10)};

    std::uint64_t next_session_ = 0;
    std::unordered_map<std::uint64_t, Session> sessions_;
    TakeWaiters waiters_;  // blocking takes parked on the leader
    // Takes of woken waiters proposed and not applied yet, per queue: log index -> the
    // tasks they asked for. Waking counts them against the due tasks, so a put that
    // makes one task due wakes one take, however many Readies pass before it applies.
    std::map<std::string, std::map<raft::Index, std::uint32_t>> wake_claims_;
    raft::Index last_proposed_ = 0;  // index of the last successful propose()
    boost::asio::steady_timer timer_;
    std::int64_t timer_at_ = 0;  // time the timer is set for (0: unset)
    std::int64_t events_seen_until_ = 0;  // store events up to this time were handled
    std::int64_t last_advance_ms_ = 0;    // when the last Advance was proposed
    static constexpr std::int64_t kAdvanceEveryMs = 250;
    bool stopped_ = false;
    rocksdb::Env* storage_env_ = nullptr;
};

}  // namespace dueq::node
