// Renders docs/benchmarks.md from one run-all.sh run. Every figure on the page comes
// from the JSON files of that run; the prose around them is fixed here.
#include "report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace dueq::bench {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class Results {
  public:
    explicit Results(const std::string& dir) {
        if (!fs::is_directory(dir)) throw std::runtime_error(dir + " is not a directory");
        for (const auto& e : fs::directory_iterator(dir)) {
            if (e.path().extension() != ".json") continue;
            std::ifstream f(e.path());
            try {
                files_[e.path().stem().string()] = json::parse(f);
            } catch (const std::exception& ex) {
                throw std::runtime_error(e.path().string() + ": " + ex.what());
            }
        }
    }
    // The last result of file `name` (a scenario follows its preload), or null.
    const json* last(const std::string& name) const {
        auto it = files_.find(name);
        if (it == files_.end()) return nullptr;
        const auto& j = it->second;
        if (j.contains("results") && j["results"].is_array() && !j["results"].empty())
            return &j["results"].back();
        return &j;
    }
    const json* file(const std::string& name) const {
        auto it = files_.find(name);
        return it == files_.end() ? nullptr : &it->second;
    }

  private:
    std::map<std::string, json> files_;
};

std::string num(double v, int decimals = 0) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    // Thousands separators for the integer part.
    std::string s = b;
    auto dot = s.find('.');
    std::string ip = s.substr(0, dot == std::string::npos ? s.size() : dot);
    std::string frac = dot == std::string::npos ? "" : s.substr(dot);
    std::string out;
    const bool neg = !ip.empty() && ip[0] == '-';
    if (neg) ip = ip.substr(1);
    for (std::size_t i = 0; i < ip.size(); ++i) {
        if (i && (ip.size() - i) % 3 == 0) out += ',';
        out += ip[i];
    }
    return (neg ? "-" : "") + out + frac;
}

