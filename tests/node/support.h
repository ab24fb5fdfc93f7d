// Test helpers: an in-process node on 127.0.0.1 with a fresh data dir, and a raw
// frame-level client that can also send garbage.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>
#include <msgpack.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "node/config.h"
#include "node/node.h"

namespace dueq::test {

std::filesystem::path fresh_dir(const std::string& name);
// Wall-clock ms since the Unix epoch, as task times are.
std::int64_t wall_ms();

class TestNode {
  public:
    explicit TestNode(node::Config config) : TestNode(std::move(config), nullptr) {}
    // `storage_env`: RocksDB's environment for this node (Node::set_storage_env), e.g. a
    // fault-injection one; null for the default. It must outlive the TestNode.
    TestNode(node::Config config, rocksdb::Env* storage_env);
    explicit TestNode(const std::string& name) : TestNode(config_for(name)) {}
    ~TestNode();
    static node::Config config_for(const std::string& name);
    std::uint16_t port() const { return port_; }
    void stop();

  private:
    boost::asio::io_context io_;
    std::unique_ptr<node::Node> node_;
    std::thread thread_;
    std::uint16_t port_ = 0;
};

// A decoded response: the whole map, kept alive with its zone.
struct Response {
    msgpack::object_handle handle;
    const msgpack::object& root() const { return handle.get(); }
    const msgpack::object* find(const std::string& key) const;
    bool ok() const;
    std::uint64_t id() const;
    std::string error_code() const;
    std::uint64_t u(const std::string& key) const;
    std::int64_t i(const std::string& key) const;
};

class RawClient {
  public:
    explicit RawClient(std::uint16_t port);
    // Sends a request map built by `fill` with `n` entries (op and id are added).
    void send_raw(const std::string& bytes);   // exactly these bytes
    void send_frame(const std::string& body);  // length prefix + body
    void send(const std::string& op, std::uint64_t id,
              const std::map<std::string, msgpack::object>& fields = {});
    // The bytes send() would write: length prefix and request map.
    std::string frame(const std::string& op, std::uint64_t id,
                      const std::map<std::string, msgpack::object>& fields = {});
    // Reads one response frame; nullopt if the connection closed or `timeout` passed.
    std::optional<Response> read(std::chrono::milliseconds timeout = std::chrono::seconds(5));
    Response call(const std::string& op, std::uint64_t id,
                  const std::map<std::string, msgpack::object>& fields = {});
    bool closed_by_peer(std::chrono::milliseconds timeout = std::chrono::seconds(5));
    void close();

    msgpack::zone zone;  // owns objects built for `fields`
    msgpack::object str(const std::string& s) { return msgpack::object(s, zone); }
    // The bytes as msgpack bin (a key that need not be UTF-8), held by `zone`.
    msgpack::object bin(const std::string& bytes) {
        msgpack::object o;
        o.type = msgpack::type::BIN;
        char* p = static_cast<char*>(zone.allocate_align(bytes.size() + 1));
        std::memcpy(p, bytes.data(), bytes.size());
        o.via.bin.ptr = p;
        o.via.bin.size = std::uint32_t(bytes.size());
        return o;
    }
    template <typename T>
    msgpack::object obj(const T& v) {
        return msgpack::object(v, zone);
    }

  private:
    bool read_exact(char* buf, std::size_t n, std::chrono::milliseconds timeout);
    boost::asio::io_context io_;
    boost::asio::ip::tcp::socket socket_;
    bool last_closed_ = false;  // the last read failed because the peer closed
};

}  // namespace dueq::test
