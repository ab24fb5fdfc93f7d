// dueq-queue-mem: how many bytes the task store spends per task beyond key and payload.
//
// Fills a Store with N tasks through apply(Put) (draining the change list as the node's
// storage thread would), then reports two measures of the per-task overhead: the store's
// own accounting (overhead_bytes) and the growth of the process's resident set minus the
// key and payload bytes. Also times the fill and one take+ack cycle over every task.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "common/parse_size.h"
#include "queue/store.h"

namespace {

using dueq::queue::Ack;
using dueq::queue::Millis;
using dueq::queue::Put;
using dueq::queue::Store;
using dueq::queue::Take;

struct Options {
    std::size_t tasks = 1'000'000;
    std::size_t key_bytes = 16;
    std::size_t payload_bytes = 64;
    bool json = false;
};

const char* kUsage =
    "usage: dueq-queue-mem [--tasks N] [--key-bytes K] [--payload-bytes P] [--json]\n"
    "  Fills an in-memory task store with N tasks (default 1000000) with keys of K bytes\n"
    "  (default 16) and payloads of P bytes (default 64), and reports the bytes per task\n"
    "  beyond key and payload, by the store's accounting and by resident-set growth.\n";

// Returns 0 to run, or the exit code to leave with.
int parse(int argc, char** argv, Options* o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](std::size_t* out) {
            return i + 1 < argc && dueq::parse_size(argv[++i], out);
        };
        bool ok = true;
        if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            return -1;
        } else if (a == "--tasks") {
            ok = value(&o->tasks);
        } else if (a == "--key-bytes") {
            ok = value(&o->key_bytes);
        } else if (a == "--payload-bytes") {
            ok = value(&o->payload_bytes);
        } else if (a == "--json") {
            o->json = true;
        } else {
            ok = false;
        }
        if (!ok) {
            std::fprintf(stderr, "dueq-queue-mem: bad argument '%s'\n%s", a.c_str(), kUsage);
            return 2;
        }
    }
    if (o->tasks == 0 || o->key_bytes < 12 || o->key_bytes > 1024 || o->payload_bytes > (1 << 20)) {
        std::fprintf(stderr,
                     "dueq-queue-mem: need tasks > 0, 12 <= key-bytes <= 1024, "
                     "payload-bytes <= 1048576\n");
        return 2;
    }
    return 0;
}

long rss_bytes() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6) * 1024;
    }
    return -1;
}

// key-000000000042, padded with zeros to exactly `bytes`.
std::string make_key(std::size_t i, std::size_t bytes) {
    std::string digits = std::to_string(i);
    std::string key = "key-";
    key.append(bytes - key.size() - digits.size(), '0');
    key += digits;
    return key;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (int rc = parse(argc, argv, &o); rc != 0) return rc < 0 ? 0 : rc;

    const Millis t0 = 1'700'000'000'000;
    const std::string payload(o.payload_bytes, 'v');
    auto discard = [](std::string_view, std::string_view, const std::optional<std::string>&) {};

    Store store;
    const long rss_before = rss_bytes();
    auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < o.tasks; ++i) {
        Put p{"mem", make_key(i, o.key_bytes), payload, t0 + static_cast<Millis>(i % 3'600'000)};
        if (!store.apply(p, t0).ok()) {
            std::fprintf(stderr, "dueq-queue-mem: put %zu refused\n", i);
            return 1;
        }
        if (i % 4096 == 4095) store.drain_changes(discard);
    }
    store.drain_changes(discard);
    const double fill_s = seconds_since(start);
    const long rss_after = rss_bytes();

    const double n = static_cast<double>(o.tasks);
    const double data = n * static_cast<double>(o.key_bytes + o.payload_bytes);
    const double by_accounting = static_cast<double>(store.overhead_bytes()) / n;
    const double by_rss = (static_cast<double>(rss_after - rss_before) - data) / n;

    // One take+ack cycle over every task: all are due (late) an hour later; each ack
    // makes it due again a day on, as a refresher would.
    const Millis later = t0 + 3'600'000;
    start = std::chrono::steady_clock::now();
    std::size_t cycled = 0;
    for (;;) {
        auto r = store.apply(Take{"mem", 1000}, later);
        if (r.tasks.empty()) break;
        for (const auto& t : r.tasks) {
            Ack a{"mem", t.key, t.lease, std::nullopt, later + 86'400'000};
            if (!store.apply(a, later).ok()) {
                std::fprintf(stderr, "dueq-queue-mem: ack refused\n");
                return 1;
            }
        }
        cycled += r.tasks.size();
        store.drain_changes(discard);
    }
    const double cycle_s = seconds_since(start);

    if (o.json) {
        std::printf(
            "{\"tasks\":%zu,\"key_bytes\":%zu,\"payload_bytes\":%zu,"
            "\"overhead_bytes_per_task\":%.1f,\"rss_bytes_per_task\":%.1f,"
            "\"fill_seconds\":%.3f,\"take_ack_seconds\":%.3f,\"take_ack_tasks\":%zu}\n",
            o.tasks, o.key_bytes, o.payload_bytes, by_accounting, by_rss, fill_s, cycle_s, cycled);
        return 0;
    }
    std::printf("tasks                               %zu\n", o.tasks);
    std::printf("key bytes / payload bytes           %zu / %zu\n", o.key_bytes, o.payload_bytes);
    std::printf("bytes/task, store accounting        %.1f\n", by_accounting);
    std::printf("bytes/task, RSS growth - key+payload %.1f\n", by_rss);
    std::printf("fill (put + drain)                  %.3f s  (%.0f puts/s)\n", fill_s, n / fill_s);
    std::printf("take+ack every task                 %.3f s  (%.0f tasks/s, %zu cycled)\n", cycle_s,
                static_cast<double>(cycled) / cycle_s, cycled);
    return 0;
}
