#include "cluster/cluster.h"

#include <algorithm>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
// For Catch's listener interface (the failure watcher below).
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>
#include <msgpack.hpp>

#include <exception>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "loopback_ports.h"
#include "node/support.h"

namespace dueq::test {

namespace {

// Set when an assertion of the running test case fails, so that a Cluster going out of
// scope knows whether to keep its logs.
bool g_test_failed = false;

struct FailureWatcher : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    void testCaseStarting(const Catch::TestCaseInfo& info) override {
        g_test_failed = false;
        TestEventListenerBase::testCaseStarting(info);
    }
    bool assertionEnded(const Catch::AssertionStats& stats) override {
        if (!stats.assertionResult.isOk()) g_test_failed = true;
        return TestEventListenerBase::assertionEnded(stats);
    }
};

const msgpack::object* field(const msgpack::object& map, const char* key) {
    if (map.type != msgpack::type::MAP) return nullptr;
    for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
        const auto& kv = map.via.map.ptr[i];
        if (kv.key.type == msgpack::type::STR && kv.key.as<std::string>() == key) return &kv.val;
    }
    return nullptr;
}

std::string text_field(const msgpack::object& map, const char* key) {
    const auto* o = field(map, key);
    if (!o || (o->type != msgpack::type::STR && o->type != msgpack::type::BIN)) return "";
    return o->as<std::string>();
}

std::uint64_t uint_field(const msgpack::object& map, const char* key) {
    const auto* o = field(map, key);
    if (!o || o->type != msgpack::type::POSITIVE_INTEGER) return 0;
    return o->as<std::uint64_t>();
}

bool bool_field(const msgpack::object& map, const char* key) {
    const auto* o = field(map, key);
    return o && o->type == msgpack::type::BOOLEAN && o->via.boolean;
}

NodeStatus decode_status(const std::string& raw) {
    auto handle = msgpack::unpack(raw.data(), raw.size());
    const auto& m = handle.get();
    NodeStatus s;
    s.node_id = text_field(m, "node_id");
    s.role = text_field(m, "role");
    s.leader = text_field(m, "leader");
    s.leader_id = text_field(m, "leader_id");
    s.mode = text_field(m, "mode");
    s.term = uint_field(m, "term");
    s.commit_index = uint_field(m, "commit_index");
    s.applied_index = uint_field(m, "applied_index");
    s.last_index = uint_field(m, "last_index");
    s.tasks = uint_field(m, "tasks");
    s.peer_input_dropped = uint_field(m, "peer_input_dropped");
    if (const auto* peers = field(m, "peers"); peers && peers->type == msgpack::type::ARRAY) {
        for (std::uint32_t i = 0; i < peers->via.array.size; ++i) {
            const auto& p = peers->via.array.ptr[i];
            s.peers.push_back({text_field(p, "id"), text_field(p, "peer"),
                               bool_field(p, "connected"), uint_field(p, "match"),
                               uint_field(p, "lag")});
        }
    }
    return s;
}

bool leads(const NodeStatus& s) {
    return s.role == "leader" || s.role == "standalone";
}

CATCH_REGISTER_LISTENER(FailureWatcher)

}  // namespace

std::string string_payload(const std::string& text) {
    msgpack::sbuffer b;
    msgpack::pack(b, text);
    return std::string(b.data(), b.size());
}

std::string payload_string(const std::string& msgpack_bytes) {
    try {
        auto handle = msgpack::unpack(msgpack_bytes.data(), msgpack_bytes.size());
        if (handle.get().type != msgpack::type::STR) return "";
        return handle.get().as<std::string>();
    } catch (const std::exception&) {
        return "";
    }
}

bool test_case_failed() {
    return g_test_failed;
}

Cluster::Cluster(const std::string& name, ClusterOptions options)
    : options_(std::move(options)), dir_(fresh_dir("cluster-" + name)) {
    REQUIRE((options_.nodes == 1 || options_.nodes == 3 || options_.nodes == 5));
    const auto ports = free_loopback_ports(2 * options_.nodes);
    for (int i = 0; i < options_.nodes; ++i) {
        Node n;
        n.id = options_.node_prefix + std::to_string(i + 1);
        n.client_port = ports[std::size_t(2 * i)];
        n.peer_port = ports[std::size_t(2 * i + 1)];
        nodes_.push_back(std::move(n));
    }
    {
        // Every test cluster gets its own secret: a stray node of another test cannot join.
        std::ofstream out(dir_ / "cluster-secret");
        out << "test-secret-" << dir_.filename().string() << "-" << std::random_device{}() << "\n";
        REQUIRE(out.good());
    }
    for (int i = 0; i < size(); ++i) {
        std::ofstream out(dir_ / (node_id(i) + ".toml"));
        out << config_text(i);
        REQUIRE(out.good());
    }
}

