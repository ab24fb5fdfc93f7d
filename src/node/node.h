// One dueq node: the event loop that owns the client sessions, the blocking takes and
// the Raft shell (shell/raft_shell.h), over RocksDB and the peer mesh (raft_io.h).
//
// Every mutating request becomes a command, proposed through the shell on the leader
// (followers answer not_leader with the leader's client address). Every replica applies
// committed entries in order at their log time, so all end in the same state, and the
// client is answered once its entry is applied on the leader. A standalone node is a
// cluster of one. docs/internals/replication.md follows a put and a blocking take end to end.
//
// Thread-safety: everything except the storage writer runs on the io_context thread
// passed in; call start()/stop() from that thread (or before it runs).
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "admin/http_server.h"
#include "net/request.h"
#include "net/server.h"
#include "node/autonomy.h"
#include "node/backups.h"
#include "node/clock.h"
#include "node/config.h"
#include "node/leader_reads.h"
#include "node/members.h"
#include "node/move_steps.h"
#include "node/node_admin.h"
#include "node/node_metrics.h"
#include "node/node_tls.h"
#include "node/planted_defects.h"
#include "node/raft_io.h"
#include "node/replies.h"
#include "node/store_budget.h"
#include "node/write_path.h"
#include "queue/store.h"
#include "shard/router.h"
#include "shell/raft_shell.h"
#include "storage/database.h"

namespace dueq::node {

// dueqd's exit status when it stops because it was removed from the cluster (a service
// manager should not restart it: RestartPreventExitStatus).
inline constexpr int kRemovedExitStatus = 78;
// How long a removed node goes on after it learned (answers in flight go out).
inline constexpr int kRemovedStopMs = 500;

class Node {
  public:
    Node(boost::asio::io_context& io, Config config);
    ~Node();

    // Opens the database, loads the state, starts the storage thread, the peer mesh and
    // the client listener. Returns a message on failure (corruption, bad address).
    std::optional<std::string> start();
    void stop();
    std::uint16_t client_port() const;
    std::uint16_t admin_port() const;

    // Tests only, before start(): the RocksDB environment (e.g. one that drops unsynced
    // writes to simulate a power cut).
    void set_storage_env(rocksdb::Env* env) { storage_env_ = env; }
    // Power-cut harness: RocksDB's background threads stopped (storage::Database).
    void halt_storage_background_work() {
        if (db_) db_->halt_background_work();
    }
    // Test-only defects (planted_defects.h); before start().
    void plant(const PlantedDefects& defects) { planted_ = defects; }

    // Rereads the shard map file (SIGHUP, the admin call). Returns "" when the new map is in
    // use, else why it was refused (the old map stays).
    std::string reload_shard_map();
    // Rereads the [tls] files (SIGHUP): connections made from now on use them; open ones
    // keep theirs. Returns "" or why the old ones stay.
    std::string reload_tls();
    // This node's certificate's notAfter in ms since the epoch; 0 without TLS.
    std::int64_t tls_not_after_ms() const { return tls_.not_after_ms(); }

    // For tests and tools: numbers the node has reached.
    std::uint64_t applied_index() const { return shell_ ? shell_->applied().index : 0; }
    const queue::Store& store() const { return shell_->store(); }

  private:
    using ConnPtr = std::shared_ptr<net::Connection>;
    class ConnReply;  // a Replier that answers on a client connection (node.cpp)

