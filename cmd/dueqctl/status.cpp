// `dueqctl status`: the cluster at a glance. Every node named with --addr is asked at
// once, each over its own connection (a dead node costs only its own timeout, and a
// follower answers for itself instead of being redirected), then one row per node and
// the leader's view of its peers (replication lag) are printed.
#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <set>
#include <thread>

#include "command_util.h"
#include "output.h"
#include "shards.h"

namespace dueq::dueqctl {
namespace {

struct NodeView {
    std::string address;
    std::optional<client::Error> error;  // set when the node did not answer
    Json status;                         // the status result map, as JSON
};

std::vector<NodeView> ask_all(const Context& ctx, const std::vector<std::string>& addrs) {
    std::vector<std::unique_ptr<client::Client>> clients;
    std::vector<std::future<client::Result<client::StatusResponse>>> answers;
    for (const auto& address : addrs) {
        client::ClientOptions opts = ctx.client_options({address});
        opts.max_redirects = 0;
        clients.push_back(std::make_unique<client::Client>(std::move(opts)));
        answers.push_back(clients.back()->call_async(client::StatusRequest{}, ctx.call_options()));
    }
    std::vector<NodeView> views;
    for (std::size_t i = 0; i < answers.size(); ++i) {
        auto r = answers[i].get();
        NodeView v{addrs[i], std::nullopt, Json::object()};
        if (r.ok())
            v.status = payload_json(r->raw);
        else
            v.error = r.error();
        if (!v.error && !v.status.is_object()) {
            v.error = client::Error(client::Code::internal, "status reply is not a map");
        }
        views.push_back(std::move(v));
    }
    return views;
}

std::string text_of(const Json& j, const char* key, const std::string& absent = "-") {
    if (!j.contains(key) || j[key].is_null()) return absent;
    if (j[key].is_string()) {
        const auto s = j[key].get<std::string>();
        return s.empty() ? absent : s;
    }
    if (j[key].is_boolean()) return j[key].get<bool>() ? "yes" : "no";
    return j[key].dump();
}

bool leads(const Json& s) {
    const auto role = text_of(s, "role");
    return role == "leader" || role == "standalone";
}

// Who this node says leads: "n2 127.0.0.1:7702", "(self)", or "(none)".
std::string leader_text(const Json& s) {
    if (leads(s)) return "(self)";
    const auto id = text_of(s, "leader_id", "");
    const auto address = text_of(s, "leader", "");
    if (id.empty() && address.empty()) return "(none)";
    if (id.empty() || address.empty()) return id + address;
    return id + " " + address;
}

void print_nodes(const std::vector<NodeView>& views) {
    Table t({"NODE", "ADDRESS", "ROLE", "TERM", "LEADER", "COMMIT", "APPLIED", "LAST", "TASKS",
             "MODE"});
    for (const auto& v : views) {
        if (v.error) {
            t.add({"?", v.address, "unreachable", "-", "-", "-", "-", "-", "-", "-"});
            continue;
        }
        const auto& s = v.status;
        t.add({text_of(s, "node_id"), v.address, text_of(s, "role"), text_of(s, "term"),
               leader_text(s), text_of(s, "commit_index"), text_of(s, "applied_index"),
               text_of(s, "last_index"), text_of(s, "tasks"), text_of(s, "mode")});
    }
    t.print();
    for (const auto& v : views) {
        if (v.error) std::cout << v.address << ": " << v.error->to_string() << '\n';
    }
}

// The peers table of one node. Only a leader tracks match and lag.
void print_peers(const NodeView& v) {
    const auto& s = v.status;
    if (!s.contains("peers") || !s["peers"].is_array() || s["peers"].empty()) return;
    const bool leader = text_of(s, "role") == "leader";
    std::cout << '\n'
              << "peers as " << text_of(s, "node_id") << " (" << text_of(s, "role") << ", term "
              << text_of(s, "term") << ") sees them:\n";
    Table t({"PEER", "PEER_ADDRESS", "CONNECTED", "MATCH", "LAG"});
    for (const auto& p : s["peers"]) {
        if (!p.is_object()) continue;
        t.add({text_of(p, "id"), text_of(p, "peer"), text_of(p, "connected"),
               leader ? text_of(p, "match") : "-", leader ? text_of(p, "lag") : "-"});
    }
    t.print();
}

// One line on what needs a person's attention, if anything does.
void print_warnings(const std::vector<NodeView>& views) {
    std::set<std::string> leaders_named;  // by the nodes that know one
    std::vector<std::string> self_leaders;
    for (const auto& v : views) {
        if (v.error) continue;
        if (text_of(v.status, "role") == "leader") {
            self_leaders.push_back(text_of(v.status, "node_id") + " (term " +
                                   text_of(v.status, "term") + ")");
        }
        // By node id where the server sends one, else by client address.
        if (leads(v.status)) {
            leaders_named.insert(text_of(v.status, "node_id"));
        } else if (leader_text(v.status) != "(none)") {
            const auto id = text_of(v.status, "leader_id", "");
            leaders_named.insert(id.empty() ? text_of(v.status, "leader") : id);
        }
    }
    if (leaders_named.empty()) {
        std::cout << "\nno node knows a leader: an election is under way, or no majority is "
                     "connected\n";
    }
    if (self_leaders.size() > 1) {
        std::cout << "\nseveral nodes say they lead:";
        for (const auto& l : self_leaders)
            std::cout << ' ' << l;
        std::cout << " (the older term steps down when it hears the newer one)\n";
    } else if (leaders_named.size() > 1) {
        std::cout << "\nnodes name different leaders: one of them has not heard of the last "
                     "election yet\n";
    }
}

bool leader_known(const std::vector<NodeView>& views) {
    for (const auto& v : views) {
        if (!v.error && leader_text(v.status) != "(none)") return true;
    }
    return false;
}

// One shard's (or the only cluster's) members, asked until one knows a leader or the
// deadline passes.
std::vector<NodeView> ask_until_leader(const Context& ctx, const std::vector<std::string>& addrs,
                                       int64_t wait_ms,
                                       std::chrono::steady_clock::time_point deadline) {
    auto views = ask_all(ctx, addrs);
    while (wait_ms > 0 && !leader_known(views) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        views = ask_all(ctx, addrs);
    }
    return views;
}

// status --shards: every member of every shard, one section per shard.
int run_status_of_shards(Context& ctx, int64_t wait_ms,
                         std::chrono::steady_clock::time_point deadline) {
    std::string why;
    auto map = fetch_shard_map(ctx, &why);
    if (!map) {
        std::cerr << "dueqctl: no shard map: " << why << '\n';
        return 1;
    }
    Json out = {{"map_version", (*map)["version"]}, {"shards", Json::array()}};
    int rc = 0;
    for (const auto& s : (*map)["shards"]) {
        std::vector<std::string> addrs;
        for (const auto& m : s["members"])
            addrs.push_back(m.value("client", ""));
        const auto views = ask_until_leader(ctx, addrs, wait_ms, deadline);
        const std::string name = s.value("name", "?");
        if (!leader_known(views)) rc = 1;
        if (ctx.json) {
            Json nodes = Json::array();
            for (const auto& v : views)
                nodes.push_back(v.error
                                    ? Json{{"address", v.address}, {"error", v.error->to_string()}}
                                    : Json{{"address", v.address}, {"status", v.status}});
            out["shards"].push_back({{"name", name}, {"nodes", nodes}});
            continue;
        }
        std::uint64_t buckets = 0;
        for (const auto& r : s["buckets"])
            if (r.is_array() && r.size() == 2)
                buckets += r[1].get<std::uint64_t>() - r[0].get<std::uint64_t>() + 1;
        std::cout << (out["shards"].empty() ? "" : "\n") << "== shard " << name << " (" << buckets
                  << " of " << map->value("buckets", 0) << " buckets, map version "
                  << map->value("version", 0) << ")\n";
        out["shards"].push_back(name);
        print_nodes(views);
        const NodeView* leader = nullptr;
        for (const auto& v : views)
            if (!v.error && text_of(v.status, "role") == "leader") leader = &v;
        if (leader) print_peers(*leader);
        print_warnings(views);
    }
    if (ctx.json) print_json(out);
    if (rc != 0) std::cerr << "dueqctl: a shard has no leader known\n";
    return rc;
}

int run_status(Context& ctx, const std::string& wait_leader, bool shards) {
    int64_t wait_ms = 0;
    if (!wait_leader.empty() && !parse_duration_arg("--wait-leader", wait_leader, &wait_ms)) {
        return kExitUsage;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    if (shards) return run_status_of_shards(ctx, wait_ms, deadline);
    auto views = ask_until_leader(ctx, ctx.addrs, wait_ms, deadline);
    std::size_t answered = 0;
    for (const auto& v : views)
        answered += v.error ? 0 : 1;

    if (ctx.json) {
        if (views.size() == 1 && !views[0].error) {
            print_json(views[0].status);
        } else {
            Json nodes = Json::array();
            for (const auto& v : views) {
                Json n = {{"address", v.address}};
                if (v.error) {
                    n["error"] = {{"code", v.error->code_name}, {"message", v.error->message}};
                } else {
                    n["status"] = v.status;
                }
                nodes.push_back(std::move(n));
            }
            print_json({{"nodes", nodes}});
        }
    } else if (answered > 0) {
        print_nodes(views);
        // The leader's table shows replication lag; without one, the first node's links.
        const NodeView* peers_of = nullptr;
        for (const auto& v : views) {
            if (v.error) continue;
            if (!peers_of || (text_of(v.status, "role") == "leader" &&
                              text_of(peers_of->status, "role") != "leader")) {
                peers_of = &v;
            }
        }
        if (peers_of) print_peers(*peers_of);
        print_warnings(views);
    }
    if (answered == 0) {
        if (views.size() == 1) return report(*views[0].error);
        for (const auto& v : views)
            std::cerr << v.address << ": " << v.error->to_string() << '\n';
        std::cerr << "dueqctl: none of the " << views.size() << " nodes answered\n";
        return 1;
    }
    if (wait_ms > 0 && !leader_known(views)) {
        std::cerr << "dueqctl: no leader known after " << wait_leader << '\n';
        return 1;
    }
    return 0;
}

}  // namespace

void add_status_command(CLI::App& app, Context& ctx) {
    auto wait_leader = std::make_shared<std::string>();
    auto shards = std::make_shared<bool>(false);
    auto* cmd = command(
        app, ctx, "status",
        "Show every given node's Raft role, term, leader, commit/applied/last index and task "
        "count, and the leader's replication lag per peer.\n\n"
        "Each --addr is asked directly (no redirect), so give every node's address to see the "
        "whole cluster. Exits 1 when no node answered. --json prints the node's status map as "
        "it came (several nodes: {\"nodes\": [{\"address\", \"status\" or \"error\"}]}).",
        "  dueqctl status\n"
        "  dueqctl --addr 127.0.0.1:7701,127.0.0.1:7702,127.0.0.1:7703 status\n"
        "  dueqctl --addr 127.0.0.1:7701 status --json\n"
        "  dueqctl --addr 127.0.0.1:7701,127.0.0.1:7702 status --wait-leader 20s\n"
        "  dueqctl --addr 127.0.0.1:7601 status --shards\n",
        [&ctx, wait_leader, shards] { return run_status(ctx, *wait_leader, *shards); });
    cmd->add_flag("--shards", *shards,
                  "Fetch the shard map from the first --addr that answers (a node or a "
                  "dueq-proxy) and show every member of every shard, shard by shard; with "
                  "--wait-leader, until every shard knows a leader");
    cmd->add_option("--wait-leader", *wait_leader,
                    "Ask again every 100 ms until a node knows a leader, for at most this long; "
                    "exit 1 if none does by then")
        ->type_name("DURATION");
}

}  // namespace dueq::dueqctl
