// dueq-log-write: what the storage write costs per Raft log entry, without a network or a
// cluster.
//
// Writes batches of log entries (as a leader's Ready hands them to storage) through
// storage::Database::write into a fresh RocksDB directory, with fsync off so that what is
// measured is CPU, and reports entries per second and the process's CPU time per entry:
// the writing thread's and RocksDB's flush and compaction threads', plus copying each
// entry's data in. Three-node benchmarks on a shared 2-core VM vary by 20% from run to
// run; this isolates one stage of the write path, so that a change to it can be compared
// run against run.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/parse_size.h"
#include "bench/key_of.h"
#include "common/process_cpu.h"
#include "storage/database.h"

namespace {

struct Options {
    std::size_t entries = 2'000'000;
    std::size_t batch = 512;
    std::size_t data_bytes = 80;
    std::size_t task_keys = 0;
    std::size_t state_every = 20'000;
    std::string dir;
};

const char* kUsage =
    "usage: dueq-log-write --dir DIR [--entries N] [--batch B] [--data-bytes D]\n"
    "                 [--task-keys K [--state-every E]]\n"
    "  Writes N log entries (default 2000000) of D bytes of data (default 80, about a put\n"
    "  of a token) in batches of B (default 512) into a new RocksDB in DIR (which must not\n"
    "  exist; it is removed afterwards), fsync off, and prints entries/s and CPU us/entry.\n"
    "  With --task-keys K, every E entries (default 20000, as [storage]\n"
    "  state_write_entries) it also writes the applied state as a node does: one changed\n"
    "  task per entry, its key drawn at random among K, its record D bytes.\n";

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        bool ok = true;
        if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (a == "--dir" && has_value) {
            o.dir = argv[++i];
        } else if (a == "--entries" && has_value) {
            ok = dueq::parse_size(argv[++i], &o.entries) && o.entries > 0;
        } else if (a == "--batch" && has_value) {
            ok = dueq::parse_size(argv[++i], &o.batch) && o.batch > 0;
        } else if (a == "--data-bytes" && has_value) {
            ok = dueq::parse_size(argv[++i], &o.data_bytes) && o.data_bytes > 0;
        } else if (a == "--task-keys" && has_value) {
            ok = dueq::parse_size(argv[++i], &o.task_keys);
        } else if (a == "--state-every" && has_value) {
            ok = dueq::parse_size(argv[++i], &o.state_every) && o.state_every > 0;
        } else {
            ok = false;
        }
        if (!ok) {
            std::fprintf(stderr, "dueq-log-write: bad argument '%s'\n%s", a.c_str(), kUsage);
            return 2;
        }
    }
    if (o.dir.empty()) {
        std::fprintf(stderr, "dueq-log-write: --dir is required\n%s", kUsage);
        return 2;
    }
    if (std::filesystem::exists(o.dir)) {
        std::fprintf(stderr, "dueq-log-write: %s exists; give a new directory\n", o.dir.c_str());
        return 2;
    }
    dueq::storage::Status st;
    auto db = dueq::storage::Database::open(o.dir, false, st);
    if (!db) {
        std::fprintf(stderr, "dueq-log-write: %s\n", st.message.c_str());
        return 1;
    }
    // Entry data drawn from a pool of random strings: copying one in is what the Ready
    // hands over anyway, and generating bytes would be most of the time measured.
    std::mt19937_64 rng(1);
    std::vector<std::string> pool(1024, std::string(o.data_bytes, '\0'));
    for (auto& d : pool)
        for (auto& c : d)
            c = char(rng());
    std::vector<dueq::storage::LogWrite> logs(1);
    std::vector<dueq::storage::AppliedState> applied;
    std::uint64_t index = 0;
    std::uint64_t state_index = 0;
    const auto wall0 = std::chrono::steady_clock::now();
    const double cpu0 = dueq::process_cpu_seconds();
    for (std::size_t done = 0; done < o.entries; done += o.batch) {
        auto& entries = logs[0].entries;
        entries.clear();
        for (std::size_t i = 0; i < o.batch && done + i < o.entries; ++i) {
            dueq::raft::Entry e;
            e.index = ++index;
            e.term = 1;
            e.time = std::int64_t(index);
            e.data = pool[index % pool.size()];
            entries.push_back(std::move(e));
        }
        applied.clear();
        if (o.task_keys > 0 && index - state_index >= o.state_every) {
            // 16-byte keys, as dueq-bench makes them.
            auto& st = applied.emplace_back();
            st.applied_index = index;
            st.applied_time = std::int64_t(index);
            for (; state_index < index; ++state_index) {
                st.changes.push_back(
                    {"q", key_of(rng() % o.task_keys, 16), pool[state_index % pool.size()]});
            }
        }
        if (auto s = db->write(logs, applied); !s.ok) {
            std::fprintf(stderr, "dueq-log-write: %s\n", s.message.c_str());
            return 1;
        }
    }
    // What is still in memtables is sorted and written out too, so that both sides of a
    // comparison pay for every entry's flush.
    if (auto s = db->flush(); !s.ok) {
        std::fprintf(stderr, "dueq-log-write: %s\n", s.message.c_str());
        return 1;
    }
    const double cpu = dueq::process_cpu_seconds() - cpu0;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    db.reset();
    std::filesystem::remove_all(o.dir);
    std::printf(
        "entries %zu, batch %zu, data %zu B, task keys %zu: %.0f entries/s, %.2f us "
        "CPU/entry\n",
        o.entries, o.batch, o.data_bytes, o.task_keys, double(o.entries) / wall,
        cpu * 1e6 / double(o.entries));
    return 0;
}