std::string Cluster::config_text(int i) const {
    const auto& n = nodes_[std::size_t(i)];
    std::ostringstream c;
    c << "[node]\n"
      << "id = \"" << n.id << "\"\n"
      << "client_listen = \"127.0.0.1:" << n.client_port << "\"\n"
      << "data_dir = \"" << (dir_ / ("data-" + n.id)).string() << "\"\n";
    if (size() > 1) {
        c << "\n[cluster]\nid = \"" << dir_.filename().string() << "\"\n"
          << "secret_file = \"cluster-secret\"\nmembers = [\n";
        for (const auto& m : nodes_) {
            c << "  { id = \"" << m.id << "\", peer = \"127.0.0.1:" << m.peer_port
              << "\", client = \"127.0.0.1:" << m.client_port << "\" },\n";
        }
        // Loopback tests: peer links in clear, said explicitly (docs/security.md).
        c << "]\n\n[tls]\npeers = \"off\"\n\n[raft]\n"
          << "tick_ms = " << options_.tick_ms << "\n"
          << "heartbeat_ms = " << options_.heartbeat_ms << "\n"
          << "election_timeout_ms = " << options_.election_timeout_ms << "\n"
          << "snapshot_entries = " << options_.snapshot_entries << "\n";
    }
    c << "\n[storage]\nfsync = \"" << (options_.fsync ? "always" : "never") << "\"\n"
      << "log_keep = " << options_.log_keep << "\n"
      << "\n[sessions]\ngrace_ms = " << options_.session_grace_ms << "\n"
      << "\n[log]\nlevel = \"" << options_.log_level << "\"\n";
    if (std::size_t(i) < options_.extra_config.size())
        c << "\n" << options_.extra_config[std::size_t(i)] << "\n";
    return c.str();
}

