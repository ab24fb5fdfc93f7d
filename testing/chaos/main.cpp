// dueq-chaos-workload: the client side of testing/chaos (see docs/reliability.md).
//   run     the token refresh workload against a cluster, appending to a history file
//   final   once the cluster is healed: waits until every node has applied the same
//           index, then reads every key on every node and appends `final` events (with
//           --shard-map and --shard: only the keys of that shard, on that shard's nodes)
//   status  one JSON line per node (role, term, leader, indexes), for the harness
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "../../cmd/common/credential_flags.h"
#include "client/client.h"
#include "history.h"
#include "shard/request_map.h"
#include "shard/shard_map.h"
#include "shard/sharded_client.h"
#include "wire/protocol.h"
#include "workload.h"

using namespace dueq;
using namespace dueq::chaos;

namespace {

std::vector<NodeAddress> parse_nodes(const std::vector<std::string>& specs) {
    std::vector<NodeAddress> out;
    for (const auto& s : specs) {
        const auto eq = s.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
            throw CLI::ValidationError("--node", "expected ID=HOST:PORT, got '" + s + "'");
        out.push_back({s.substr(0, eq), s.substr(eq + 1)});
    }
    return out;
}

// The credential flags, for every subcommand's clients.
client::Credentials credentials;

std::unique_ptr<client::Client> direct(const NodeAddress& n, std::int64_t timeout_ms) {
    client::ClientOptions co;
    credentials.apply(co);
    co.seeds = {n.address};
    co.call_timeout = std::chrono::milliseconds(timeout_ms);
    co.connect_timeout = std::chrono::milliseconds(timeout_ms);
    co.max_redirects = 0;
    return std::make_unique<client::Client>(co);
}

Json status_of(const NodeAddress& n) {
    auto c = direct(n, 1000);
    auto s = c->status();
    if (!s) return {{"node", n.id}, {"ok", false}, {"error", s.error().to_string()}};
    return {{"node", n.id},
            {"ok", true},
            {"role", s->role},
            {"term", s->term},
            {"leader", s->leader},
            {"commit_index", s->commit_index},
            {"applied_index", s->applied_index},
            {"mode", s->mode}};
}

// One consistent snapshot of every node: all at the same applied index before and after
// every key was read, so the reads describe that index on each of them.
// `shard` non-empty: only the keys the map gives that shard, and every event names it.
bool read_final(const std::vector<NodeAddress>& nodes, const std::string& queue,
                const std::vector<std::string>& keys, const std::string& shard,
                std::vector<Json>& events) {
    std::vector<Json> before;
    for (const auto& n : nodes) before.push_back(status_of(n));
    for (const auto& s : before)
        if (!s["ok"] || s["applied_index"] != before[0]["applied_index"] ||
            s["commit_index"] != s["applied_index"])
            return false;
    events.clear();
    for (const auto& n : nodes) {
        auto c = direct(n, 2000);
        for (const auto& key : keys) {
            auto r = c->get({.queue = queue, .key = key, .consistency = "local"});
            Json e{{"type", "final"}, {"node", n.id}, {"key", key}};
            if (!shard.empty()) e["shard"] = shard;
            if (r) {
                e["present"] = true;
                e["value"] = payload_text(r->task.payload);
                e["status"] = r->task.status;
                e["time"] = r->task.time;
                e["version"] = r->task.version;
            } else if (r.code() == client::Code::not_found) {
                e["present"] = false;
            } else {
                return false;
            }
            events.push_back(std::move(e));
        }
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        auto after = status_of(nodes[i]);
        if (after["applied_index"] != before[i]["applied_index"]) return false;
        Json e{{"type", "final_node"},
               {"node", nodes[i].id},
               {"applied_index", after["applied_index"]},
               {"commit_index", after["commit_index"]}};
        if (!shard.empty()) e["shard"] = shard;
        events.push_back(std::move(e));
    }
    return true;
}

// The map `node` routes by now: moved buckets with their new owners.
std::optional<shard::ShardMap> live_shard_map(const NodeAddress& node) {
    auto c = direct(node, 5000);
    const auto op = wire::op_name(wire::Op::shards);
    auto r = c->call_raw(op, shard::request_map(op, 0)->get());
    if (!r.ok() || !r->ok) return std::nullopt;
    return shard::map_from_answer(*r->map);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"dueq-chaos-workload: the client side of the chaos harness (testing/chaos, "
                 "docs/reliability.md). Usually started by testing/chaos/run.sh."};
    app.require_subcommand(1);
    std::vector<std::string> node_specs;
    WorkloadOptions o;
    std::string history_path, scenario = "manual";
    std::int64_t grace_ms = 0;

