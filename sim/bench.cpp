// dueq-sim bench: throughput of the Raft core alone. Three cores in one thread, an
// in-order zero-latency network, in-memory storage, no faults: what it measures is the
// core's own cost per committed entry (plus copying into MemoryStorage).
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "raft/raft.h"

using namespace dueq::raft;

int run_bench(std::uint64_t batch, std::uint64_t entries) {
    constexpr int kNodes = 3;
    std::vector<std::unique_ptr<MemoryStorage>> storage;
    std::vector<std::unique_ptr<Raft>> nodes;
    for (int k = 0; k < kNodes; ++k) {
        Config c;
        c.id = static_cast<NodeId>(k + 1);
        c.voters = {1, 2, 3};
        c.snapshot_threshold = 20000;
        c.seed = 7;
        storage.push_back(std::make_unique<MemoryStorage>());
        nodes.push_back(std::make_unique<Raft>(c, *storage.back()));
    }
    std::deque<Message> net;
    std::uint64_t applied = 0;
    auto process = [&](int k) {
        Raft& r = *nodes[k];
        MemoryStorage& s = *storage[k];
        while (r.has_ready()) {
            Ready rd = r.ready();
            // Step 0: what may leave before the write (the leader's appends), then the
            // write, then what waits for it.
            for (Message& m : rd.messages_before_persist)
                net.push_back(std::move(m));
            if (rd.snapshot) s.apply_snapshot(*rd.snapshot);
            s.append(rd.entries);
            if (rd.hard_state) s.set_hard_state(*rd.hard_state);
            for (Message& m : rd.messages)
                net.push_back(std::move(m));
            if (k == 0) applied += rd.committed_entries.size();
            if (rd.snapshot_wanted) {
                s.create_snapshot(*rd.snapshot_wanted, "state");
                s.compact(*rd.snapshot_wanted);
            }
            r.advance(rd);
        }
    };
    auto deliver_all = [&] {
        for (std::size_t n = net.size(); n > 0 && !net.empty(); --n) {
            Message m = std::move(net.front());
            net.pop_front();
            nodes[m.to - 1]->step(m);
            process(static_cast<int>(m.to - 1));
        }
    };
    // Elect node 1.
    for (int t = 0; t < 100 && nodes[0]->role() != Role::leader; ++t) {
        nodes[0]->tick(0);
        process(0);
        for (int i = 0; i < 10; ++i)
            deliver_all();
    }
    if (nodes[0]->role() != Role::leader) {
        std::fprintf(stderr, "bench: no leader\n");
        return 1;
    }
    for (int i = 0; i < 10; ++i)
        deliver_all();

    std::vector<std::string> payloads(batch, std::string(64, 'x'));
    Raft& leader = *nodes[0];
    Index start = leader.log().committed();
    Index target = start + entries;
    auto t0 = std::chrono::steady_clock::now();
    std::uint64_t proposals = 0, rounds = 0;
    Millis now = 1;
    // A core that stops committing ends the run: no progress for this many rounds.
    constexpr std::uint64_t kStallRounds = 1'000'000;
    Index last_committed = start;
    std::uint64_t last_progress = 0;
    while (leader.log().committed() < target) {
        if (leader.log().committed() != last_committed) {
            last_committed = leader.log().committed();
            last_progress = rounds;
        } else if (rounds - last_progress > kStallRounds) {
            break;
        }
        // Keep a bounded amount of work in flight (pipelining without unbounded memory).
        if (leader.log().last_index() - leader.log().committed() < 4096) {
            if (!leader.propose(std::span<const std::string>(payloads), now)) break;
            ++proposals;
        }
        process(0);
        deliver_all();
        if (++rounds % 64 == 0) {
            ++now;
            for (int k = 0; k < kNodes; ++k) {
                nodes[k]->tick(now);
                process(k);
            }
        }
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double committed = static_cast<double>(leader.log().committed() - start);
    std::printf(
        "bench: 3 nodes, batch %llu x 64 B: %.0f entries committed in %.2f s = %.0f entries/s "
        "(%.0f proposals/s); leader applied %llu\n",
        (unsigned long long)batch, committed, s, committed / s, static_cast<double>(proposals) / s,
        (unsigned long long)applied);
    if (leader.role() != Role::leader || committed < static_cast<double>(entries)) {
        std::fprintf(stderr, "bench: %.0f of %llu entries committed; the leader %s\n", committed,
                     (unsigned long long)entries,
                     leader.role() == Role::leader ? "still leads" : "lost its leadership");
        return 1;
    }
    return 0;
}
