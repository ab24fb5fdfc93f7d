// A dueq cluster of real dueqd processes on 127.0.0.1 for integration tests: one TOML
// config per node in a fresh temporary directory (free loopback ports, short Raft
// timings), nodes started, SIGKILLed and restarted one by one, and their `status`
// read back to find the leader.
//
// Threads: a Cluster is driven by the test's main thread. client() and status() may be
// called from any thread (each makes its own connection).
//
// Every dueqd is stopped by its PID: by kill9()/terminate(), or SIGKILL in the
// destructor. If the running test case has failed by then (or an exception is
// unwinding), the destructor prints the end of every node's log and keeps the
// directory; otherwise it removes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "node/process.h"

namespace dueq::test {

using namespace std::chrono_literals;

struct PeerStatus {
    std::string id;
    std::string peer;
    bool connected = false;
    std::uint64_t match = 0;  // leader only
    std::uint64_t lag = 0;    // leader only: its last_index - match
};

// A node's answer to `status`, decoded.
struct NodeStatus {
    std::string node_id;
    std::string role;       // leader | follower | pre_candidate | candidate | standalone
    std::string leader;     // the leader's client address, "" if unknown
    std::string leader_id;  // "" if unknown
    std::string mode;
    std::uint64_t term = 0;
    std::uint64_t commit_index = 0;
    std::uint64_t applied_index = 0;
    std::uint64_t last_index = 0;
    std::uint64_t tasks = 0;
    std::uint64_t peer_input_dropped = 0;
    std::vector<PeerStatus> peers;
};

// True once an assertion of the running test case has failed (harnesses keep their logs).
bool test_case_failed();

struct ClusterOptions {
    // 1: one standalone node without [cluster] and [raft] (runs against a dueqd without
    // replication, to try the harness itself); 3: the usual cluster.
    int nodes = 3;
    std::string node_prefix = "n";  // node ids are prefix + 1, 2, ...
    int tick_ms = 10;
    int heartbeat_ms = 50;
    int election_timeout_ms = 500;
    std::uint64_t snapshot_entries = 10'000;
    std::uint64_t log_keep = 10'000;
    bool fsync = true;
    int session_grace_ms = 1000;
    std::string log_level = "info";
    // Appended to node i's config file (TOML sections such as [limits] or [queues.x]).
    std::vector<std::string> extra_config;
    // Appended to every dueqd's command line, e.g. {"--plant", "reply_before_commit"}.
    std::vector<std::string> extra_args;
};

class Cluster {
  public:
    // Picks ports and writes the configs into a fresh directory; starts nothing.
    Cluster(const std::string& name, ClusterOptions options = {});
    ~Cluster();
    Cluster(const Cluster&) = delete;
    Cluster& operator=(const Cluster&) = delete;

    int size() const { return int(nodes_.size()); }
    const ClusterOptions& options() const { return options_; }
    const std::filesystem::path& dir() const { return dir_; }

    // Starts node i (which must not be running) with its config and data dir, and waits
    // for its "listening on port" line; the test fails if it does not come up in 30 s.
    void start(int i);
    void start_all();
    void kill9(int i);      // SIGKILL, then reap
    void terminate(int i);  // SIGTERM, then reap
    void pause(int i);      // SIGSTOP: the process freezes, its sockets stay open
    void resume(int i);     // SIGCONT
    bool running(int i) const;
    pid_t pid(int i) const;  // node i's process id (-1 when it is not running)
    std::vector<int> running_nodes() const;

    std::string node_id(int i) const;         // "n1", "n2", ... (ClusterOptions::node_prefix)
    std::string client_address(int i) const;  // "127.0.0.1:port"
    std::uint16_t client_port(int i) const;
    std::uint16_t peer_port(int i) const;
    std::vector<std::string> client_addresses() const;
    int index_of_id(const std::string& node_id) const;  // -1 if none
    std::string log_path(int i) const;
    std::string log_text(int i) const;
    // The last `lines` lines of every node's log, headed by the node's id.
    std::string log_tails(std::size_t lines = 40) const;

    // A client whose seeds are the client addresses of `nodes` (all nodes if empty).
    std::unique_ptr<client::Client> client(std::vector<int> nodes = {},
                                           std::chrono::milliseconds call_timeout = 2s) const;

    // Node i's status over a fresh connection; nullopt if it did not answer in time.
    std::optional<NodeStatus> status(int i, std::chrono::milliseconds timeout = 1s) const;
    // One round of status of every running node (nullopt where no answer).
    std::vector<std::optional<NodeStatus>> statuses(std::chrono::milliseconds timeout = 1s) const;

    // The node that every running node agrees leads: it says role "leader" (or
    // "standalone"), in a term above `above_term`, and every other running node that
    // answers is a follower in that term naming it as leader_id and leader. Asks every
    // 20 ms; -1 if there is none within `bound`.
    int wait_for_leader(std::chrono::milliseconds bound, std::uint64_t above_term = 0) const;
    // Waits until every running node has applied at least `index`; false after `bound`.
    bool wait_applied(std::uint64_t index, std::chrono::milliseconds bound) const;

  private:
    std::string config_text(int i) const;

    struct Node {
        std::string id;
        std::uint16_t client_port = 0;
        std::uint16_t peer_port = 0;
        std::unique_ptr<DueqdProcess> process;
    };
    ClusterOptions options_;
    std::filesystem::path dir_;
    std::vector<Node> nodes_;
};

// The msgpack bytes of a string payload, and back ("" if the bytes are not one string).
std::string string_payload(const std::string& text);
std::string payload_string(const std::string& msgpack_bytes);

}  // namespace dueq::test
