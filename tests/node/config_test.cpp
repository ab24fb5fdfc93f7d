#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "node/config.h"
#include "node/config_error.h"

using dueq::node::parse_config;

namespace {
const auto& error_of = dueq::test::config_error;
}  // namespace

TEST_CASE("the built-in config parses to the documented defaults") {
    auto c = parse_config(dueq::node::default_config_text(), "built-in");
    CHECK(c.client_listen == "127.0.0.1:7700");
    CHECK(c.fsync);
    CHECK(c.session_grace_ms == 5000);
    CHECK(c.limits.max_frame_bytes == 16u << 20);
    CHECK(c.queue_defaults.ttr_ms == 60000);
    CHECK(c.auth_token.empty());
    CHECK(c.state_write_entries == 20000);
    CHECK(c.state_write_ms == 1000);
}

TEST_CASE("queue tables inherit [queues.default]") {
    auto c =
        parse_config("[queues.default]\nttr_ms = 5000\n[queues.tokens]\nlead_ms = 30000\n", "t");
    CHECK(c.queues.at("tokens").lead_ms == 30000);
    CHECK(c.queues.at("tokens").ttr_ms == 5000);
    CHECK(c.queue_defaults.ttr_ms == 5000);
}

TEST_CASE("bad configs are refused naming the key") {
    CHECK(error_of("[node]\nidd = \"x\"\n").find("unknown key 'idd' in [node]") !=
          std::string::npos);
    CHECK(error_of("[storage]\nfsync = \"sometimes\"\n").find("fsync") != std::string::npos);
    CHECK(error_of("[sessions]\ngrace_ms = -1\n").find("grace_ms") != std::string::npos);
    CHECK(error_of("[storage]\nstate_write_entries = 0\n").find("state_write_entries") !=
          std::string::npos);
    CHECK(error_of("[storage]\nstate_write_ms = -5\n").find("state_write_ms") != std::string::npos);
    CHECK(error_of("[queues.q]\nlate_share = 2.0\n").find("late_share") != std::string::npos);
    CHECK(error_of("[queues.q]\nttr_ms = \"1s\"\n").find("ttr_ms must be an integer") !=
          std::string::npos);
    CHECK(error_of("[limits]\nmax_frame_bytes = 2000\n").find("max_frame_bytes") !=
          std::string::npos);
    CHECK(error_of("[node\n").find("test.toml") != std::string::npos);
    CHECK(error_of("bogus = 1\n").find("unknown key 'bogus'") != std::string::npos);
}

TEST_CASE("[node] dial overrides where this node dials a member, and is checked") {
    const std::string cluster =
        "[cluster]\nmembers = [\n"
        "  { id = \"n1\", peer = \"127.0.0.1:7801\", client = \"127.0.0.1:7701\" },\n"
        "  { id = \"n2\", peer = \"127.0.0.1:7802\", client = \"127.0.0.1:7702\" },\n"
        "]\n[tls]\npeers = \"off\"\n";
    auto c =
        parse_config("[node]\nid = \"n1\"\ndial = { n2 = \"127.0.0.1:17812\" }\n" + cluster, "t");
    CHECK(c.dial.at("n2") == "127.0.0.1:17812");
    // The override is node-local: the membership fingerprint ignores it.
    auto plain = parse_config("[node]\nid = \"n1\"\n" + cluster, "t");
    CHECK(dueq::node::cluster_fingerprint(c) == dueq::node::cluster_fingerprint(plain));

    // A member that joins later (dueqctl member add) may be named before it is listed.
    CHECK(parse_config("[node]\nid = \"n1\"\ndial = { n9 = \"127.0.0.1:1\" }\n" + cluster, "t")
              .dial.at("n9") == "127.0.0.1:1");
    CHECK(error_of("[node]\nid = \"n1\"\ndial = { n1 = \"127.0.0.1:1\" }\n" + cluster)
              .find("does not dial itself") != std::string::npos);
    CHECK(
        error_of("[node]\nid = \"n1\"\ndial = { n2 = \"nowhere\" }\n" + cluster).find("dial.n2") !=
        std::string::npos);
    CHECK(error_of("[node]\nid = \"n1\"\ndial = { n2 = 5 }\n" + cluster).find("dial.n2") !=
          std::string::npos);
}

