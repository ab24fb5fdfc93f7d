// dueq-sim: the deterministic Raft cluster simulator's runner.
//   dueq-sim run   --seed N [--nodes 3] [--plant BUG] [--trace]   replay one seed
//   dueq-sim sweep --seeds 100000 [--nodes 3,5] [--plant BUG]      many seeds, with a summary
//   dueq-sim bench [--batch 1] [--entries 200000]                  core throughput
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "sim/sim.h"
#include "testing/planted/planted.h"

using dueq::sim::SimOptions;

int run_bench(std::uint64_t batch, std::uint64_t entries);

namespace {

bool parse_bug(const std::string& name, dueq::node::PlantedDefects& bug) {
    const auto parsed = dueq::testing::parse_planted(name);
    if (!parsed) {
        std::fprintf(stderr, "unknown defect '%s' (%s)\n", name.c_str(),
                     dueq::testing::planted_list().c_str());
        return false;
    }
    bug = *parsed;
    if (bug != dueq::node::PlantedDefects{} && !dueq::raft::planted_bugs_compiled()) {
        std::fprintf(stderr,
                     "planted bugs are not compiled in (configure with -DDUEQ_PLANTED_BUGS=ON)\n");
        return false;
    }
    return true;
}

void print_stats(const dueq::sim::SimStats& s) {
    std::printf(
        "  sim time %llu ms, events %llu, messages %llu, commands %llu (acked %llu), reads %llu,\n"
        "  leases %llu (abandoned %llu), leader terms %llu, crashes %llu (torn %llu),\n"
        "  partitions %llu, links down %llu, snapshots sent %llu, live %llu ms after heal,\n"
        "  client disconnects %llu, sessions released %llu, blocking takes timed out %llu,\n"
        "  answered in autonomous mode %llu, merged %llu (%llu became the task),\n"
        "  membership changes committed %llu\n",
        (unsigned long long)s.sim_ms, (unsigned long long)s.events, (unsigned long long)s.messages,
        (unsigned long long)s.proposed, (unsigned long long)s.acked, (unsigned long long)s.reads,
        (unsigned long long)s.leases, (unsigned long long)s.abandoned,
        (unsigned long long)s.elections, (unsigned long long)s.crashes,
        (unsigned long long)s.torn_crashes, (unsigned long long)s.partitions,
        (unsigned long long)s.link_downs, (unsigned long long)s.snapshots_sent,
        (unsigned long long)s.heal_to_live_ms, (unsigned long long)s.disconnects,
        (unsigned long long)s.sessions_released, (unsigned long long)s.blocking_timeouts,
        (unsigned long long)s.autonomous_answers, (unsigned long long)s.merged,
        (unsigned long long)s.merges_taken_over, (unsigned long long)s.membership_changes);
}

int run_one(SimOptions o) {
    auto r = dueq::sim::run_simulation(o);
    std::printf("seed %llu, %d nodes%s: %s\n", (unsigned long long)o.seed, o.nodes,
                o.planted == dueq::node::PlantedDefects{}
                    ? ""
                    : (", planted " + std::string(dueq::testing::planted_name(o.planted))).c_str(),
                r.ok ? "ok" : "VIOLATION");
    if (!r.ok)
        std::printf("  %s\n  replay: %s\n", r.violation.c_str(),
                    dueq::sim::replay_command(o).c_str());
    print_stats(r.stats);
    return r.ok ? 0 : 1;
}

int run_sweep(SimOptions base, std::uint64_t start, std::uint64_t seeds,
              const std::vector<int>& sizes, bool stop_on_failure, double progress_s) {
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now(), last = t0;
    std::uint64_t failures = 0, done = 0, first_fail = 0;
    dueq::sim::SimStats total;
    for (std::uint64_t seed = start; seed < start + seeds; ++seed) {
        SimOptions o = base;
        o.seed = seed;
        o.nodes = sizes[seed % sizes.size()];
        auto r = dueq::sim::run_simulation(o);
        ++done;
        total.events += r.stats.events;
        total.acked += r.stats.acked;
        total.elections += r.stats.elections;
        total.crashes += r.stats.crashes;
        total.partitions += r.stats.partitions;
        total.snapshots_sent += r.stats.snapshots_sent;
        total.reads += r.stats.reads;
        total.leases += r.stats.leases;
        total.abandoned += r.stats.abandoned;
        total.torn_crashes += r.stats.torn_crashes;
        total.link_downs += r.stats.link_downs;
        total.disconnects += r.stats.disconnects;
        total.sessions_released += r.stats.sessions_released;
        total.blocking_timeouts += r.stats.blocking_timeouts;
        total.autonomous_answers += r.stats.autonomous_answers;
        total.merged += r.stats.merged;
        total.merges_taken_over += r.stats.merges_taken_over;
        total.membership_changes += r.stats.membership_changes;
        total.heal_to_live_ms = std::max(total.heal_to_live_ms, r.stats.heal_to_live_ms);
        if (!r.ok) {
            ++failures;
            if (first_fail == 0) first_fail = seed;
            std::printf("FAIL seed %llu (%d nodes): %s\n  replay: %s\n", (unsigned long long)seed,
                        o.nodes, r.violation.c_str(), dueq::sim::replay_command(o).c_str());
            std::fflush(stdout);
            if (stop_on_failure) break;
        }
        auto now = clock::now();
        if (std::chrono::duration<double>(now - last).count() >= progress_s) {
            last = now;
            double el = std::chrono::duration<double>(now - t0).count();
            std::fprintf(
                stderr, "[dueq-sim] %llu/%llu seeds, %llu failures, %.0f s elapsed, %.1f seeds/s\n",
                (unsigned long long)done, (unsigned long long)seeds, (unsigned long long)failures,
                el, static_cast<double>(done) / el);
        }
    }
    double el = std::chrono::duration<double>(clock::now() - t0).count();
    std::printf("summary: %llu seeds (%llu..%llu), %llu failures%s, wall %.1f s (%.2f ms/seed)\n",
                (unsigned long long)done, (unsigned long long)start,
                (unsigned long long)(start + done - 1), (unsigned long long)failures,
                first_fail ? (", first at seed " + std::to_string(first_fail)).c_str() : "", el,
                1000.0 * el / static_cast<double>(done ? done : 1));
    std::printf(
        "  totals: events %llu, acked commands %llu, leases %llu (abandoned %llu), reads %llu,\n"
        "  leader terms %llu, crashes %llu (torn %llu), partitions %llu, links down %llu,\n"
        "  snapshots sent %llu, client disconnects %llu, sessions released %llu,\n"
        "  blocking takes timed out %llu, slowest recovery after healing %llu ms,\n"
        "  answered in autonomous mode %llu, merged %llu (%llu became the task),\n"
        "  membership changes committed %llu\n",
        (unsigned long long)total.events, (unsigned long long)total.acked,
        (unsigned long long)total.leases, (unsigned long long)total.abandoned,
        (unsigned long long)total.reads, (unsigned long long)total.elections,
        (unsigned long long)total.crashes, (unsigned long long)total.torn_crashes,
        (unsigned long long)total.partitions, (unsigned long long)total.link_downs,
        (unsigned long long)total.snapshots_sent, (unsigned long long)total.disconnects,
        (unsigned long long)total.sessions_released, (unsigned long long)total.blocking_timeouts,
        (unsigned long long)total.heal_to_live_ms, (unsigned long long)total.autonomous_answers,
        (unsigned long long)total.merged, (unsigned long long)total.merges_taken_over,
        (unsigned long long)total.membership_changes);
    return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "dueq-sim: deterministic simulator of dueq's replicas (Raft shell, core and task store).\n"
        "Every run is determined by its seed; a failure prints the command that replays it."};
    app.require_subcommand(1);

