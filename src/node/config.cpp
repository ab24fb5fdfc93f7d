#include "node/config.h"

#include <toml++/toml.h>

#include "net/server.h"
#include "wire/limits.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace dueq::node {
namespace {

const std::string kDefaultTemplate = R"(# dueq: one node on loopback (the built-in default)
[node]
id = "n1"
client_listen = "127.0.0.1:7700"
data_dir = "./data/n1"

# No [cluster]: this node stands alone (a Raft group of one). See docs/config.md.

[raft]
tick_ms = 10
heartbeat_ms = 100
election_timeout_ms = 1000
snapshot_entries = 10000  # applied entries between snapshots

[storage]
fsync = "always"    # "always": every reply waits for its log entry's fsync; "never": OS decides
log_keep = 10000    # log entries kept behind the latest snapshot
state_write_entries = 20000  # the applied task state is written after this many entries
state_write_ms = 1000        # ... or this long after it was last written

[sessions]
grace_ms = 5000     # how long a closed connection's tasks stay taken, waiting for a resume

LIMITS
[queues.default]
lead_ms = 0
ttr_ms = 60000
max_attempts = 0
retention_ms = 3600000
late_share = 0.0
autonomous = false
)";

// The built-in config: [limits] shows the defaults of wire/limits.h.
std::string default_text() {
    std::string limits_section = "[limits]\n";
    for (const char* key :
         {"max_frame_bytes", "max_key_bytes", "max_payload_bytes", "max_take_count"})
        limits_section +=
            std::string(key) + " = " + std::to_string(limits::config_limit(key).dflt) + "\n";
    std::string text = kDefaultTemplate;
    return text.replace(text.find("LIMITS\n"), 7, limits_section + "\n");
}

[[noreturn]] void fail(const std::string& source, const std::string& what) {
    throw ConfigError(source + ": " + what);
}

void check_keys(const toml::table& t, const std::string& where, std::set<std::string> allowed,
                const std::string& source) {
    for (const auto& [k, v] : t)
        if (!allowed.count(std::string(k.str())))
            fail(source, "unknown key '" + std::string(k.str()) + "' in [" + where + "]");
}

template <typename T>
T get_int(const toml::table& t, const char* key, T dflt, T lo, T hi, const std::string& where,
          const std::string& source) {
    auto node = t.get(key);
    if (!node) return dflt;
    auto v = node->value<std::int64_t>();
    if (!node->is_integer() || !v) fail(source, "[" + where + "] " + key + " must be an integer");
    if (*v < std::int64_t(lo) || (hi > 0 && std::uint64_t(*v) > std::uint64_t(hi)))
        fail(source, "[" + where + "] " + key + " = " + std::to_string(*v) + " is out of range " +
                         std::to_string(lo) + ".." + std::to_string(hi));
    return T(*v);
}

std::string get_str(const toml::table& t, const char* key, const std::string& dflt,
                    const std::string& where, const std::string& source) {
    auto node = t.get(key);
    if (!node) return dflt;
    if (!node->is_string()) fail(source, "[" + where + "] " + key + " must be a string");
    return *node->value<std::string>();
}

queue::QueueSettings parse_queue(const toml::table& t, queue::QueueSettings s,
                                 const std::string& where, const std::string& source) {
    check_keys(t, where,
               {"lead_ms", "ttr_ms", "max_attempts", "retention_ms", "late_share", "autonomous"},
               source);
    constexpr std::int64_t kYear = 366LL * 24 * 3600 * 1000;
    s.lead_ms = get_int<std::int64_t>(t, "lead_ms", s.lead_ms, 0, kYear, where, source);
    s.ttr_ms = get_int<std::int64_t>(t, "ttr_ms", s.ttr_ms, 1, kYear, where, source);
    s.max_attempts =
        get_int<std::uint32_t>(t, "max_attempts", s.max_attempts, 0, UINT32_MAX, where, source);
    s.retention_ms =
        get_int<std::int64_t>(t, "retention_ms", s.retention_ms, 0, kYear, where, source);
    if (auto n = t.get("late_share")) {
        auto d = n->value<double>();
        if (!d || !(n->is_floating_point() || n->is_integer()) || *d < 0 || *d > 1)
            fail(source, "[" + where + "] late_share must be a number in 0..1");
        s.late_share = *d;
    }
    if (auto n = t.get("autonomous")) {
        if (!n->is_boolean()) fail(source, "[" + where + "] autonomous must be true or false");
        s.autonomous = *n->value<bool>();
    }
    return s;
}