TEST_CASE("[raft] autonomy_after_ms defaults to three election timeouts; 0 turns it off") {
    CHECK(parse_config("[raft]\nelection_timeout_ms = 500\n", "t").raft.autonomy_after_ms == 1500);
    CHECK(parse_config("[raft]\nautonomy_after_ms = 0\n", "t").raft.autonomy_after_ms == 0);
    CHECK(parse_config("", "t").raft.autonomy_after_ms == 3000);
    CHECK(error_of("[raft]\nautonomy_after_ms = -5\n").find("autonomy_after_ms") !=
          std::string::npos);
    auto c = parse_config("[queues.tokens]\nautonomous = true\n", "t");
    CHECK(c.queues.at("tokens").autonomous);
    CHECK_FALSE(c.queue_defaults.autonomous);
    CHECK(error_of("[queues.q]\nautonomous = 1\n").find("autonomous") != std::string::npos);
}

TEST_CASE("[raft] proposal_timeout_ms defaults to three election timeouts") {
    CHECK(parse_config("[raft]\nelection_timeout_ms = 500\n", "t").raft.proposal_timeout_ms ==
          1500);
    CHECK(parse_config("[raft]\nproposal_timeout_ms = 250\n", "t").raft.proposal_timeout_ms == 250);
    CHECK(error_of("[raft]\nproposal_timeout_ms = -1\n").find("proposal_timeout_ms") !=
          std::string::npos);
}

TEST_CASE("[cluster] secret_file is read relative to the config file, and checked") {
    namespace fs = std::filesystem;
    const fs::path dir =
        fs::temp_directory_path() / ("dueq-config-secret-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream(dir / name) << text;
        return (dir / name).string();
    };
    write("secret", "0123456789abcdef-secret\n");
    const auto config = write("node.toml", "[cluster]\nid = \"c\"\nsecret_file = \"secret\"\n");
    const auto c = dueq::node::load_config_file(config);
    CHECK(c.cluster_secret == "0123456789abcdef-secret");  // the newline is not part of it
    write("short", "tooshort\n");
    const auto short_config = write("short.toml", "[cluster]\nsecret_file = \"short\"\n");
    CHECK_THROWS_WITH(dueq::node::load_config_file(short_config), Catch::Contains("at least 16"));
    const auto missing = write("missing.toml", "[cluster]\nsecret_file = \"nope\"\n");
    CHECK_THROWS_WITH(dueq::node::load_config_file(missing), Catch::Contains("cannot read"));
    fs::remove_all(dir);
}

TEST_CASE("[limits] for client connections parse and are range-checked") {
    const auto c = parse_config(
        "[limits]\nmax_connections = 50\nmax_connections_per_address = 5\nmax_in_flight = 8\n"
        "frame_timeout_ms = 250\nidle_timeout_ms = 1000\n",
        "t");
    CHECK(c.limits.max_connections == 50);
    CHECK(c.limits.max_connections_per_address == 5);
    CHECK(c.limits.max_in_flight == 8);
    CHECK(c.limits.frame_timeout_ms == 250);
    CHECK(c.limits.idle_timeout_ms == 1000);
    CHECK(error_of("[limits]\nmax_in_flight = 0\n").find("max_in_flight") != std::string::npos);
    CHECK(error_of("[limits]\nframe_timeout_ms = 1\n").find("frame_timeout_ms") !=
          std::string::npos);
    CHECK(parse_config("", "t").limits.idle_timeout_ms == 600'000);
}

TEST_CASE("[admin] listen, a member's admin address and [log] format are read and checked") {
    auto c = parse_config(dueq::node::default_config_text(), "built-in");
    CHECK(c.admin_listen.empty());  // off unless asked for
    CHECK(c.log_format == "text");
    CHECK(c.slow_fsync_ms == 200);
    c = parse_config(R"(
[node]
id = "n1"
[cluster]
secret_file = "s"
members = [
  { id = "n1", peer = "127.0.0.1:1", client = "127.0.0.1:2", admin = "127.0.0.1:3" },
  { id = "n2", peer = "127.0.0.1:4", client = "127.0.0.1:5" },
]
[tls]
peers = "off"
[admin]
listen = "127.0.0.1:3"
[log]
format = "json"
slow_fsync_ms = 0
)",
                     "t.toml");
    CHECK(c.admin_listen == "127.0.0.1:3");
    CHECK(c.members[0].admin == "127.0.0.1:3");
    CHECK(c.members[1].admin.empty());
    CHECK(c.log_format == "json");
    CHECK(c.slow_fsync_ms == 0);
    // The admin address is local knowledge: it does not change the membership fingerprint.
    auto without = c;
    without.members[0].admin.clear();
    CHECK(dueq::node::cluster_fingerprint(c) == dueq::node::cluster_fingerprint(without));
    CHECK(error_of("[log]\nformat = \"xml\"\n").find("[log] format") != std::string::npos);
    CHECK(error_of("[admin]\nport = 1\n").find("port") != std::string::npos);
    CHECK(error_of("[log]\nslow_fsync_ms = -1\n").find("slow_fsync_ms") != std::string::npos);
}