    // --- clients: one handler per request type (node.cpp) ---
    void on_frame(const ConnPtr& conn, std::string_view frame);
    void on_close(const ConnPtr& conn);
    // Reads answer at once and return the code they answered with; a write is answered
    // (and metered) by its ConnReply.
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::Ping& ping);
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::Hello& hello);
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::GetTask& get);
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::GetStats& stats);
    // A get or stats: served now from this node's store (`serve`), or, with consistency
    // "leader", once LeaderReads confirmed this node leads (metered when asked).
    template <class Read>
    using Serve = queue::Code (Node::*)(const ConnPtr&, std::uint64_t, const Read&);
    template <class Read>
    queue::Code read(const ConnPtr& conn, std::uint64_t id, Read& req, Serve<Read> serve);
    queue::Code serve_get(const ConnPtr& conn, std::uint64_t id, const net::GetTask& get);
    queue::Code serve_stats(const ConnPtr& conn, std::uint64_t id, const net::GetStats& stats);
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::ListTasks& list);
    queue::Code serve_list(const ConnPtr& conn, std::uint64_t id, const net::ListTasks& list);
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::GetStatus& status);
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::GetShards& shards);
    // A backup's first chunk, once its checkpoint is taken, or its next one (node_backup.cpp).
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::BackupChunk& req);
    // Membership (node_members.cpp).
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::GetMembers& members);
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::ChangeMember& change);
    MembersInfo members_info() const;
    // Bucket moves (node_moves.cpp): the operator's move / move_cancel, and a step of a
    // move from another shard's leader.
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::StartMove& req);
    queue::Code handle(const ConnPtr& conn, std::uint64_t id, net::MoveStepRequest& req);
    // Sharded, with the deployment's secret: this node takes part in moves.
    bool moves_enabled() const;
    // Each tick: routing follows the move table; as leader, the driver takes its next steps.
    void drive_moves();
    void handle(const ConnPtr& conn, std::uint64_t id, net::Write& write, net::Op op,
                RequestMeter::Clock::time_point started);
    StatusInfo status_info() const;
    void send_error(const ConnPtr& conn, std::uint64_t id, queue::Code code,
                    const std::string& message) const;

    // --- shards: the map (node_raft.cpp), and requests for keys of other shards (node.cpp) ---
    std::optional<std::string> start_sharding();
    // True when the request's key belongs to another shard: it has been forwarded there or
    // answered wrong_shard.
    bool route_elsewhere(const ConnPtr& conn, const net::Request& req, std::string_view frame,
                         RequestMeter::Clock::time_point started);

    // --- the Raft shell and the write path: start, ticks, timer (node_raft.cpp) ---
    shell::ShellConfig shell_config() const;
    // The data dir names the member it belongs to; a node refuses another member's.
    std::optional<std::string> check_member_record();
    // The start's error for a data dir it cannot serve from; for damage, the runbook.
    std::string refusal_to_serve(const std::string& why) const;
    // The membership in force names this node's Raft id as this node, or not at all.
    std::optional<std::string> check_member_name() const;
    // The members of the membership in force (empty for a joining node that knows none).
    MemberDirectory current_members() const;
    // The membership changed: the mesh follows it; a node it removed stops.
    void on_membership_changed();
    // This shard's entry in the map it routes by and answers `shards` with follows its
    // committed membership (other shards' routers learn it from there).
    void publish_shard_members();
    // The mesh's peers: the members in force and committed, and those the leader still
    // tells they were removed (Raft::leaving).
    void update_peers(bool membership_changed);
    // Leader: writes members' data ids into the directory once seen (net/peer_handshake.h).
    void record_data_ids();
    std::optional<std::string> start_shell(const storage::Loaded& loaded,
                                           std::unique_ptr<queue::Store> store);
    // Leader: proposes a declare for each queue whose [queues] settings in this node's
    // config differ from the replicated ones (and for [queues.default]).
    void propose_configured_settings();
    void on_tick();
    void schedule_ready();
    void on_timer();
    void arm_timer();
    void fail_stop(const std::string& message);
    bool is_leader() const { return shell_->is_leader(); }
    std::string leader_client_address() const;
    // The name of the member with this Raft id ("" for none; "#N" for one not in the
    // membership in force).
    std::string member_name(std::uint64_t raft_id) const;
    std::int64_t now_ms() const;
    std::int64_t store_now() const;  // the store's time, or the clock if later
    // The store writes go to now (the leader's, or an autonomous node's fork); nullptr
    // when this node does not accept writes.
    const queue::Store* writable_store() const;

    // The HTTP admin reads the node's state (node_admin.h).
    friend class NodeAdmin;

    boost::asio::io_context& io_;
    Config config_;
    std::uint64_t raft_id_ = 1;
    MemberDirectory members_;         // of the membership in force (current_members)
    MemberDirectory peers_;           // what the mesh was last given (update_peers)
    std::uint64_t peers_leader_ = 0;  // and the leader it was given with
    std::vector<std::uint64_t> peers_leaving_;  // and the removed members being told
    std::map<std::uint64_t, MemberEntry> known_members_;  // every member seen, by Raft id
    bool joined_ = false;      // joined a running cluster (dueqd --join; the member record)
    std::uint64_t data_id_ = 0;  // this data dir's id (the member record)
    std::map<std::uint64_t, std::uint64_t> seen_data_ids_;  // peer -> its first hello's data id
    std::int64_t next_data_id_try_ = 0;
    bool removed_ = false;     // a committed membership left this node out: it stops soon
    mutable NodeClock clock_;  // every time the node reads goes through it (clock.h)
    PlantedDefects planted_;
    std::unique_ptr<storage::Database> db_;
    Backups backups_;                          // after db_: their checkpoints read it
    std::unique_ptr<RaftIo> raft_io_;          // after db_: it writes there
    std::unique_ptr<shell::RaftShell> shell_;  // after raft_io_: it writes through it
    std::unique_ptr<WritePath> writes_;        // after shell_: it proposes through it
    std::unique_ptr<Autonomy> autonomy_;       // after writes_: it uses its sessions
    std::unique_ptr<LeaderReads> leader_reads_;  // after shell_: it asks the core
    std::unique_ptr<net::Server> server_;
    boost::asio::steady_timer tick_timer_;
    bool ready_scheduled_ = false;
    boost::asio::steady_timer timer_;  // the write path's next deadline
    boost::asio::steady_timer stop_timer_;  // a removed node's stop (on_membership_changed)
    std::int64_t timer_at_ = 0;        // time the timer is set for (0: unset)
    bool stopped_ = false;
    bool loading_ = true;  // until start() has replayed the log and serves clients
    rocksdb::Env* storage_env_ = nullptr;
    NodeMetrics metrics_;
    std::unique_ptr<NodeAdmin> admin_;
    // Always set once started: a node without [shard] routes by a map of one shard.
    std::unique_ptr<shard::Router> router_;
    NodeTls tls_;
    std::size_t own_shard_ = 0;
    std::unique_ptr<MoveDriver> move_driver_;       // made on the first tick with moves enabled
    std::uint64_t moves_seen_ = ~std::uint64_t{0};  // the move table's changes() last looked at
    StoreBudget budget_;  // [limits] max_store_bytes: writes past it are refused
};

}  // namespace dueq::node
