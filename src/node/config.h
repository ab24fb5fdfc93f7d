// A node's configuration: one TOML file (DESIGN §6). Every key is checked when the file
// is read; an unknown key or a bad value stops the node with a message naming it.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

#include "net/limits.h"
#include "queue/command.h"

namespace dueq::node {

struct ConfigError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Config {
    std::string node_id = "n1";
    std::string client_listen = "127.0.0.1:7700";
    std::string client_advertise;  // what clients are told; defaults to client_listen
    std::string data_dir = "./data/n1";
    std::string auth_token;           // non-empty: clients must say hello with it first
    bool fsync = true;                // storage.fsync: "always" | "never"
    std::uint64_t log_keep = 10'000;  // log entries kept behind the applied index
    queue::Millis session_grace_ms = 5'000;
    std::string log_level = "info";
    net::Limits limits;
    queue::QueueSettings queue_defaults;
    std::map<std::string, queue::QueueSettings> queues;
};

// Parses TOML text; `source` names it in error messages.
Config parse_config(const std::string& text, const std::string& source);
Config load_config_file(const std::string& path);
// The configuration a node runs with when given none: one node on 127.0.0.1:7700.
const std::string& default_config_text();

}  // namespace dueq::node