    SimOptions o;
    std::string bug = "none";
    bool no_faults = false;

    auto* run = app.add_subcommand("run", "run (replay) one seed and report");
    run->add_option("--seed", o.seed, "seed")->required();
    run->add_option("--nodes", o.nodes, "cluster size")->check(CLI::Range(1, 9));
    run->add_option("--plant", bug, "planted bug to enable (test hook)");
    run->add_flag("--no-faults", no_faults, "no faults at all");
    run->add_option("--fault-ms", o.fault_ms, "simulated ms of faults before healing");
    run->add_flag("--trace", o.trace, "print every event to stderr");
    const std::map<std::string, int> membership_choices{{"seed", -1}, {"off", 0}, {"on", 1}};
    run->add_option("--membership", o.membership,
                    "membership changes: seed (half the seeds, by the seed), on or off")
        ->transform(CLI::CheckedTransformer(membership_choices));
    bool no_contract = false;
    run->add_flag("--no-contract-checks", no_contract,
                  "check only consequences, not the core's contract");

    std::uint64_t start = 1, seeds = 1000;
    std::vector<int> sizes{3, 5};
    bool stop = false;
    double progress_s = 5;
    auto* sweep = app.add_subcommand("sweep", "run many seeds and summarize");
    sweep->add_option("--start", start, "first seed");
    sweep->add_option("--seeds", seeds, "number of seeds");
    sweep->add_option("--nodes", sizes, "cluster sizes, alternating by seed")->delimiter(',');
    sweep->add_option("--plant", bug, "planted bug to enable (test hook)");
    sweep->add_flag("--no-faults", no_faults, "no faults at all");
    sweep->add_option("--fault-ms", o.fault_ms, "simulated ms of faults before healing");
    sweep->add_flag("--stop-on-failure", stop, "stop at the first failing seed");
    sweep->add_flag("--no-contract-checks", no_contract,
                    "check only consequences, not the core's contract");
    sweep->add_option("--progress", progress_s, "seconds between progress lines (stderr)");
    sweep
        ->add_option("--membership", o.membership,
                     "membership changes: seed (half the seeds, by the seed), on or off")
        ->transform(CLI::CheckedTransformer(membership_choices));

    std::uint64_t batch = 1, entries = 200000;
    auto* bench = app.add_subcommand("bench", "entries committed per second, 3 nodes, no faults");
    bench->add_option("--batch", batch, "entries per propose")->check(CLI::Range(1, 100000));
    bench->add_option("--entries", entries, "entries to commit");

    CLI11_PARSE(app, argc, argv);
    if (bench->parsed()) return run_bench(batch, entries);
    if (!parse_bug(bug, o.planted)) return 2;
    o.faults = !no_faults;
    o.contract_checks = !no_contract;
    if (run->parsed()) return run_one(o);
    return run_sweep(o, start, seeds, sizes, stop, progress_s);
}
