// dueq-bench: how fast dueq is, beside the systems its users would otherwise pick,
// measured by the same client code in the same run. See `dueq-bench --help` and
// docs/benchmarks.md.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "../../cmd/common/credential_flags.h"
#include "backends.h"
#include "drill.h"
#include "failover.h"
#include "load.h"
#include "probes.h"
#include "report.h"
#include "shard/shard_map.h"

using namespace dueq::bench;

namespace {

const std::map<std::string, BackendKind> kBackends{{"dueq", BackendKind::dueq},
                                                   {"tarantool", BackendKind::tarantool},
                                                   {"etcd", BackendKind::etcd}};

const char* kIntro =
    "dueq-bench: throughput, latency and the refresh drill for dueq and its peers.\n"
    "\n"
    "The same asynchronous client code (one io_context per thread, many connections, a\n"
    "pipelining depth per connection) drives every backend:\n"
    "  dueq       dueqd's client protocol (docs/protocol.md)\n"
    "  tarantool  Tarantool 2.6 over IPROTO CALL, running the equivalent queue in Lua\n"
    "             (measure/bench/peers/tarantool/queue.lua, started by peers/tarantool.sh)\n"
    "  etcd       etcd 3.4's HTTP/JSON gateway, put and get only (the Raft peer)\n"
    "\n"
    "Scenarios print a table on stdout (--json: one JSON object) and a progress line on\n"
    "stderr once a second. With several --addr (a cluster), the load goes to the leader.\n"
    "\n"
    "The whole comparison, servers started and stopped for you, page rendered:\n"
    "  measure/bench/run-all.sh                       everything -> docs/benchmarks.md\n"
    "  PARTS=single measure/bench/run-all.sh          dueq beside Tarantool, one node\n"
    "  PARTS=cluster measure/bench/run-all.sh         3-node dueq beside 3-member etcd\n"
    "  PARTS=drill measure/bench/run-all.sh           the refresh drill on dueq and Tarantool\n"
    "  SCALE=small PAGE=- measure/bench/run-all.sh    all of it at small scale, page on stdout\n"
    "Against a server you started: dueq-bench drill --addr HOST:PORT";

struct Common {
    std::string backend = "dueq";
    dueq::client::Credentials credentials;  // dueq only: TLS and the hello token
    bool json = false;
    bool quiet = false;
};

void add_target(CLI::App* c, Common& common, std::vector<std::string>& addrs) {
    c->add_option("--backend,-b", common.backend, "dueq | tarantool | etcd")
        ->check(CLI::IsMember({"dueq", "tarantool", "etcd"}))
        ->capture_default_str();
    c->add_option("--addr,-a", addrs,
                  "host:port of the server; give every member of a cluster (repeat or "
                  "comma-separate)")
        ->delimiter(',')
        ->capture_default_str();
    c->add_flag("--json", common.json, "print one JSON object on stdout instead of a table");
    c->add_flag("--quiet,-q", common.quiet, "no progress line on stderr");
    dueq::cmd::add_credential_flags(*c, common.credentials);
}

void add_load_options(CLI::App* c, LoadOptions& o, bool with_duration) {
    c->add_option("--connections,-c", o.connections, "client connections")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    c->add_option("--depth,-d", o.depth, "requests in flight per connection (pipelining)")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    c->add_option("--threads,-t", o.threads, "client threads, each with its own io_context")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    if (with_duration) {
        c->add_option("--warmup", o.warmup_s, "seconds of load before measuring")
            ->check(CLI::Range(0.0, 3600.0))
            ->capture_default_str();
        c->add_option("--seconds,-s", o.seconds, "seconds measured (with --ops: an upper bound)")
            ->check(CLI::Range(0.1, 86400.0))
            ->capture_default_str();
        c->add_option("--ops", o.max_ops, "stop after this many measured ops (0: by time)")
            ->capture_default_str();
    }
    c->add_option("--keys,-k", o.keys, "distinct keys (tasks preloaded for get/refresh/mixed)")
        ->check(CLI::Range(1ull, 1'000'000'000ull))
        ->capture_default_str();
    c->add_option("--key-bytes", o.key_bytes, "key length (\"k\" and a zero-padded number)")
        ->check(CLI::Range(2, 1024))
        ->capture_default_str();
    c->add_option("--payload-bytes,-p", o.payload_bytes, "payload size")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    c->add_option("--queue", o.queue, "queue name")->capture_default_str();
    c->add_option("--lead-ms", o.lead_ms, "the queue's lead_ms (declared first)")
        ->check(CLI::Range(0ll, 86'400'000ll))
        ->capture_default_str();
}

BackendKind backend_of(const Common& c) {
    return kBackends.at(c.backend);
}

// With several members, load goes to the one that leads.
std::vector<std::string> leader_only(BackendKind kind, const std::vector<std::string>& addrs) {
    if (addrs.size() <= 1) return addrs;
    return {addrs[find_leader(kind, addrs)]};
}

void emit(const Common& common, const std::string& command, const nlohmann::json& results,
          const std::string& table) {
    if (common.json) {
        nlohmann::json j = {{"command", command}, {"results", results}};
        std::cout << j.dump() << std::endl;
    } else {
        std::cout << table << std::flush;
    }
}

// RSS of a process in bytes, from /proc/PID/status.
std::int64_t rss_bytes(int pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
    throw std::runtime_error("no RSS for pid " + std::to_string(pid) + " (is it running?)");
}

}  // namespace

int main(int argc, char** argv) {
    signal(SIGPIPE, SIG_IGN);
    CLI::App app{kIntro, "dueq-bench"};
    app.require_subcommand(1);
    app.get_formatter()->column_width(34);
    Common common;
    LoadOptions load;
    std::vector<std::string> addrs{"127.0.0.1:7700"};

    // The load scenarios share one set of options.
    struct Sub {
        const char* name;
        Scenario scenario;
        const char* help;
    };
    const Sub subs[] = {
        {"put", Scenario::put,
         "upserts of random keys among --keys, each due in an hour; reports put"},
        {"get", Scenario::get, "reads of random keys among --keys (preloaded first); reports get"},
        {"refresh", Scenario::refresh,
         "the product's main loop: take one due task, ack it with a new payload and a new "
         "time (due again at once); --keys tasks are preloaded as due. Reports take, ack "
         "and the whole refresh cycle"},
        {"mixed", Scenario::mixed,
         "front ends and refreshers at once: --refreshers connections refresh, the others "
         "read (--read-share) and write tokens; reports get, put, take, ack, refresh"},
        {"preload", Scenario::preload,
         "puts --keys tasks with --payload-bytes payloads, once each, as fast as the "
         "pipeline allows; due times spread over --spread-ms from now + --time-offset-ms"},
    };
    std::map<CLI::App*, Scenario> scenario_of;
    std::string shard_map, only_shard;
    for (const auto& s : subs) {
        auto* c = app.add_subcommand(s.name, s.help);
        add_target(c, common, addrs);
        add_load_options(c, load, s.scenario != Scenario::preload);
        if (s.scenario == Scenario::get || s.scenario == Scenario::refresh ||
            s.scenario == Scenario::mixed)
            c->add_flag("!--no-preload", load.preload,
                        "skip the preload (the keys are already there)");
        if (s.scenario == Scenario::mixed) {
            c->add_option("--refreshers", load.refreshers,
                          "connections that refresh (default: a quarter, at least 1)");
            c->add_option("--read-share", load.read_share,
                          "share of front-end ops that are gets; the rest are puts of "
                          "tokens due now")
                ->check(CLI::Range(0.0, 1.0))
                ->capture_default_str();
        }
        if (s.scenario == Scenario::preload) {
            c->add_option("--spread-ms", load.spread_ms, "spread the due times over this span")
                ->capture_default_str();
            c->add_option("--time-offset-ms", load.time_offset_ms,
                          "first due time relative to now (negative: already due)")
                ->capture_default_str();
        }
        c->add_option("--shard-map", shard_map,
                      "dueq, sharded: the shard map file (docs/sharding.md), for --only-shard")
            ->check(CLI::ExistingFile);
        c->add_option("--only-shard", only_shard,
                      "dueq, sharded: use only those of the --keys keys that belong to this "
                      "shard (e.g. to load a shard's leader without forwarding, or a node of "
                      "another shard with forwarding only)")
            ->needs("--shard-map");
        scenario_of[c] = s.scenario;
    }

    DrillOptions drill;
    std::string drill_order = "both";
    auto* dc = app.add_subcommand(
        "drill",
        "the refresh drill: preload --tokens tokens whose expiries are spread over a "
        "compressed hour (--hour-ms), --late-share of them already expired (the outage); "
        "--refreshers workers each spend --service-ms per refresh. Reports the tokens that "
        "could still have been saved but expired anyway, and how long the backlog took to "
        "drain, with the deadline-aware order (lead_ms = --lead-ms) and with plain "
        "earliest-first order (lead_ms = 0, each task due lead_ms before its token "
        "expires). The refresh capacity (refreshers / service time) must exceed the "
        "arrival rate (tokens / hour) for the backlog to drain: for 10M tokens give "
        "--hour-ms 3600000");
    add_target(dc, common, addrs);
    dc->add_option("--tokens,-n", drill.tokens, "tokens preloaded")
        ->check(CLI::Range(1ull, 1'000'000'000ull))
        ->capture_default_str();
    dc->add_option("--hour-ms", drill.hour_ms, "a token's lifetime (the compressed hour)")
        ->check(CLI::Range(1000ll, 86'400'000ll))
        ->capture_default_str();
    dc->add_option("--lead-ms", drill.lead_ms, "refresh this long before expiry (0: hour / 12)")
        ->capture_default_str();
    dc->add_option("--late-share", drill.late_share,
                   "share of tokens already expired when the refreshers start")
        ->check(CLI::Range(0.0, 0.99))
        ->capture_default_str();
    dc->add_option("--refreshers,-w", drill.refreshers, "refresher workers")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    dc->add_option("--connections,-c", drill.connections, "connections the refreshers share")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    dc->add_option("--service-ms", drill.service_ms, "time each refresh spends at the provider")
        ->check(CLI::Range(0ll, 60'000ll))
        ->capture_default_str();
    dc->add_option("--poll-ms", drill.poll_ms, "pause after a take that found nothing due")
        ->check(CLI::Range(1ll, 10'000ll))
        ->capture_default_str();
    dc->add_option("--seconds,-s", drill.seconds,
                   "the window each order runs for (refreshed tokens must not come due again "
                   "in it)")
        ->capture_default_str();
    dc->add_option("--payload-bytes,-p", drill.payload_bytes, "token payload size")
        ->capture_default_str();
    dc->add_option("--key-bytes", drill.key_bytes, "key length")->capture_default_str();
    dc->add_option("--order", drill_order, "deadline | earliest | both")
        ->check(CLI::IsMember({"deadline", "earliest", "both"}))
        ->capture_default_str();
    dc->add_option("--preload-rate", drill.preload_rate,
                   "puts/s assumed when scheduling the start after the preload")
        ->capture_default_str();
    dc->add_option("--queue", drill.queue, "queue name")->capture_default_str();

    FailoverOptions fo;
    auto* fc = app.add_subcommand(
        "failover",
        "kill -9 the leader of a 3+ member cluster, time until the first op succeeds on a "
        "survivor (dueq: a take; etcd: a put), restart the member, repeat. Needs every "
        "member's --addr and --pid in the same order and a --restart-cmd");
    add_target(fc, common, addrs);
    fc->add_option("--pid", fo.pids, "the members' PIDs, in --addr order")->delimiter(',');
    fc->add_option("--restart-cmd", fo.restart_cmd,
                   "shell command restarting member {i} (1-based); prints its new PID last");
    fc->add_option("--kills", fo.kills, "how many times")->capture_default_str();
    std::string signal_name = "kill";
    fc->add_option("--signal", signal_name,
                   "kill: SIGKILL, a crash (the kernel closes its sockets at once); stop: "
                   "SIGSTOP, a hung node or a partition (only missing heartbeats tell), killed "
                   "after the measurement")
        ->check(CLI::IsMember({"kill", "stop"}))
        ->capture_default_str();
    fc->add_option("--probe-ms", fo.probe_ms, "pause between probes of one member")
        ->capture_default_str();
    fc->add_option("--settle-ms", fo.settle_ms, "pause after the cluster is whole again")
        ->capture_default_str();
    fc->add_option("--timeout", fo.timeout_s, "seconds allowed per kill")->capture_default_str();

    int mem_pid = 0;
    auto* mc = app.add_subcommand(
        "memory",
        "bytes per task: the server's RSS (--pid) before and after preloading --keys tasks, "
        "and the store's own accounting where the backend reports it (Tarantool: memtx "
        "tuples + indexes; dueq: see measure/queue-mem). Figures are beyond key and payload");
    add_target(mc, common, addrs);
    add_load_options(mc, load, false);
    mc->add_option("--pid", mem_pid, "the server's PID")->required();
    mc->add_option("--spread-ms", load.spread_ms,
                   "spread the due times over this span (tokens: their expiries)")
        ->capture_default_str();
    mc->add_flag("--random-payloads", load.random_payloads,
                 "payloads of random printable bytes, as tokens are (default: all 'x', which "
                 "compresses)");

    double wait_timeout = 600;
    std::uint64_t wait_key = 0;
    auto* wc = app.add_subcommand(
        "wait",
        "wait until the server answers a get of a preloaded key (after a restart); prints "
        "the ms waited");
    add_target(wc, common, addrs);
    wc->add_option("--timeout", wait_timeout, "seconds")->capture_default_str();
    wc->add_option("--queue", load.queue, "queue of the key")->capture_default_str();
    wc->add_option("--key-index", wait_key, "the key is key number N (as preload names them)")
        ->capture_default_str();
    wc->add_option("--key-bytes", load.key_bytes, "key length")->capture_default_str();

    double checkpoint_timeout = 600;
    auto* cc = app.add_subcommand(
        "checkpoint",
        "Tarantool: write a snapshot (box.snapshot()), so that a restart reads it instead of "
        "replaying the write-ahead log; dueq has nothing to force (it says so and fails)");
    add_target(cc, common, addrs);
    cc->add_option("--timeout", checkpoint_timeout, "seconds")->capture_default_str();

    auto* lc = app.add_subcommand("leader", "print the address of the member that leads");
    add_target(lc, common, addrs);

    std::string report_dir;
    auto* rc = app.add_subcommand(
        "report", "render docs/benchmarks.md from the JSON files a run-all.sh run wrote");
    rc->add_option("dir", report_dir, "the run's result directory")->required();

    CLI11_PARSE(app, argc, argv);
    if (auto err = set_dueq_credentials(common.credentials); !err.empty()) {
        std::fprintf(stderr, "dueq-bench: %s\n", err.c_str());
        return 2;
    }

    try {
        const auto kind = backend_of(common);
        for (auto& [sub, scenario] : scenario_of) {
            if (!sub->parsed()) continue;
            load.backend = kind;
            load.addrs = leader_only(kind, addrs);
            load.scenario = scenario;
            load.progress = !common.quiet;
            if (!only_shard.empty()) {
                const auto map = dueq::shard::load_shard_map_file(shard_map);
                const auto index = map.find(only_shard);
                if (!index)
                    throw std::runtime_error("no shard '" + only_shard + "' in " + shard_map);
                for (std::uint64_t i = 0; i < load.keys; ++i)
                    if (map.shard_of(load.queue, key_of(i, load.key_bytes)) == *index)
                        load.key_numbers.push_back(i);
                if (load.key_numbers.empty())
                    throw std::runtime_error("none of the keys belongs to shard " + only_shard);
            }
            std::vector<LoadResult> results;
            if (load.preload && (scenario == Scenario::get || scenario == Scenario::refresh ||
                                 scenario == Scenario::mixed)) {
                LoadOptions p = load;
                p.scenario = Scenario::preload;
                p.connections = std::min(load.connections * load.depth, 16);
                p.depth = 64;
                p.seconds = 7200;
                p.time_offset_ms = -1;
                p.spread_ms = 0;
                results.push_back(run_load(p));
            }
            if (scenario == Scenario::preload) load.seconds = 7200;
            results.push_back(run_load(load));
            nlohmann::json js = nlohmann::json::array();
            for (auto& r : results)
                js.push_back(to_json(r));
            emit(common, sub->get_name(), js, to_table(results));
            return 0;
        }
        if (dc->parsed()) {
            drill.backend = kind;
            drill.addrs = leader_only(kind, addrs);
            drill.progress = !common.quiet;
            if (drill_order == "deadline") drill.orders = {DrillOrder::deadline};
            if (drill_order == "earliest") drill.orders = {DrillOrder::earliest};
            auto results = run_drill(drill);
            nlohmann::json js = nlohmann::json::array();
            for (auto& r : results)
                js.push_back(to_json(r));
            emit(common, "drill", js, to_table(results));
            return 0;
        }
        if (fc->parsed()) {
            fo.backend = kind;
            fo.addrs = addrs;
            fo.progress = !common.quiet;
            fo.stop_instead = signal_name == "stop";
            auto r = run_failover(fo);
            auto j = r.to_json(fo);
            char line[200];
            std::snprintf(line, sizeof line,
                          "%s failover: median %.0f ms over %zu kills (min %.0f, max %.0f)\n",
                          common.backend.c_str(), j["median_ms"].get<double>(), r.ms.size(),
                          j["min_ms"].get<double>(), j["max_ms"].get<double>());
            emit(common, "failover", nlohmann::json::array({j}), line);
            return 0;
        }
        if (mc->parsed()) {
            load.backend = kind;
            load.addrs = leader_only(kind, addrs);
            load.scenario = Scenario::preload;
            load.seconds = 7200;
            load.progress = !common.quiet;
            const auto before = rss_bytes(mem_pid);
            auto pre = run_load(load);
            // A figure per task is only worth something if every task is there.
            const auto& puts = pre.ops[std::size_t(Op::put)];
            if (puts.errors > 0 || puts.ops < load.keys) {
                std::fprintf(stderr,
                             "dueq-bench memory: the preload stored %llu of %llu tasks "
                             "(%llu puts failed); no figures\n",
                             (unsigned long long)(puts.ops - puts.errors),
                             (unsigned long long)load.keys, (unsigned long long)puts.errors);
                return 1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            const auto after = rss_bytes(mem_pid);
            const double n = double(load.keys);
            const double kp = double(load.key_bytes + load.payload_bytes);
            nlohmann::json j = {{"backend", common.backend},
                                {"tasks", load.keys},
                                {"key_bytes", load.key_bytes},
                                {"payload_bytes", load.payload_bytes},
                                {"rss_before", before},
                                {"rss_after", after},
                                {"rss_per_task", double(after - before) / n},
                                {"rss_beyond_key_payload", double(after - before) / n - kp},
                                {"preload", to_json(pre)}};
            if (auto bytes = store_bytes(kind, load.addrs[0])) {
                j["store_bytes"] = *bytes;
                j["store_beyond_key_payload"] = double(*bytes) / n - kp;
            }
            char line[300];
            std::snprintf(line, sizeof line,
                          "%s: %llu tasks, RSS %.1f bytes/task beyond key and payload%s\n",
                          common.backend.c_str(), (unsigned long long)load.keys,
                          j["rss_beyond_key_payload"].get<double>(),
                          j.contains("store_beyond_key_payload")
                              ? (", store's accounting " +
                                 std::to_string(int(j["store_beyond_key_payload"].get<double>())))
                                    .c_str()
                              : "");
            emit(common, "memory", nlohmann::json::array({j}), line);
            return 0;
        }
        if (wc->parsed()) {
            const double ms = wait_ready(kind, addrs.at(0), load.queue,
                                         key_of(wait_key, load.key_bytes), wait_timeout);
            if (ms < 0) {
                std::fprintf(stderr, "dueq-bench wait: %s did not answer within %.0f s\n",
                             addrs[0].c_str(), wait_timeout);
                return 1;
            }
            emit(common, "wait", nlohmann::json::array({{{"waited_ms", ms}}}),
                 std::to_string(ms) + "\n");
            return 0;
        }
        if (cc->parsed()) {
            std::string error;
            const auto t0 = std::chrono::steady_clock::now();
            if (!checkpoint(kind, addrs.at(0), checkpoint_timeout, &error)) {
                std::fprintf(stderr, "dueq-bench checkpoint: %s\n", error.c_str());
                return 1;
            }
            const double ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
            emit(common, "checkpoint", nlohmann::json::array({{{"ms", ms}}}),
                 std::to_string(ms) + "\n");
            return 0;
        }
        if (lc->parsed()) {
            const auto i = find_leader(kind, addrs);
            std::cout << addrs[i] << std::endl;
            return 0;
        }
        if (rc->parsed()) {
            std::cout << render_report(report_dir);
            return 0;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "\ndueq-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
