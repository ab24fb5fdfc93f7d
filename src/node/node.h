// One dueq node without replication: the event loop that owns the task store, the
// client sessions and the blocking takes, plus the storage thread behind it.
//
// Every mutating request becomes a command, stamped with the log time
// (max(previous log time, wall clock)) and an index, appended to the log by the storage
// thread, and applied to the store only once it is durable; only then is the client
// answered. So the state is a function of the log, and restart replays it. Raft will
// slot in where "durable" becomes "committed".
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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "net/request.h"
#include "net/server.h"
#include "node/config.h"
#include "queue/store.h"
#include "storage/database.h"
#include "storage/writer.h"

namespace dueq::node {

class Node {
  public:
    Node(boost::asio::io_context& io, Config config);
    ~Node();

    // Opens the database, loads the state, replays the log tail, starts the storage
    // thread and the listener. Returns a message on failure (corruption, bad address).
    std::optional<std::string> start();
    void stop();
    std::uint16_t client_port() const;

    // Tests only, before start(): the RocksDB environment (e.g. one that drops unsynced
    // writes to simulate a power cut).
    void set_storage_env(rocksdb::Env* env) { storage_env_ = env; }

    // For tests and tools: numbers the node has reached.
    std::uint64_t applied_index() const { return applied_index_; }
    const queue::Store& store() const { return store_; }

  private:
    // Where the answer to a command goes once it is applied.
    struct Reply {
        std::weak_ptr<net::Connection> conn;
        std::uint64_t id = 0;
        net::Op op = net::Op::ping;
        std::optional<std::int64_t> wait_until;  // a blocking take that may wait again
    };
    struct Pending {
        std::uint64_t index;
        std::int64_t time;
        queue::Command command;
        Reply reply;
    };
    struct Waiter {
        Reply reply;
        queue::Take take;
        std::int64_t deadline;
    };
    struct Session {
        int connections = 0;
        bool took_tasks = false;
        std::unique_ptr<boost::asio::steady_timer> grace;
    };

    void on_frame(const std::shared_ptr<net::Connection>& conn, std::string_view frame);
    void on_close(const std::shared_ptr<net::Connection>& conn);
    void handle(const std::shared_ptr<net::Connection>& conn, net::Request&& req);
    void handle_read(const std::shared_ptr<net::Connection>& conn, const net::Request& req);
    void handle_hello(const std::shared_ptr<net::Connection>& conn, const net::Request& req);

    std::int64_t now_ms() const;
    std::int64_t next_log_time();
    void propose(queue::Command cmd, Reply reply);
    void on_durable(std::uint64_t index);
    void apply_one(Pending& p);
    void answer(const Reply& reply, const queue::Result& result);
    void persist_applied();

    void wait_for_task(Reply reply, queue::Take take, std::int64_t deadline);
    void wake_waiters(const std::string& queue);
    void on_timer();
    void arm_timer();

    void detach_session(std::uint64_t session);  // one connection of it closed or moved
    void start_grace(std::uint64_t session);
    void end_session(std::uint64_t session);

    boost::asio::io_context& io_;
    Config config_;
    queue::Store store_;
    std::unique_ptr<storage::Database> db_;
    std::unique_ptr<storage::Writer> writer_;
    std::unique_ptr<net::Server> server_;

    std::uint64_t last_index_ = 0;  // last index handed to the log
    std::uint64_t applied_index_ = 0;
    std::uint64_t persisted_index_ = 0;  // applied index last handed to the writer
    std::int64_t last_time_ = 0;         // last log time handed out (monotonic)
    std::int64_t store_time_ = 0;        // time of the last apply or advance: the store's now
    std::deque<Pending> pending_;        // proposed, not yet applied, in index order
    std::uint64_t next_session_ = 0;
    std::unordered_map<std::uint64_t, Session> sessions_;
    std::map<std::string, std::deque<Waiter>> waiters_;  // blocking takes, per queue
    boost::asio::steady_timer timer_;
    std::int64_t timer_at_ = 0;  // log time the timer is set for (0: unset)
    bool stopped_ = false;
    rocksdb::Env* storage_env_ = nullptr;
};

}  // namespace dueq::node