    auto* run = app.add_subcommand("run", "run the token refresh workload, appending to --history");
    auto* fin = app.add_subcommand(
        "final", "wait until every node applied the same index, then append every key's state "
                 "on every node to --history");
    auto* st = app.add_subcommand("status", "print one JSON line per node");
    int wait_s = 60;
    for (auto* sc : {run, fin, st}) {
        sc->add_option("--node", node_specs, "ID=HOST:PORT of a node's client listener (repeat)")
            ->required();
        cmd::add_credential_flags(*sc, credentials);
    }
    for (auto* sc : {run, fin}) {
        sc->add_option("--history", history_path, "JSON-lines history file (appended)")
            ->required();
        sc->add_option("--queue", o.queue, "queue of the tokens")->capture_default_str();
        sc->add_option("--keys", o.keys, "number of tokens")->capture_default_str()->check(
            CLI::Range(1, 100000));
    }
    run->add_option("--seconds", o.seconds, "how long to run")->capture_default_str()->check(
        CLI::Range(1, 24 * 3600));
    run->add_option("--seed", o.seed, "random seed")->capture_default_str();
    run->add_option("--scenario", scenario, "name written to the history's meta line");
    run->add_option("--ttr-ms", o.ttr_ms, "lease length of every take")->capture_default_str();
    run->add_option("--refresh-ms", o.refresh_ms, "an acked token comes due this much later")
        ->capture_default_str();
    run->add_option("--refreshers", o.refreshers_per_node, "refreshers per node")
        ->capture_default_str();
    run->add_option("--grace-ms", grace_ms, "the nodes' [sessions] grace_ms (for the checker)");
    run->add_option("--call-timeout-ms", o.call_timeout_ms, "client call timeout")
        ->capture_default_str();
    std::vector<std::string> via_specs;
    run->add_option("--only-node", o.only_node,
                    "run only this node's front end and refreshers (one datacenter)");
    run->add_option("--via", via_specs,
                    "ID=HOST:PORT: how this datacenter reaches node ID (repeat); then calls go "
                    "to --only-node or the leader it names, never through client redirects");
    run->add_flag("!--no-seed", o.seed_keys, "do not put every token first");
    run->add_option("--delete-percent", o.delete_percent, "share of front-end ops that delete")
        ->capture_default_str()
        ->check(CLI::Range(0, 90));
    run->add_option("--leader-read-share", o.leader_read_share,
                    "share of the gets that ask consistency \"leader\" (none with --only-node)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    fin->add_option("--wait-seconds", wait_s, "give up after this long")->capture_default_str();
    std::string map_file, shard;
    run->add_option("--shard-map", map_file,
                    "a sharded cluster's map (docs/sharding.md): the meta line names each "
                    "key's shard, for the checker (lease ids are unique per shard)");
    auto* map_opt = fin->add_option("--shard-map", map_file,
                                    "a sharded cluster's map: read only --shard's keys");
    fin->add_option("--shard", shard, "the shard whose nodes --node names")->needs(map_opt);
    bool live_map = false, moves = false;
    fin->add_flag("--live-map", live_map,
                  "which keys are --shard's: as its first --node routes now (buckets may have "
                  "moved since the map file was written), not as the file says")
        ->needs(map_opt);
    run->add_flag("--moves", moves,
                  "buckets move between shards during the run: the meta line says lease ids "
                  "are unique per key (a moved task keeps its lease id), not per shard");
    map_opt->needs("--shard");
    CLI11_PARSE(app, argc, argv);
    if (client::ClientOptions probe; !credentials.apply(probe).empty()) {
        std::cerr << "dueq-chaos-workload: " << credentials.apply(probe) << "\n";
        return 2;
    }
    o.credentials = credentials;

    std::vector<NodeAddress> nodes;
    try {
        nodes = parse_nodes(node_specs);
        for (const auto& v : parse_nodes(via_specs)) o.via[v.id] = v.address;
    } catch (const CLI::Error& e) {
        return app.exit(e);
    }
    if (!o.via.empty() && (o.only_node.empty() || !o.via.count(o.only_node))) {
        std::cerr << "dueq-chaos-workload: --via needs --only-node, and a route to it\n";
        return 2;
    }
    if (st->parsed()) {
        for (const auto& n : nodes) std::cout << status_of(n).dump() << std::endl;
        return 0;
    }
    History history(history_path);
    if (!history.good()) {
        std::cerr << "dueq-chaos-workload: cannot write " << history_path << "\n";
        return 2;
    }
    o.nodes = nodes;
    std::optional<shard::ShardMap> map;
    try {
        if (!map_file.empty()) map = shard::load_shard_map_file(map_file);
    } catch (const shard::MapError& e) {
        std::cerr << "dueq-chaos-workload: " << e.what() << "\n";
        return 2;
    }
    if (live_map && map) {
        map = live_shard_map(nodes.front());
        if (!map) {
            std::cerr << "dueq-chaos-workload: " << nodes.front().address << " gave no shard map\n";
            return 1;
        }
    }
    if (run->parsed()) {
        Json ids = Json::array(), keys = Json::array();
        for (const auto& n : nodes) ids.push_back(n.id);
        for (int k = 0; k < o.keys; ++k) keys.push_back(key_name(k));
        Json meta{{"type", "meta"},       {"scenario", scenario}, {"seed", o.seed},
                  {"grace_ms", grace_ms}, {"ttr_ms", o.ttr_ms},   {"nodes", ids},
                  {"keys", keys}};
        if (map) {
            Json shards = Json::object();
            for (int k = 0; k < o.keys; ++k)
                shards[key_name(k)] = map->shards[map->shard_of(o.queue, key_name(k))].name;
            meta["key_shards"] = std::move(shards);
        }
        if (moves) meta["lease_scope"] = "key";
        history.write(std::move(meta));
        const auto acks = run_workload(o, history);
        std::cerr << "dueq-chaos-workload: " << acks << " refreshes acked in " << o.seconds
                  << " s\n";
        return 0;
    }
    const auto own = map ? map->find(shard) : std::nullopt;
    if (map && !own) {
        std::cerr << "dueq-chaos-workload: " << map_file << " has no shard '" << shard << "'\n";
        return 2;
    }
    std::vector<std::string> keys;
    for (int k = 0; k < o.keys; ++k)
        if (!map || map->shard_of(o.queue, key_name(k)) == *own) keys.push_back(key_name(k));
    const auto give_up = wall_ms() + std::int64_t(wait_s) * 1000;
    std::vector<Json> events;
    while (wall_ms() < give_up) {
        if (read_final(nodes, o.queue, keys, shard, events)) {
            for (auto& e : events) history.write(std::move(e));
            return 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::cerr << "dueq-chaos-workload: the nodes did not settle on one applied index within "
              << wait_s << " s:\n";
    for (const auto& n : nodes) std::cerr << "  " << status_of(n).dump() << "\n";
    Json failed{{"type", "final_failed"}, {"reason", "no common applied index"}};
    if (!shard.empty()) failed["shard"] = shard;
    history.write(std::move(failed));
    return 1;
}