void parse_cluster(const toml::table& t, Config& c, const std::string& source) {
    check_keys(t, "cluster", {"id", "members", "secret_file"}, source);
    c.cluster_id = get_str(t, "id", c.cluster_id, "cluster", source);
    c.secret_file = get_str(t, "secret_file", "", "cluster", source);
    if (c.cluster_id.empty() || c.cluster_id.size() > 64)
        fail(source, "[cluster] id must be 1..64 characters");
    auto members = t.get("members");
    if (!members) return;
    if (!members->is_array()) fail(source, "[cluster] members must be an array of tables");
    std::set<std::string> ids, peers, clients;
    for (const auto& m : *members->as_array()) {
        if (!m.is_table())
            fail(source, "[cluster] members: each member is a table {id, peer, client}");
        const auto& mt = *m.as_table();
        check_keys(mt, "cluster.members", {"id", "peer", "client", "admin"}, source);
        Member member{get_str(mt, "id", "", "cluster.members", source),
                      get_str(mt, "peer", "", "cluster.members", source),
                      get_str(mt, "client", "", "cluster.members", source),
                      get_str(mt, "admin", "", "cluster.members", source)};
        if (member.id.empty() || member.peer.empty() || member.client.empty())
            fail(source, "[cluster] members: every member needs id, peer and client");
        if (!ids.insert(member.id).second)
            fail(source, "[cluster] members: id '" + member.id + "' appears twice");
        if (!peers.insert(member.peer).second)
            fail(source, "[cluster] members: peer address " + member.peer + " appears twice");
        if (!clients.insert(member.client).second)
            fail(source, "[cluster] members: client address " + member.client + " appears twice");
        c.members.push_back(std::move(member));
    }
    if (c.members.size() > 9) fail(source, "[cluster] members: at most 9 voters");
    if (!c.members.empty() && raft_id_of(c, c.node_id) == 0)
        fail(source, "[node] id '" + c.node_id + "' is not one of [cluster] members");
}

void parse_dial(const toml::table& node, Config& c, const std::string& source) {
    auto d = node.get("dial");
    if (!d) return;
    if (!d->is_table()) fail(source, "[node] dial must be a table of member id = \"ip:port\"");
    for (const auto& [id, v] : *d->as_table()) {
        // A name the list does not hold may be a member that joins later (dueqctl member).
        const std::string member(id.str());
        if (member == c.node_id) fail(source, "[node] dial: a node does not dial itself");
        if (!v.is_string()) fail(source, "[node] dial." + member + " must be a string \"ip:port\"");
        std::string address(*v.value<std::string>());
        try {
            net::parse_endpoint(address);
        } catch (const std::exception& e) {
            fail(source, "[node] dial." + member + ": " + e.what());
        }
        c.dial[member] = std::move(address);
    }
}

