// dueq-shard-check: puts keys into a running sharded dueq through several entry points
// (nodes of any shard, proxies), then counts them on every shard's leader and compares
// with where the shard map says each key belongs (docs/sharding.md). Exit 0 when every
// key is on its shard and every put was acknowledged, 1 otherwise.
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "shard/sharded_client.h"

using namespace dueq;
using Clock = std::chrono::steady_clock;

namespace {

// Tasks of `queue` on shard s, counted by its leader (stats are served locally: a follower
// could be behind).
std::optional<std::uint64_t> count_on(const shard::Shard& s, const std::string& queue) {
    for (int round = 0; round < 50; ++round) {
        for (const auto& m : s.members) {
            client::ClientOptions o;
            o.seeds = {m.client};
            o.max_redirects = 0;
            client::Client c(o);
            auto st = c.status();
            if (!st.ok() || st->role != "leader") continue;
            client::StatsRequest stats;
            stats.queue = queue;
            auto r = c.stats(stats);
            if (!r.ok() || r->queues.empty()) return std::nullopt;
            const auto& q = r->queues.front();
            return q.ready + q.taken + q.buried + q.done;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "dueq-shard-check: put keys through every entry point of a sharded dueq (nodes of any "
        "shard, dueq-proxy), then count them on each shard's leader and compare with the "
        "shard map. Use a fresh --queue: its counts are what is checked.",
        "dueq-shard-check"};
    std::vector<std::string> entries;
    std::string queue = "shard-check";
    int keys = 100'000, depth = 64;
    app.add_option("--entry", entries,
                   "host:port of a node or proxy to put through; repeat (keys are dealt out "
                   "round robin). The first also gives the shard map.")
        ->required()
        ->delimiter(',');
    app.add_option("--keys", keys, "keys to put")
        ->capture_default_str()
        ->check(CLI::Range(1, 100'000'000));
    app.add_option("--queue", queue, "the queue to put into (fresh!)")->capture_default_str();
    app.add_option("--depth", depth, "puts in flight per entry point")
        ->capture_default_str()
        ->check(CLI::Range(1, 10'000));
    CLI11_PARSE(app, argc, argv);

    shard::ShardedClientOptions so;
    so.client.seeds = {entries.front()};
    shard::ShardedClient routed(so);
    if (auto st = routed.refresh_map(); !st.ok()) {
        std::fprintf(stderr, "dueq-shard-check: %s\n", st.error().message.c_str());
        return 1;
    }
    const auto map = routed.map();
    std::printf("shard map version %llu: %zu shards, %u buckets\n",
                (unsigned long long)map->version, map->shards.size(), map->bucket_count);

    const auto started = Clock::now();
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (std::size_t e = 0; e < entries.size(); ++e) {
        threads.emplace_back([&, e] {
            const std::string& entry = entries[e];
            client::ClientOptions o;
            o.seeds = {entry};
            client::Client c(o);
            std::vector<std::future<client::Result<client::PutResponse>>> flight;
            auto drain = [&] {
                for (auto& f : flight) {
                    auto r = f.get();
                    if (!r.ok()) {
                        if (failed++ < 5)
                            std::fprintf(stderr, "put via %s: %s\n", entry.c_str(),
                                         r.error().to_string().c_str());
                    }
                }
                flight.clear();
            };
            // Entry e takes keys e, e + n, e + 2n, ...: each enters by its share.
            for (int i = int(e); i < keys; i += int(entries.size())) {
                client::PutRequest put;
                put.queue = queue;
                put.key = "k" + std::to_string(i);
                put.payload = "\xc0";  // nil
                flight.push_back(c.call_async(put));
                if (int(flight.size()) >= depth) drain();
            }
            drain();
        });
    }
    for (auto& t : threads)
        t.join();
    const double secs = std::chrono::duration<double>(Clock::now() - started).count();
    std::printf("put %d keys through %zu entry points in %.1f s (%.0f/s), %d failed\n", keys,
                entries.size(), secs, keys / secs, failed.load());

    std::vector<std::uint64_t> want(map->shards.size(), 0);
    for (int i = 0; i < keys; ++i)
        ++want[map->shard_of(queue, "k" + std::to_string(i))];
    bool ok = failed == 0;
    std::printf("%-8s %10s %10s %s\n", "SHARD", "EXPECTED", "COUNTED", "");
    for (std::size_t s = 0; s < map->shards.size(); ++s) {
        auto got = count_on(map->shards[s], queue);
        const bool same = got && *got == want[s];
        ok = ok && same;
        std::printf("%-8s %10llu %10s %s\n", map->shards[s].name.c_str(),
                    (unsigned long long)want[s], got ? std::to_string(*got).c_str() : "?",
                    same ? "ok" : "MISMATCH");
    }
    std::printf("%s\n", ok ? "every key is on the shard its bucket names"
                           : "FAILED: keys missing or on the wrong shard");
    return ok ? 0 : 1;
}
