// The systems dueq-bench drives, behind one asynchronous interface, so that the same
// scenario code, concurrency and payloads drive dueq and its peers.
//
// Threads: a Connection belongs to the io_context it was made on; every method must be
// called on that io_context's thread, and every callback runs there. Requests may be
// pipelined: call as many as you like without waiting; each callback runs exactly once
// (with an error when the connection breaks or close() is called).
#pragma once

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dueq::bench {

enum class BackendKind { dueq, tarantool, etcd };
std::string_view backend_name(BackendKind kind);

// The outcome of one request: ok, or the server's error code / a transport error.
struct Reply {
    bool ok = false;
    std::string error;  // empty when ok
};

// A task handed out by take.
struct Taken {
    std::string key;
    std::string payload;
    std::uint64_t lease = 0;
    std::int64_t time = 0;  // the task's due time (its deadline), ms since the epoch
};

using OnReply = std::function<void(Reply)>;
using OnTake = std::function<void(Reply, std::optional<Taken>)>;

// Queue settings a scenario needs; the backend applies what it supports.
struct QueueSetup {
    std::string queue = "bench";
    std::int64_t lead_ms = 0;
    std::int64_t ttr_ms = 60'000;
};

class Connection {
  public:
    virtual ~Connection() = default;
    // Payloads are opaque bytes of the scenario's size; each backend wraps them as its
    // protocol needs (dueq: a msgpack bin; Tarantool: a msgpack str; etcd: base64 JSON).
    virtual void declare(const QueueSetup& q, OnReply done) = 0;
    virtual void put(std::string_view queue, std::string_view key, std::string_view payload,
                     std::int64_t time, OnReply done) = 0;
    virtual void get(std::string_view queue, std::string_view key, OnReply done) = 0;
    // Non-blocking take of one task: ok with nullopt when none is due.
    virtual void take(std::string_view queue, std::int64_t ttr_ms, OnTake done) = 0;
    virtual void ack(std::string_view queue, const Taken& task, std::string_view payload,
                     std::int64_t time, OnReply done) = 0;
    // The store's own count of the bytes it holds (data and indexes), where the backend
    // reports it over the wire; an error "unsupported" otherwise.
    virtual void store_bytes(std::function<void(Reply, std::int64_t)> done) = 0;
    // Writes a checkpoint of the whole store where the backend has such an op
    // (Tarantool: box.snapshot()); an error "unsupported" otherwise.
    virtual void checkpoint(OnReply done) = 0;
    // Whether this member leads its cluster now (a single node always does).
    virtual void is_leader(std::function<void(Reply, bool)> done) = 0;
    // Completes every outstanding request with an error and closes the socket.
    virtual void close() = 0;
    virtual bool broken() const = 0;
    virtual std::size_t in_flight() const = 0;
};

// Connects synchronously (at most `timeout_ms`), then the connection runs on `io`.
// Throws std::runtime_error naming the address when it cannot connect.
std::shared_ptr<Connection> connect(BackendKind kind, boost::asio::io_context& io,
                                    const std::string& address, int timeout_ms = 5000);

}  // namespace dueq::bench
