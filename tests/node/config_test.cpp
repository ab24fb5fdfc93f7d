#include <catch2/catch.hpp>

#include "node/config.h"

using dueq::node::ConfigError;
using dueq::node::parse_config;

namespace {
std::string error_of(const std::string& toml) {
    try {
        parse_config(toml, "test.toml");
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("the built-in config parses to the documented defaults") {
    auto c = parse_config(dueq::node::default_config_text(), "built-in");
    CHECK(c.client_listen == "127.0.0.1:7700");
    CHECK(c.fsync);
    CHECK(c.session_grace_ms == 5000);
    CHECK(c.limits.max_frame_bytes == 16u << 20);
    CHECK(c.queue_defaults.ttr_ms == 60000);
    CHECK(c.auth_token.empty());
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
    CHECK(error_of("[queues.q]\nlate_share = 2.0\n").find("late_share") != std::string::npos);
    CHECK(error_of("[queues.q]\nttr_ms = \"1s\"\n").find("ttr_ms must be an integer") !=
          std::string::npos);
    CHECK(error_of("[limits]\nmax_frame_bytes = 2000\n").find("max_frame_bytes") !=
          std::string::npos);
    CHECK(error_of("[node\n").find("test.toml") != std::string::npos);
    CHECK(error_of("bogus = 1\n").find("unknown key 'bogus'") != std::string::npos);
}
