// A node's configuration: one TOML file (docs/config.md). Every key is checked when the file
// is read; an unknown key or a bad value stops the node with a message naming it.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/limits.h"
#include "queue/command.h"

namespace dueq::node {

struct ConfigError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// One member of the cluster, as every node's config lists it.
struct Member {
    std::string id;      // the node's name ([node] id)
    std::string peer;    // host:port where the other nodes reach its peer listener
    std::string client;  // host:port clients are redirected to
    std::string admin;   // host:port of its HTTP admin listener; optional (the dashboard)
};

// [raft]: timings in ms. The Raft core counts ticks; tick_ms converts.
struct RaftTimings {
    std::uint32_t tick_ms = 10;
    std::uint32_t heartbeat_ms = 100;
    std::uint32_t election_timeout_ms = 1000;
    std::uint64_t snapshot_entries = 10'000;  // applied entries between snapshots
    // A proposal not committed within this long is answered `timeout` (outcome unknown).
    // 0 in the file: 3 x election_timeout_ms.
    std::uint32_t proposal_timeout_ms = 3000;
    // A snapshot stream from the leader bigger than this is refused (it is held in memory
    // while it arrives).
    std::uint64_t max_snapshot_mib = 16 * 1024;
    // A member that has seen no leader holding a quorum for this long serves its
    // autonomous queues on its own (docs/autonomy.md). 0: never. Absent from the file:
    // 3 x election_timeout_ms.
    std::uint32_t autonomy_after_ms = 3000;
};

// [tls] (docs/security.md). File paths as written in the file; load_config_file makes
// relative ones relative to the config file.
struct TlsConfig {
    std::string ca_file;    // the cluster's CA: verifies peers and client certificates
    std::string cert_file;  // this node's certificate; it must name the node's [node] id
    std::string key_file;
    std::string peers;            // "mutual" | "off" (plaintext, said explicitly)
    std::string clients = "off";  // "off" | "on" | "mutual" (client certificates required)
    bool peer_tls() const { return peers == "mutual"; }
    bool client_tls() const { return clients != "off"; }
};

struct Config {
    std::string node_id = "n1";
    std::string client_listen = "127.0.0.1:7700";
    std::string client_advertise;  // what clients are told; defaults to client_listen
    std::string data_dir = "./data/n1";
    std::string auth_token;   // non-empty: clients must say hello with it first
    std::string peer_listen;  // where peers connect; defaults to this member's `peer`
    // [node] dial: member id -> the address this node dials to reach that member, instead
    // of its `peer` address (NAT, or a fault proxy in tests). Local to this node: it is not
    // part of the membership fingerprint, and the handshake names the member, not the address.
    std::map<std::string, std::string> dial;
    std::string cluster_id = "dueq";
    // [cluster] secret_file: as written (relative paths are relative to the config file).
    // load_config_file reads it into cluster_secret; members prove they hold it to each
    // other. Required when there is more than one member. Never logged or reported.
    std::string secret_file;
    std::string cluster_secret;
    // The members a new cluster starts with, this node included, in the same order on
    // every node (the position is the member's Raft id, 1-based). Once the membership has
    // changed (dueqctl member), the one in the log is in force and this list only says
    // where this node itself listens. Empty: a standalone node.
    std::vector<Member> members;
    // dueqd --join ID: this node joins a running cluster as the new member ID that
    // `dueqctl member add` made; its data dir must be empty (or already be ID's).
    std::uint64_t join_id = 0;
    RaftTimings raft;
    bool fsync = true;                // storage.fsync: "always" | "never"
    std::uint64_t log_keep = 10'000;  // log entries kept behind the applied index
    // The applied task state is written after this many applied entries or this long.
    std::uint64_t state_write_entries = 20'000;
    std::int64_t state_write_ms = 1'000;
    queue::Millis session_grace_ms = 5'000;
    std::string log_level = "info";
    std::string log_format = "text";    // [log] format: "text" | "json"
    std::uint32_t slow_fsync_ms = 200;  // [log] a synced write slower than this is logged
    std::string admin_listen;           // [admin] listen: host:port of HTTP admin; empty: off
    // [admin] tls = "on": HTTPS with [tls] cert_file and key_file, and /cluster asks the other
    // members over HTTPS, verifying them with [tls] ca_file.
    bool admin_tls = false;
    TlsConfig tls;
    // [shard] (docs/sharding.md): the shard this node's Raft group serves, and the shard
    // map file (relative paths are relative to the config file; load_config_file resolves
    // it). Both empty: not sharded, the node serves every key.
    std::string shard_name;
    std::string shard_map_file;
    // [shard] secret_file: the deployment's secret, the same on every node of every shard.
    // A bucket move's steps between shards carry an HMAC with it (node/move_driver.h);
    // without it this node neither sends nor takes them.
    std::string shard_secret_file;
    std::string shard_secret;
    net::Limits limits;
    // What the parser changed and the node should say at start (spdlog::warn).
    std::vector<std::string> warnings;
    queue::QueueSettings queue_defaults;
    std::map<std::string, queue::QueueSettings> queues;
};

// The position of node_id in members, 1-based (0: not a member or standalone).
std::uint64_t raft_id_of(const Config& c, const std::string& node_id);
// The other way: the id of the member at Raft id `raft_id` ("" for 0; a standalone node's
// own id for 1).
std::string member_id(const Config& c, std::uint64_t raft_id);
// A hash of the cluster id, which peers compare in their handshake (the members they accept
// are the current membership's, node/members.h).
std::uint64_t cluster_fingerprint(const Config& c);

// Parses TOML text; `source` names it in error messages.
Config parse_config(const std::string& text, const std::string& source);
Config load_config_file(const std::string& path);
inline constexpr std::size_t kMinSecretBytes = 16, kMaxSecretBytes = 4096;
// The secret in the file at `path`, trailing whitespace removed; throws ConfigError.
// `what` names the setting in errors.
std::string read_secret_file(const std::string& path,
                             const std::string& what = "[cluster] secret_file");
// The configuration a node runs with when given none: one node on 127.0.0.1:7700.
const std::string& default_config_text();

}  // namespace dueq::node