void parse_raft(const toml::table& t, RaftTimings& r, const std::string& source) {
    check_keys(t, "raft",
               {"tick_ms", "heartbeat_ms", "election_timeout_ms", "snapshot_entries",
                "proposal_timeout_ms", "max_snapshot_mib", "autonomy_after_ms"},
               source);
    r.tick_ms = get_int<std::uint32_t>(t, "tick_ms", r.tick_ms, 1, 1000, "raft", source);
    r.heartbeat_ms =
        get_int<std::uint32_t>(t, "heartbeat_ms", r.heartbeat_ms, 1, 60'000, "raft", source);
    r.election_timeout_ms = get_int<std::uint32_t>(t, "election_timeout_ms",
                                                   r.election_timeout_ms, 1, 600'000, "raft", source);
    r.snapshot_entries = get_int<std::uint64_t>(t, "snapshot_entries", r.snapshot_entries, 10,
                                                1'000'000'000, "raft", source);
    r.proposal_timeout_ms = get_int<std::uint32_t>(t, "proposal_timeout_ms", 0, 0, 3'600'000,
                                                   "raft", source);
    if (r.proposal_timeout_ms == 0) r.proposal_timeout_ms = 3 * r.election_timeout_ms;
    r.autonomy_after_ms = get_int<std::uint32_t>(t, "autonomy_after_ms", 3 * r.election_timeout_ms,
                                                 0, 86'400'000, "raft", source);
    r.max_snapshot_mib = get_int<std::uint64_t>(t, "max_snapshot_mib", r.max_snapshot_mib, 1,
                                                std::uint64_t(1) << 30, "raft", source);
    if (r.heartbeat_ms < r.tick_ms)
        fail(source, "[raft] heartbeat_ms (" + std::to_string(r.heartbeat_ms) +
                         ") must be at least tick_ms (" + std::to_string(r.tick_ms) + ")");
    // A follower must hear several heartbeats per election timeout, or a single late
    // packet deposes a healthy leader (and CheckQuorum steps it down).
    if (r.election_timeout_ms < 3 * r.heartbeat_ms)
        fail(source, "[raft] election_timeout_ms (" + std::to_string(r.election_timeout_ms) +
                         ") must be at least 3 x heartbeat_ms (" +
                         std::to_string(r.heartbeat_ms) + "); 10 x is usual");
}

}  // namespace

std::uint64_t raft_id_of(const Config& c, const std::string& node_id) {
    for (std::size_t i = 0; i < c.members.size(); ++i)
        if (c.members[i].id == node_id) return i + 1;
    return 0;
}

std::string member_id(const Config& c, std::uint64_t raft_id) {
    if (raft_id == 0) return {};
    if (c.members.empty()) return c.node_id;
    return raft_id <= c.members.size() ? c.members[raft_id - 1].id : std::to_string(raft_id);
}

std::uint64_t cluster_fingerprint(const Config& c) {
    // FNV-1a over the fields, with separators: stable across builds and machines.
    std::uint64_t h = 1469598103934665603ULL;
    auto mix = [&](std::string_view s) {
        for (unsigned char ch : s) {
            h ^= ch;
            h *= 1099511628211ULL;
        }
        h ^= 0xff;
        h *= 1099511628211ULL;
    };
    mix(c.cluster_id);
    return h;
}

const std::string& default_config_text() {
    static const std::string text = default_text();
    return text;
}

namespace {

const toml::table& section_of(const toml::table& root, const char* name,
                              const std::string& source) {
    static const toml::table empty;
    auto n = root.get(name);
    if (!n) return empty;
    if (!n->is_table()) fail(source, std::string("'") + name + "' must be a table");
    return *n->as_table();
}

void parse_node(const toml::table& node, Config& c, const std::string& source) {
    check_keys(node, "node",
               {"id", "client_listen", "client_advertise", "peer_listen", "data_dir", "auth_token",
                "dial"},
               source);
    c.node_id = get_str(node, "id", c.node_id, "node", source);
    if (c.node_id.empty() || c.node_id.size() > 64)
        fail(source, "[node] id must be 1..64 characters");
    c.client_listen = get_str(node, "client_listen", c.client_listen, "node", source);
    c.client_advertise = get_str(node, "client_advertise", c.client_listen, "node", source);
    c.data_dir = get_str(node, "data_dir", c.data_dir, "node", source);
    c.auth_token = get_str(node, "auth_token", "", "node", source);
    c.peer_listen = get_str(node, "peer_listen", "", "node", source);
}

void parse_storage(const toml::table& storage, Config& c, const std::string& source) {
    check_keys(storage, "storage", {"fsync", "log_keep", "state_write_entries", "state_write_ms"},
               source);
    const auto fsync = get_str(storage, "fsync", "always", "storage", source);
    if (fsync != "always" && fsync != "never")
        fail(source, "[storage] fsync must be \"always\" or \"never\", not \"" + fsync + "\"");
    c.fsync = fsync == "always";
    c.log_keep = get_int<std::uint64_t>(storage, "log_keep", c.log_keep, 0, 1'000'000'000,
                                        "storage", source);
    c.state_write_entries = get_int<std::uint64_t>(
        storage, "state_write_entries", c.state_write_entries, 1, 10'000'000, "storage", source);
    c.state_write_ms = get_int<std::int64_t>(storage, "state_write_ms", c.state_write_ms, 0,
                                             3'600'000, "storage", source);
}

// [sessions], [log], [admin] and [shard]: a few keys each.
void parse_small_sections(const toml::table& root, Config& c, const std::string& source) {
    const auto& sessions = section_of(root, "sessions", source);
    check_keys(sessions, "sessions", {"grace_ms"}, source);
    c.session_grace_ms = get_int<std::int64_t>(sessions, "grace_ms", c.session_grace_ms, 0,
                                               24LL * 3600 * 1000, "sessions", source);
    const auto& log = section_of(root, "log", source);
    check_keys(log, "log", {"level", "format", "slow_fsync_ms"}, source);
    c.log_level = get_str(log, "level", c.log_level, "log", source);
    c.log_format = get_str(log, "format", c.log_format, "log", source);
    if (c.log_format != "text" && c.log_format != "json")
        fail(source, "[log] format must be \"text\" or \"json\", not \"" + c.log_format + "\"");
    c.slow_fsync_ms = get_int<std::uint32_t>(log, "slow_fsync_ms", c.slow_fsync_ms, 0, 3'600'000,
                                             "log", source);
    const auto& admin = section_of(root, "admin", source);
    check_keys(admin, "admin", {"listen", "tls"}, source);
    c.admin_listen = get_str(admin, "listen", "", "admin", source);
    const std::string admin_tls = get_str(admin, "tls", "off", "admin", source);
    if (admin_tls != "off" && admin_tls != "on")
        fail(source, "[admin] tls must be \"off\" or \"on\", not \"" + admin_tls + "\"");
    c.admin_tls = admin_tls == "on";
    const auto& shard = section_of(root, "shard", source);
    check_keys(shard, "shard", {"name", "map_file", "secret_file"}, source);
    c.shard_name = get_str(shard, "name", "", "shard", source);
    c.shard_map_file = get_str(shard, "map_file", "", "shard", source);
    c.shard_secret_file = get_str(shard, "secret_file", "", "shard", source);
    if (c.shard_name.empty() != c.shard_map_file.empty())
        fail(source, "[shard] needs both name and map_file");
    if (!c.shard_secret_file.empty() && c.shard_name.empty())
        fail(source, "[shard] secret_file needs name and map_file (moves are between shards)");
}

// Keys, defaults and ranges from wire/limits.h.
void parse_limits(const toml::table& t, Config& c, const std::string& source) {
    std::set<std::string> keys;
    for (const auto& l : limits::kConfigLimits)
        keys.emplace(l.key);
    check_keys(t, "limits", keys, source);
    auto& l = c.limits;
    auto limit = [&](const char* key, auto& field, std::uint64_t max) {
        using T = std::remove_reference_t<decltype(field)>;
        const limits::Range& r = limits::config_limit(key);
        field = get_int<T>(t, key, T(r.dflt), T(r.min), T(max), "limits", source);
    };
    auto ranged = [&](const char* key, auto& field) {
        limit(key, field, limits::config_limit(key).max);
    };
    ranged("max_frame_bytes", l.max_frame_bytes);
    ranged("max_key_bytes", l.max_key_bytes);
    // Accepted up to 1 GiB as before, and lowered to what a log record holds: an entry
    // with a larger payload could not be read back (every replica would stop at it).
    limit("max_payload_bytes", l.max_payload_bytes, limits::kMaxPayloadBytesAccepted);
    if (l.max_payload_bytes > limits::kMaxPayloadBytes.max) {
        c.warnings.push_back("[limits] max_payload_bytes = " + std::to_string(l.max_payload_bytes) +
                             " is more than a log record holds; using " +
                             std::to_string(limits::kMaxPayloadBytes.max));
        l.max_payload_bytes = limits::kMaxPayloadBytes.max;
    }
    ranged("max_waiting_takes", l.max_waiting_takes);
    ranged("max_take_count", l.max_take_count);
    ranged("max_connections", l.max_connections);
    ranged("max_connections_per_address", l.max_connections_per_address);
    ranged("max_in_flight", l.max_in_flight);
    ranged("frame_timeout_ms", l.frame_timeout_ms);
    ranged("idle_timeout_ms", l.idle_timeout_ms);
    ranged("max_store_bytes", l.max_store_bytes);
    l.max_store_bytes_set = t.contains("max_store_bytes");
    if (l.max_payload_bytes + l.max_key_bytes + limits::kFrameOverheadBytes > l.max_frame_bytes)
        fail(source, "[limits] max_frame_bytes must exceed max_payload_bytes + max_key_bytes + " +
                         std::to_string(limits::kFrameOverheadBytes));
}

void parse_queues(const toml::node& q, Config& c, const std::string& source) {
    if (!q.is_table()) fail(source, "'queues' must be a table of tables");
    const auto& queues = *q.as_table();
    // [queues.default] sets the defaults of every queue; other tables override them.
    if (auto d = queues.get("default"); d && d->is_table())
        c.queue_defaults = parse_queue(*d->as_table(), c.queue_defaults, "queues.default", source);
    for (const auto& [name, v] : queues) {
        const std::string n(name.str());
        if (!v.is_table()) fail(source, "[queues." + n + "] must be a table");
        if (n.empty() || n.size() > c.limits.max_queue_name_bytes)
            fail(source, "queue name '" + n + "' is too long");
        c.queues[n] = parse_queue(*v.as_table(), c.queue_defaults, "queues." + n, source);
    }
}

// Peer links are TLS unless the file says otherwise, in so many words: the tokens in every
// replicated entry cross the network between datacenters.
void parse_tls(const toml::table& t, Config& c, const std::string& source) {
    check_keys(t, "tls", {"ca_file", "cert_file", "key_file", "peers", "clients"}, source);
    TlsConfig& tls = c.tls;
    tls.ca_file = get_str(t, "ca_file", "", "tls", source);
    tls.cert_file = get_str(t, "cert_file", "", "tls", source);
    tls.key_file = get_str(t, "key_file", "", "tls", source);
    const bool files = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty();
    tls.peers = get_str(t, "peers", files ? "mutual" : "", "tls", source);
    tls.clients = get_str(t, "clients", "off", "tls", source);
    if (tls.peers != "" && tls.peers != "mutual" && tls.peers != "off")
        fail(source, "[tls] peers must be \"mutual\" or \"off\", not \"" + tls.peers + "\"");
    if (tls.clients != "off" && tls.clients != "on" && tls.clients != "mutual")
        fail(source,
             "[tls] clients must be \"off\", \"on\" or \"mutual\", not \"" + tls.clients + "\"");
    const bool clustered = c.members.size() > 1;
    if (clustered && tls.peers.empty())
        fail(source,
             "peer links would be plaintext: give [tls] ca_file, cert_file and key_file (mutual "
             "TLS between members, docs/security.md), or say [tls] peers = \"off\" (loopback "
             "development only)");
    const bool need_files = (clustered && tls.peer_tls()) || tls.client_tls();
    if (need_files && (tls.cert_file.empty() || tls.key_file.empty()))
        fail(source, "[tls] needs cert_file and key_file for TLS on " +
                         std::string(tls.client_tls() ? "the client listener" : "peer links"));
    if (need_files && (tls.peer_tls() || tls.clients == "mutual") && tls.ca_file.empty())
        fail(source, "[tls] needs ca_file to verify the other side's certificates");
    if (c.admin_tls && (tls.cert_file.empty() || tls.key_file.empty() || tls.ca_file.empty()))
        fail(source,
             "[admin] tls = \"on\" needs [tls] cert_file and key_file (what the admin serves "
             "with) and ca_file (how /cluster verifies the other members)");
    if (clustered && tls.peers == "off")
        c.warnings.push_back(
            "[tls] peers = \"off\": peer links are plaintext, and every replicated entry (tokens "
            "included) crosses the network in clear; for loopback development only");
}

}  // namespace

Config parse_config(const std::string& text, const std::string& source) {
    toml::table root;
    try {
        root = toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        std::ostringstream msg;
        msg << e.description() << " at line " << e.source().begin.line << ", column "
            << e.source().begin.column;
        fail(source, msg.str());
    }
    check_keys(root, "top level",
               {"node", "cluster", "raft", "storage", "sessions", "limits", "queues", "log",
                "admin", "shard", "tls"},
               source);
    Config c;
    const auto& node = section_of(root, "node", source);
    parse_node(node, c, source);
    parse_cluster(section_of(root, "cluster", source), c, source);
    parse_dial(node, c, source);
    parse_raft(section_of(root, "raft", source), c.raft, source);
    parse_storage(section_of(root, "storage", source), c, source);
    parse_small_sections(root, c, source);
    parse_limits(section_of(root, "limits", source), c, source);
    if (auto q = root.get("queues")) parse_queues(*q, c, source);
    parse_tls(section_of(root, "tls", source), c, source);
    return c;
}

std::string read_secret_file(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ConfigError(what + ": cannot read '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string secret = ss.str();
    // `echo ... > file` leaves a newline that is not meant as part of the secret.
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r' ||
                               secret.back() == ' ' || secret.back() == '\t'))
        secret.pop_back();
    if (secret.size() < kMinSecretBytes)
        throw ConfigError(what + " '" + path + "' holds " + std::to_string(secret.size()) +
                          " bytes; a secret needs at least " + std::to_string(kMinSecretBytes));
    if (secret.size() > kMaxSecretBytes)
        throw ConfigError(what + " '" + path + "' is over " + std::to_string(kMaxSecretBytes) +
                          " bytes");
    return secret;
}

Config load_config_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw ConfigError("cannot read config file '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    Config c = parse_config(ss.str(), path);
    if (!c.secret_file.empty()) {
        std::filesystem::path secret(c.secret_file);
        if (secret.is_relative()) secret = std::filesystem::path(path).parent_path() / secret;
        c.cluster_secret = read_secret_file(secret.string());
    }
    auto resolve = [&](std::string& file) {
        if (file.empty()) return;
        std::filesystem::path p(file);
        if (p.is_relative()) file = (std::filesystem::path(path).parent_path() / p).string();
    };
    resolve(c.shard_map_file);
    resolve(c.shard_secret_file);
    if (!c.shard_secret_file.empty())
        c.shard_secret = read_secret_file(c.shard_secret_file, "[shard] secret_file");
    resolve(c.tls.ca_file);
    resolve(c.tls.cert_file);
    resolve(c.tls.key_file);
    return c;
}

}  // namespace dueq::node