std::string us(double v) {
    char b[32];
    if (v >= 10'000)
        std::snprintf(b, sizeof b, "%.0f ms", v / 1000);
    else if (v >= 1000)
        std::snprintf(b, sizeof b, "%.1f ms", v / 1000);
    else
        std::snprintf(b, sizeof b, "%.0f µs", v);
    return b;
}

std::string ratio(double a, double b) {
    if (b <= 0) return "—";
    char s[32];
    std::snprintf(s, sizeof s, "%.2f×", a / b);
    return s;
}

double get_d(const json* j, std::initializer_list<const char*> path, double fallback = -1) {
    if (!j) return fallback;
    const json* at = j;
    for (const char* p : path) {
        if (!at->is_object() || !at->contains(p)) return fallback;
        at = &(*at)[p];
    }
    return at->is_number() ? at->get<double>() : fallback;
}

// The headline op of a scenario and its name.
const char* headline_op(const std::string& scenario) {
    if (scenario == "refresh") return "refresh";
    if (scenario == "get") return "get";
    return "put";
}

std::string errors_note(const json* r) {
    if (!r || !r->contains("errors") || (*r)["errors"].empty()) return "";
    std::uint64_t n = 0;
    for (auto& [k, v] : (*r)["errors"].items())
        n += v.get<std::uint64_t>();
    return " (" + num(double(n)) + " errors)";
}

void single_node(std::ostringstream& md, const Results& res) {
    md << "## One node: dueq beside Tarantool\n\n"
          "Each row ran dueq, then Tarantool, with the same client code, connections, depth, "
          "keys and 200-byte payloads. *Ratio* is dueq's throughput over Tarantool's: above 1, "
          "dueq is faster. A `refresh` is one take and one ack with a new payload and a new "
          "time, the product's main loop; `mixed` counts every get, put and refresh of front "
          "ends (3/4 of the connections: 90% gets) and refreshers (1/4) running together.\n\n";
    struct Mode {
        const char* fsync;
        const char* title;
    };
    for (const Mode m : {Mode{"never",
                              "dueq `fsync = \"never\"` beside Tarantool `wal_mode = "
                              "\"write\"` (its default): the log is written to the "
                              "OS at once and reaches the disk when the OS decides"},
                         Mode{"always",
                              "dueq `fsync = \"always\"` (its default) beside "
                              "Tarantool `wal_mode = \"fsync\"`: nothing is "
                              "answered before its log write is fsynced"}}) {
        bool any = false;
        std::ostringstream t;
        t << "### " << m.title << "\n\n"
          << "| scenario | conns × depth | dueq ops/s | Tarantool ops/s | ratio | dueq p50 / p99 "
             "/ p99.9 | Tarantool p50 / p99 / p99.9 |\n"
          << "|---|---|---|---|---|---|---|\n";
        for (const char* spec : {"put-c1-d1", "put-c64-d1", "refresh-c1-d1", "refresh-c64-d1",
                                 "get-c64-d1", "mixed-c64-d1", "put-c16-d32", "refresh-c16-d8"}) {
            const std::string s = spec;
            const auto scenario = s.substr(0, s.find('-'));
            const auto* d = res.last("single-" + std::string(m.fsync) + "-dueq-" + s);
            const auto* t2 = res.last("single-" + std::string(m.fsync) + "-tarantool-" + s);
            if (!d && !t2) continue;
            any = true;
            const std::string op = scenario == "mixed" ? "refresh" : headline_op(scenario);
            auto lat = [&](const json* r) {
                if (!r) return std::string("—");
                const char* o = scenario == "mixed" ? "get" : op.c_str();
                return us(get_d(r, {"per_op", o, "p50_us"})) + " / " +
                       us(get_d(r, {"per_op", o, "p99_us"})) + " / " +
                       us(get_d(r, {"per_op", o, "p999_us"}));
            };
            const double dq = get_d(d, {"ops_per_s"}, 0), tt = get_d(t2, {"ops_per_s"}, 0);
            const auto conns = s.substr(s.find("-c") + 2, s.find("-d") - s.find("-c") - 2);
            const auto depth = s.substr(s.find("-d") + 2);
            t << "| " << scenario << " | " << conns << " × " << depth << " | " << num(dq)
              << errors_note(d) << " | " << num(tt) << errors_note(t2) << " | " << ratio(dq, tt)
              << " | " << lat(d) << " | " << lat(t2) << " |\n";
        }
        if (any) md << t.str() << "\n";
    }
    md << "Latencies are per op as the client sees it: for `refresh` the whole take + ack "
          "cycle, for `mixed` a front end's get.\n\n";
}

void cluster(std::ostringstream& md, const Results& res) {
    md << "## Three nodes: dueq beside etcd, fsync on\n\n"
          "A 3-node dueq cluster and a 3-member etcd 3.4 cluster on loopback, both with a "
          "heartbeat every 100 ms and an election after 1 s without one, both fsyncing every "
          "write on a majority before answering. The load goes to the leader. etcd is a "
          "key-value store, not a queue, so only puts compare; its values travel base64 in "
          "JSON over HTTP/1.1 keep-alive, dueq's as msgpack. *512 in flight*: dueq pipelines "
          "32 requests on each of 16 connections; etcd's gateway answers one request at a time "
          "per connection, so it gets 512 connections instead.\n\n"
          "| conns × depth | dueq puts/s | etcd puts/s | ratio | dueq p50 / p99 / p99.9 | etcd "
          "p50 / p99 / p99.9 |\n|---|---|---|---|---|---|\n";
    struct Row {
        const char* label;
        const char* dueq;
        const char* etcd;
    };
    for (const Row row : {Row{"1 × 1", "c1-d1", "c1-d1"}, Row{"64 × 1", "c64-d1", "c64-d1"},
                          Row{"512 in flight", "c16-d32", "c512-d1"}}) {
        const auto* d = res.last(std::string("cluster-dueq-put-") + row.dueq);
        const auto* e = res.last(std::string("cluster-etcd-put-") + row.etcd);
        if (!d && !e) continue;
        auto lat = [&](const json* r) {
            if (!r) return std::string("—");
            return us(get_d(r, {"per_op", "put", "p50_us"})) + " / " +
                   us(get_d(r, {"per_op", "put", "p99_us"})) + " / " +
                   us(get_d(r, {"per_op", "put", "p999_us"}));
        };
        const double dq = get_d(d, {"ops_per_s"}, 0), et = get_d(e, {"ops_per_s"}, 0);
        md << "| " << row.label << " | " << num(dq) << errors_note(d) << " | " << num(et)
           << errors_note(e) << " | " << ratio(dq, et) << " | " << lat(d) << " | " << lat(e)
           << " |\n";
    }
    md << "\n### Failover\n\n"
          "The leader is stopped; from that instant the benchmark sends one op every 10 ms "
          "to each survivor (dueq: a take; etcd: a put; a request unanswered after 1 s is "
          "abandoned) and stops the clock at the first success. The member is then restarted "
          "and the cluster left to settle before the next round. `kill` is `kill -9`: on one "
          "host the kernel closes the dead process's connections at once, and a node that "
          "watches its link to the leader can start an election without waiting. `stop` is "
          "SIGSTOP: the process hangs with its connections open, as in a partition or a "
          "frozen machine, and only missing heartbeats tell.\n\n"
          "| signal | dueq median (min–max) | etcd median (min–max) | kills |\n"
          "|---|---|---|---|\n";
    for (const char* sig : {"kill", "stop"}) {
        const auto* d = res.last(std::string("cluster-dueq-failover-") + sig);
        const auto* e = res.last(std::string("cluster-etcd-failover-") + sig);
        if (!d && !e) continue;
        auto cell = [&](const json* r) {
            if (!r) return std::string("—");
            return num(get_d(r, {"median_ms"})) + " ms (" + num(get_d(r, {"min_ms"})) + "–" +
                   num(get_d(r, {"max_ms"})) + ")";
        };
        md << "| " << sig << " | " << cell(d) << " | " << cell(e) << " | "
           << num(get_d(d ? d : e, {"kills"}, 0)) << " |\n";
    }
    md << "\n";
}

// The one-deep put rows beside what the machine allows them (measure/floor, the same run):
// a round trip (fsync never), a round trip and a sync (one node), and a round trip, a sync
// and the followers' hop back (three nodes: the leader's sync and theirs run side by side).
void against_floor(std::ostringstream& md, const Results& res) {
    const auto* f = res.file("floor");
    if (!f) return;
    const double rtt = get_d(f, {"rtt_us", "p50"}), sync = get_d(f, {"fdatasync_us", "p50"});
    if (rtt <= 0 || sync <= 0) return;
    md << "## Against the floor\n\n"
          "`dueq-floor` (`measure/floor`), in the same run: a loopback TCP round trip of a "
          "256-byte request and a 32-byte answer between two threads with blocking sockets, "
          "p50 **"
       << us(rtt) << "** (p99 " << us(get_d(f, {"rtt_us", "p99"}))
       << "); an append of a 256-byte record to a pre-zeroed WAL file and its fdatasync, p50 **"
       << us(sync) << "** (p99 " << us(get_d(f, {"fdatasync_us", "p99"}))
       << "). A put 1 × 1 can answer no sooner than its floor; *times the floor* is its p50 "
          "over that.\n\n"
          "| row | dueq put p50 | floor | times the floor |\n|---|---|---|---|\n";
    struct Row {
        const char* label;
        const char* file;
        const char* floor_label;
        double floor;
    };
    for (const Row row :
         {Row{"one node, fsync never", "single-never-dueq-put-c1-d1", "round trip", rtt},
          Row{"one node, fsync always", "single-always-dueq-put-c1-d1", "round trip + sync",
              rtt + sync},
          Row{"three nodes, fsync always", "cluster-dueq-put-c1-d1",
              "round trip + sync + round trip", 2 * rtt + sync}}) {
        const auto* r = res.last(row.file);
        if (!r) continue;
        const double p50 = get_d(r, {"per_op", "put", "p50_us"});
        md << "| " << row.label << " | " << us(p50) << " | " << row.floor_label << ": "
           << us(row.floor) << " | " << num(p50 / row.floor, 2) << "× |\n";
    }
    md << "\n";
}

void drill(std::ostringstream& md, const Results& res) {
    const auto* dj = res.file("drill-dueq");
    const auto* tj = res.file("drill-tarantool");
    if (!dj && !tj) return;
    const auto& first = (dj ? *dj : *tj)["results"][0]["options"];
    md << "## The refresh drill\n\n"
       << num(first["tokens"].get<double>()) << " tokens, each valid for a compressed hour of "
       << num(first["hour_ms"].get<double>() / 1000) << " s, their expiries spread evenly over "
       << "it. An outage leaves " << num(first["late_share"].get<double>() * 100)
       << "% of them already expired when " << first["refreshers"].get<int>()
       << " refreshers start; each refresh spends " << first["service_ms"].get<int>()
       << " ms at the provider. Deadline-aware order: `lead_ms = "
       << first["lead_ms"].get<std::int64_t>()
       << "` (refresh up to that long before expiry), not-late tokens before late ones. "
          "Earliest-first: `lead_ms = 0`, each task due `lead` before its token expires "
          "(the plain delayed-job queue). Both run for the same "
       << num(first["window_s"].get<double>())
       << " s window. *Expired savable* counts "
          "tokens that had not expired when the refreshers started, came due in the window, "
          "and were refreshed after their expiry or not at all. The backlog is drained when "
          "every token that has come due has been taken.\n\n"
          "| store | order | late at start | savable, came due | saved | expired savable | "
          "drained after | refreshes/s |\n|---|---|---|---|---|---|---|---|\n";
    for (auto [name, j] : {std::pair<const char*, const json*>{"dueq (fsync always)", dj},
                           {"Tarantool (wal fsync)", tj}}) {
        if (!j) continue;
        for (const auto& r : (*j)["results"]) {
            md << "| " << name << " | " << r["order"].get<std::string>() << " | "
               << num(r["late_at_start"].get<double>()) << " | "
               << num(r["savable_due"].get<double>()) << " | " << num(r["saved"].get<double>())
               << " | **" << num(r["expired_savable"].get<double>()) << "** | "
               << (r["drain_ms"].is_null() ? std::string("not in the window")
                                           : num(r["drain_ms"].get<double>() / 1000, 1) + " s")
               << " | " << num(r["refreshes_per_s"].get<double>()) << " |\n";
        }
    }
    md << "\n";
}

void memory(std::ostringstream& md, const Results& res) {
    std::vector<std::string> sizes;
    for (const char* n : {"1000000", "10000000", "100000", "200000"})
        if (res.file(std::string("memory-dueq-") + n) ||
            res.file(std::string("memory-tarantool-") + n))
            sizes.push_back(n);
    if (sizes.empty()) return;
    md << "## Memory and restart\n\n"
          "Tasks with 16-byte keys and 200-byte payloads. *Beyond key and payload*: the "
          "growth of the server's resident set while the tasks were put, per task, minus 216 "
          "bytes; the store's own accounting is `measure/queue-mem` for dueq (the task store "
          "alone, filled in-process) and memtx's tuple bytes plus index bytes for Tarantool.\n\n"
          "*After restart*: the resident set of the restarted server (dueq after SIGTERM, "
          "Tarantool from its WAL) over the empty server's, per task, minus 216 bytes.\n\n"
          "| tasks | dueq RSS | dueq after restart | dueq store | Tarantool RSS | Tarantool "
          "after restart | Tarantool store |\n"
          "|---|---|---|---|---|---|---|\n";
    for (const auto& n : sizes) {
        const auto* d = res.last("memory-dueq-" + n);
        const auto* t = res.last("memory-tarantool-" + n);
        const auto* q = res.file("queue-mem-" + n);
        auto b = [](double v) { return v < -1e8 ? std::string("—") : num(v) + " B"; };
        // The restarted server's RSS over the empty one's, beyond key and payload.
        auto restarted = [&](const json* mem, const std::string& name) {
            const double before = get_d(mem, {"rss_before"}, -1);
            const double after = get_d(res.last(name), {"rss_after"}, -1);
            if (before < 0 || after < 0) return -1e9;
            return (after - before) / std::stod(n) - get_d(mem, {"key_bytes"}, 0) -
                   get_d(mem, {"payload_bytes"}, 0);
        };
        md << "| " << num(std::stod(n)) << " | " << b(get_d(d, {"rss_beyond_key_payload"}, -1e9))
           << " | " << b(restarted(d, "restart-dueq-sigterm-" + n)) << " | "
           << b(get_d(q, {"overhead_bytes_per_task"}, -1e9)) << " | "
           << b(get_d(t, {"rss_beyond_key_payload"}, -1e9)) << " | "
           << b(restarted(t, "restart-tarantool-xlog-" + n)) << " | "
           << b(get_d(t, {"store_beyond_key_payload"}, -1e9)) << " |\n";
    }
    md << "\nRestart: from starting the process until a get of a preloaded task is answered. "
          "dueq loads its materialized task state and replays the log after it; Tarantool "
          "replays its write-ahead log (no snapshot: `checkpoint_interval = 0`), or reads a "
          "snapshot taken just before.\n\n"
          "| tasks | dueq after SIGTERM | dueq after SIGKILL | Tarantool from the WAL | "
          "Tarantool from a snapshot |\n|---|---|---|---|---|\n";
    for (const auto& n : sizes) {
        auto s = [&](const std::string& name) {
            const double ms = get_d(res.last(name), {"ms"});
            return ms < 0 ? std::string("—") : num(ms / 1000, 1) + " s";
        };
        md << "| " << num(std::stod(n)) << " | " << s("restart-dueq-sigterm-" + n) << " | "
           << s("restart-dueq-sigkill-" + n) << " | " << s("restart-tarantool-xlog-" + n) << " | "
           << s("restart-tarantool-snapshot-" + n) << " |\n";
    }
    md << "\n";
}

}  // namespace