Cluster::~Cluster() {
    for (int i = 0; i < size(); ++i)
        kill9(i);
    if (g_test_failed || std::uncaught_exceptions() > 0) {
        std::cerr << "cluster " << dir_.string() << " kept; the ends of its logs:\n"
                  << log_tails() << std::flush;
        return;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

void Cluster::start(int i) {
    auto& n = nodes_.at(std::size_t(i));
    REQUIRE_FALSE(n.process);
    std::vector<std::string> args{"--config", (dir_ / (n.id + ".toml")).string()};
    args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
    // Marks each start in the log, so that a kept log reads as a story.
    {
        std::ofstream log(log_path(i), std::ios::app);
        log << "---- test harness: starting " << n.id << " at wall ms " << wall_ms() << "\n";
    }
    // dueqd-test is dueqd with the test-only flags (--plant, --power-cut).
    const bool test_flags = std::any_of(args.begin(), args.end(), [](const std::string& a) {
        return a == "--plant" || a == "--power-cut";
    });
#ifdef DUEQD_TEST_BINARY
    const char* binary = test_flags ? DUEQD_TEST_BINARY : DUEQD_BINARY;
#else
    REQUIRE_FALSE(test_flags);  // a build without DUEQ_PLANTED_BUGS has no dueqd-test
    const char* binary = DUEQD_BINARY;
#endif
    n.process = std::make_unique<DueqdProcess>(binary, args, log_path(i));
    REQUIRE(n.process->port() == n.client_port);
}

void Cluster::start_all() {
    for (int i = 0; i < size(); ++i)
        if (!running(i)) start(i);
}

pid_t Cluster::pid(int i) const {
    const auto& n = nodes_.at(std::size_t(i));
    return n.process ? n.process->pid() : -1;
}

void Cluster::kill9(int i) {
    auto& n = nodes_.at(std::size_t(i));
    if (!n.process) return;
    n.process->kill9();
    n.process.reset();
    std::ofstream log(log_path(i), std::ios::app);
    log << "---- test harness: SIGKILLed " << n.id << " at wall ms " << wall_ms() << "\n";
}

void Cluster::terminate(int i) {
    auto& n = nodes_.at(std::size_t(i));
    if (!n.process) return;
    n.process->terminate();
    n.process.reset();
}

void Cluster::pause(int i) {
    const auto& n = nodes_.at(std::size_t(i));
    REQUIRE(n.process);
    ::kill(n.process->pid(), SIGSTOP);
}

void Cluster::resume(int i) {
    const auto& n = nodes_.at(std::size_t(i));
    REQUIRE(n.process);
    ::kill(n.process->pid(), SIGCONT);
}

bool Cluster::running(int i) const {
    return nodes_.at(std::size_t(i)).process != nullptr;
}

std::vector<int> Cluster::running_nodes() const {
    std::vector<int> out;
    for (int i = 0; i < size(); ++i)
        if (running(i)) out.push_back(i);
    return out;
}

std::string Cluster::node_id(int i) const {
    return nodes_.at(std::size_t(i)).id;
}

std::string Cluster::client_address(int i) const {
    return "127.0.0.1:" + std::to_string(nodes_.at(std::size_t(i)).client_port);
}

std::uint16_t Cluster::client_port(int i) const {
    return nodes_.at(std::size_t(i)).client_port;
}

std::uint16_t Cluster::peer_port(int i) const {
    return nodes_.at(std::size_t(i)).peer_port;
}

std::vector<std::string> Cluster::client_addresses() const {
    std::vector<std::string> out;
    for (int i = 0; i < size(); ++i)
        out.push_back(client_address(i));
    return out;
}

int Cluster::index_of_id(const std::string& id) const {
    for (int i = 0; i < size(); ++i)
        if (nodes_[std::size_t(i)].id == id) return i;
    return -1;
}

std::string Cluster::log_path(int i) const {
    return (dir_ / (node_id(i) + ".log")).string();
}

std::string Cluster::log_text(int i) const {
    std::ifstream in(log_path(i));
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string Cluster::log_tails(std::size_t lines) const {
    std::string out;
    for (int i = 0; i < size(); ++i) {
        const auto text = log_text(i);
        // Back from the end past `lines` + 1 newlines (the text ends with one).
        std::size_t from = text.size();
        for (std::size_t n = 0; n <= lines && from > 0; ++n) {
            const auto nl = text.rfind('\n', from - 1);
            from = nl == std::string::npos ? 0 : nl;
        }
        out += "== " + node_id(i) + " (" + log_path(i) + ")\n";
        out += text.substr(from == 0 ? 0 : from + 1) + "\n";
    }
    return out;
}

std::unique_ptr<client::Client> Cluster::client(std::vector<int> nodes,
                                                std::chrono::milliseconds call_timeout) const {
    if (nodes.empty())
        for (int i = 0; i < size(); ++i)
            nodes.push_back(i);
    client::ClientOptions o;
    for (int i : nodes)
        o.seeds.push_back(client_address(i));
    o.call_timeout = call_timeout;
    o.connect_timeout = std::min<std::chrono::milliseconds>(call_timeout, 1000ms);
    return std::make_unique<client::Client>(std::move(o));
}

std::optional<NodeStatus> Cluster::status(int i, std::chrono::milliseconds timeout) const {
    client::ClientOptions o;
    o.seeds = {client_address(i)};
    o.call_timeout = timeout;
    o.connect_timeout = timeout;
    o.max_redirects = 0;
    client::Client c(std::move(o));
    auto r = c.status();
    if (!r.ok()) return std::nullopt;
    try {
        return decode_status(r->raw);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::vector<std::optional<NodeStatus>> Cluster::statuses(std::chrono::milliseconds timeout) const {
    std::vector<std::optional<NodeStatus>> out(static_cast<std::size_t>(size()));
    for (int i : running_nodes())
        out[std::size_t(i)] = status(i, timeout);
    return out;
}

int Cluster::wait_for_leader(std::chrono::milliseconds bound, std::uint64_t above_term) const {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    for (int round = 0; round < 100'000; ++round) {
        const auto all = statuses(500ms);
        int leader = -1;
        for (int i : running_nodes()) {
            const auto& s = all[std::size_t(i)];
            if (s && leads(*s) && (s->term > above_term || s->role == "standalone")) leader = i;
        }
        bool agreed = leader >= 0;
        for (int i : running_nodes()) {
            const auto& s = all[std::size_t(i)];
            if (!agreed || i == leader || !s) continue;
            const auto& l = *all[std::size_t(leader)];
            agreed = s->role == "follower" && s->term == l.term &&
                     s->leader_id == node_id(leader) && s->leader == client_address(leader);
        }
        if (agreed) return leader;
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(20ms);
    }
    return -1;
}

bool Cluster::wait_applied(std::uint64_t index, std::chrono::milliseconds bound) const {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    for (int round = 0; round < 100'000; ++round) {
        bool all = true;
        for (int i : running_nodes()) {
            const auto s = status(i, 500ms);
            all = all && s && s->applied_index >= index;
        }
        if (all) return true;
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(50ms);
    }
    return false;
}

}  // namespace dueq::test
