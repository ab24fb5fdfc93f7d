#include "cluster/failover.h"

#include <catch2/catch.hpp>

#include <sstream>
#include <thread>

#include "node/support.h"

namespace dueq::test {

namespace {

using Clock = std::chrono::steady_clock;

long ms_since(Clock::time_point t0) {
    return long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
}

// Kills the leader (after freezing its followers for plan.freeze if `freeze`) and waits
// for a node to lead a newer term and answer a put there (recorded in `history` like
// the load's puts).
FailoverRound kill_leader(Cluster& cluster, int leader, int round, bool freeze,
                          const LoadOptions& load, const FailoverPlan& plan, History& history) {
    FailoverRound r;
    r.froze_followers = freeze;
    r.killed = cluster.node_id(leader);
    const auto before = cluster.status(leader);
    r.old_term = before ? before->term : 0;
    std::vector<int> followers;
    for (int i : cluster.running_nodes())
        if (i != leader) followers.push_back(i);
    if (freeze) {
        for (int f : followers)
            cluster.pause(f);
        std::this_thread::sleep_for(plan.freeze);
    }
    cluster.kill9(leader);
    const auto acknowledged = history.puts();
    if (freeze)
        for (int f : followers)
            cluster.resume(f);
    const auto t0 = Clock::now();
    for (int probe = 0; probe < 10'000 && Clock::now() < t0 + plan.give_up; ++probe) {
        for (int i : cluster.running_nodes()) {
            const auto s = cluster.status(i, 300ms);
            if (!s || s->role != "leader" || s->term <= r.old_term) continue;
            if (r.elected_ms < 0) r.elected_ms = ms_since(t0);
            PutRecord rec;
            rec.key = load.tag + "-probe-" + std::to_string(round) + "-" + std::to_string(probe);
            rec.payload = "v-" + rec.key;
            rec.time = wall_ms() + 3'600'000;
            client::PutRequest put;
            put.queue = load.kv_queue;
            put.key = rec.key;
            put.payload = string_payload(rec.payload);
            put.time = rec.time;
            if (cluster.client({i}, 500ms)->put(put).ok()) {
                r.served_ms = ms_since(t0);
                r.new_leader = s->node_id;
                r.new_term = s->term;
                history.put_acked(std::move(rec));
                check_puts(cluster, i, acknowledged, load.kv_queue, r.on_new_leader);
                return r;
            }
        }
        std::this_thread::sleep_for(10ms);
    }
    return r;
}

}  // namespace

std::size_t FailoverReport::problems() const {
    std::size_t n = leases.problems();
    for (const auto& v : nodes)
        n += v.problems();
    for (const auto& r : rounds)
        n += r.on_new_leader.problems();
    return n;
}

std::string FailoverReport::summary() const {
    std::ostringstream s;
    s << "acknowledged: " << puts_ok << " puts, " << takes << " takes, " << acks_ok << " acks\n";
    for (std::size_t k = 0; k < rounds.size(); ++k) {
        const auto& r = rounds[k];
        s << "kill " << k + 1 << (r.froze_followers ? " (followers frozen first)" : "")
          << ": leader " << r.killed << " (term " << r.old_term << ") after " << r.ok_ops_before
          << " ok ops; ";
        if (r.new_leader.empty()) {
            s << "no new leader served (elected_ms " << r.elected_ms << ")\n";
        } else {
            s << "new leader " << r.new_leader << " (term " << r.new_term << ") elected in "
              << r.elected_ms << " ms, served in " << r.served_ms << " ms; on it, "
              << r.on_new_leader.summary() << "\n";
        }
    }
    s << "settled: " << (settled ? "yes" : "no") << "\nclient errors: " << errors << "\n";
    for (std::size_t i = 0; i < nodes.size(); ++i)
        s << "node " << i + 1 << ": " << nodes[i].summary() << "\n";
    s << "leases: " << leases.summary();
    return s.str();
}

FailoverReport run_failover(Cluster& cluster, const LoadOptions& load, const FailoverPlan& plan) {
    FailoverReport report;
    cluster.start_all();
    int leader = cluster.wait_for_leader(15s);
    REQUIRE(leader >= 0);
    preload_work(*cluster.client(), load);

    History history;
    Load running(cluster.client_addresses(), load, history);
    running.start();
    for (int round = 0; round < plan.kills; ++round) {
        std::this_thread::sleep_for(plan.load_before_kill);
        // The leader may have changed meanwhile (it should not, in a healthy cluster).
        const auto s = cluster.status(leader);
        if (!s || s->role != "leader") {
            leader = cluster.wait_for_leader(10s);
            if (leader < 0) break;
        }
        const std::size_t ok_before = running.ok_ops();
        const int killed = leader;
        const bool freeze = round >= plan.kills - plan.frozen_kills;
        auto r = kill_leader(cluster, leader, round, freeze, load, plan, history);
        r.ok_ops_before = ok_before;
        report.rounds.push_back(r);
        cluster.start(killed);
        leader =
            r.new_leader.empty() ? cluster.wait_for_leader(10s) : cluster.index_of_id(r.new_leader);
        if (leader < 0) break;
    }
    std::this_thread::sleep_for(plan.load_before_kill);
    running.stop();

    const int settled = settle(cluster, 30s);
    report.settled = settled >= 0;
    report.puts_ok = history.puts().size();
    report.takes = history.takes().size();
    report.acks_ok = history.acks_ok();
    report.errors = history.error_counts();
    for (int i = 0; i < cluster.size(); ++i)
        report.nodes.push_back(check_node(cluster, i, history, load));
    report.leases = check_leases(history);
    return report;
}

}  // namespace dueq::test