std::string render_report(const std::string& dir) {
    Results res(dir);
    const auto* m = res.file("machine");
    std::ostringstream md;
    md << "# Benchmarks\n\n"
          "How fast dueq is, beside what its users would otherwise pick, measured in one run "
          "on one machine by `dueq-bench` (`measure/bench`): Tarantool 2.6 running the same "
          "queue in Lua for one node, etcd 3.4 for three. Every figure on this page comes from "
          "that run; to reproduce the page:\n\n"
          "```sh\nmeasure/bench/run-all.sh            # installs the peers, builds, runs "
          "everything, writes this page\n```\n\n";
    if (m) {
        const auto& j = *m;
        auto s = [&](const char* k) { return j.contains(k) ? j[k].get<std::string>() : "?"; };
        if (s("scale") != "full")
            md << "**These figures come from a `SCALE=" << s("scale")
               << "` run: a test of the script, not a measurement.**\n\n";
        md << "Machine: " << s("cpu") << ", " << j.value("cores", 0) << " cores, "
           << j.value("ram_gib", 0) << " GiB RAM; " << s("os") << ", Linux " << s("kernel") << "; "
           << s("compiler") << ", RelWithDebInfo. " << s("tarantool") << ", " << s("etcd")
           << ". Run of " << s("date") << " at commit `" << s("commit")
           << "`; load average before it: " << s("load_before")
           << ". Servers and `dueq-bench` share the same cores over loopback TCP, so the "
              "client's own cost is in every figure, the same for every system.\n\n";
    }
    single_node(md, res);
    cluster(md, res);
    against_floor(md, res);
    drill(md, res);
    memory(md, res);
    if (res.file("raft-batch-1") || res.file("raft-batch-64")) {
        md << "## The Raft core alone\n\n"
              "`sim bench`: 3 nodes in the deterministic simulator, no network, no "
              "disk, 64-byte entries: the ceiling of the Raft shell around it.\n\n"
              "| entries per propose | entries committed/s |\n|---|---|\n";
        for (const char* b : {"1", "64"})
            if (const auto* r = res.last(std::string("raft-batch-") + b))
                md << "| " << b << " | " << num(get_d(r, {"entries_per_s"}, 0)) << " |\n";
        md << "\n";
    }
    md << "## What is compared\n\n"
          "- The Tarantool queue (`measure/bench/peers/tarantool/queue.lua`, memtx) keeps dueq's "
          "semantics where the benchmark exercises them: tasks unique by key, due when "
          "`time - lead_ms <= now`, take hands out not-late tasks earliest first and then late "
          "ones (two scans of a TREE index on (status, time)), leases with fencing ids that "
          "run out, ack with a new payload and time, put voiding a lease. It leaves out "
          "max_attempts, bury/kick, retention and release on disconnect. Clients call it "
          "with IPROTO CALL; the guest user has every privilege (loopback only).\n"
          "- dueq-bench keeps its own protocol code for every system: one io_context, "
          "asynchronous connections, a pipelining depth per connection, latencies in "
          "log-linear histograms (under 1% error).\n"
          "- Each run has a warm-up that is not measured; throughput is the measured ops over "
          "the measured window.\n";
    return md.str();
}

}  // namespace dueq::bench
