#include "node/config.h"

#include <toml++/toml.h>

#include <fstream>
#include <set>
#include <sstream>

namespace dueq::node {
namespace {

const std::string kDefault = R"(# dueq: one node on loopback (the built-in default)
[node]
id = "n1"
client_listen = "127.0.0.1:7700"
data_dir = "./data/n1"

[storage]
fsync = "always"    # "always": every reply waits for its log entry's fsync; "never": OS decides
log_keep = 10000    # log entries kept behind the applied index

[sessions]
grace_ms = 5000     # how long a closed connection's tasks stay taken, waiting for a resume

[limits]
max_frame_bytes = 16777216
max_key_bytes = 1024
max_payload_bytes = 1048576
max_take_count = 1000

[queues.default]
lead_ms = 0
ttr_ms = 60000
max_attempts = 0
retention_ms = 3600000
late_share = 0.0
)";

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
    check_keys(t, where, {"lead_ms", "ttr_ms", "max_attempts", "retention_ms", "late_share"},
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
    return s;
}

}  // namespace

const std::string& default_config_text() {
    return kDefault;
}

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
    check_keys(root, "top level", {"node", "storage", "sessions", "limits", "queues", "log"},
               source);
    Config c;
    const toml::table empty;
    auto section = [&](const char* name) -> const toml::table& {
        auto n = root.get(name);
        if (!n) return empty;
        if (!n->is_table()) fail(source, std::string("'") + name + "' must be a table");
        return *n->as_table();
    };

    const auto& node = section("node");
    check_keys(node, "node", {"id", "client_listen", "client_advertise", "data_dir", "auth_token"},
               source);
    c.node_id = get_str(node, "id", c.node_id, "node", source);
    if (c.node_id.empty() || c.node_id.size() > 64)
        fail(source, "[node] id must be 1..64 characters");
    c.client_listen = get_str(node, "client_listen", c.client_listen, "node", source);
    c.client_advertise = get_str(node, "client_advertise", c.client_listen, "node", source);
    c.data_dir = get_str(node, "data_dir", c.data_dir, "node", source);
    c.auth_token = get_str(node, "auth_token", "", "node", source);

    const auto& storage = section("storage");
    check_keys(storage, "storage", {"fsync", "log_keep"}, source);
    const auto fsync = get_str(storage, "fsync", "always", "storage", source);
    if (fsync != "always" && fsync != "never")
        fail(source, "[storage] fsync must be \"always\" or \"never\", not \"" + fsync + "\"");
    c.fsync = fsync == "always";
    c.log_keep = get_int<std::uint64_t>(storage, "log_keep", c.log_keep, 0, 1'000'000'000,
                                        "storage", source);

    const auto& sessions = section("sessions");
    check_keys(sessions, "sessions", {"grace_ms"}, source);
    c.session_grace_ms = get_int<std::int64_t>(sessions, "grace_ms", c.session_grace_ms, 0,
                                               24LL * 3600 * 1000, "sessions", source);

    const auto& log = section("log");
    check_keys(log, "log", {"level"}, source);
    c.log_level = get_str(log, "level", c.log_level, "log", source);

    const auto& limits = section("limits");
    check_keys(limits, "limits",
               {"max_frame_bytes", "max_key_bytes", "max_payload_bytes", "max_take_count"}, source);
    auto& l = c.limits;
    l.max_frame_bytes = get_int<std::size_t>(limits, "max_frame_bytes", l.max_frame_bytes, 1024,
                                             1u << 30, "limits", source);
    l.max_key_bytes =
        get_int<std::size_t>(limits, "max_key_bytes", l.max_key_bytes, 1, 65535, "limits", source);
    l.max_payload_bytes = get_int<std::size_t>(limits, "max_payload_bytes", l.max_payload_bytes, 1,
                                               1u << 30, "limits", source);
    l.max_take_count = get_int<std::uint32_t>(limits, "max_take_count", l.max_take_count, 1,
                                              1'000'000, "limits", source);
    if (l.max_payload_bytes + l.max_key_bytes + 1024 > l.max_frame_bytes)
        fail(source,
             "[limits] max_frame_bytes must exceed max_payload_bytes + max_key_bytes + 1024");

    if (auto q = root.get("queues")) {
        if (!q->is_table()) fail(source, "'queues' must be a table of tables");
        const auto& queues = *q->as_table();
        // [queues.default] sets the defaults of every queue; other tables override them.
        if (auto d = queues.get("default"); d && d->is_table())
            c.queue_defaults =
                parse_queue(*d->as_table(), c.queue_defaults, "queues.default", source);
        for (const auto& [name, v] : queues) {
            const std::string n(name.str());
            if (!v.is_table()) fail(source, "[queues." + n + "] must be a table");
            if (n.empty() || n.size() > l.max_queue_name_bytes)
                fail(source, "queue name '" + n + "' is too long");
            c.queues[n] = parse_queue(*v.as_table(), c.queue_defaults, "queues." + n, source);
        }
    }
    return c;
}

Config load_config_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw ConfigError("cannot read config file '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_config(ss.str(), path);
}

}  // namespace dueq::node