TEST_CASE("[tls]: peer links are TLS unless the file says \"off\", and the files are checked") {
    const std::string cluster =
        "[node]\nid = \"n1\"\n[cluster]\nmembers = [\n"
        "  { id = \"n1\", peer = \"127.0.0.1:7801\", client = \"127.0.0.1:7701\" },\n"
        "  { id = \"n2\", peer = \"127.0.0.1:7802\", client = \"127.0.0.1:7702\" },\n"
        "]\n";
    // A cluster that says nothing about TLS is refused: its links would be plaintext.
    CHECK(error_of(cluster).find("peer links would be plaintext") != std::string::npos);
    auto off = parse_config(cluster + "[tls]\npeers = \"off\"\n", "t");
    CHECK_FALSE(off.tls.peer_tls());
    CHECK_FALSE(off.tls.client_tls());
    REQUIRE(off.warnings.size() == 1);
    CHECK(off.warnings[0].find("plaintext") != std::string::npos);
    // Files given: mutual by default.
    auto on = parse_config(
        cluster + "[tls]\nca_file = \"ca.pem\"\ncert_file = \"n1.pem\"\nkey_file = \"n1.key\"\n"
                  "clients = \"mutual\"\n",
        "t");
    CHECK(on.tls.peer_tls());
    CHECK(on.tls.clients == "mutual");
    CHECK(on.warnings.empty());
    CHECK(error_of(cluster + "[tls]\ncert_file = \"n1.pem\"\nkey_file = \"n1.key\"\n")
              .find("needs ca_file") != std::string::npos);
    CHECK(error_of(cluster + "[tls]\nca_file = \"ca.pem\"\n").find("cert_file and key_file") !=
          std::string::npos);
    CHECK(error_of(cluster + "[tls]\npeers = \"maybe\"\n").find("[tls] peers") != std::string::npos);
    CHECK(error_of("[tls]\nclients = \"yes\"\n").find("[tls] clients") != std::string::npos);
    CHECK(error_of("[tls]\nclients = \"on\"\n").find("cert_file and key_file") !=
          std::string::npos);
    // A standalone node has no peer links: nothing to say.
    CHECK(parse_config("[node]\nid = \"n1\"\n", "t").tls.peers.empty());
}

TEST_CASE("[admin] tls: HTTPS with the [tls] files, all three required") {
    CHECK_FALSE(parse_config("[node]\nid = \"n1\"\n", "t").admin_tls);
    const std::string files =
        "[tls]\nca_file = \"ca.pem\"\ncert_file = \"n1.pem\"\nkey_file = \"n1.key\"\n";
    CHECK(parse_config("[admin]\nlisten = \"127.0.0.1:1\"\ntls = \"on\"\n" + files, "t").admin_tls);
    CHECK(error_of("[admin]\ntls = \"yes\"\n").find("[admin] tls") != std::string::npos);
    // Without a CA, /cluster could not verify the other members.
    CHECK(error_of("[admin]\ntls = \"on\"\n[tls]\ncert_file = \"a\"\nkey_file = \"b\"\n")
              .find("ca_file") != std::string::npos);
    CHECK(error_of("[admin]\ntls = \"on\"\n").find("cert_file and key_file") != std::string::npos);
}
