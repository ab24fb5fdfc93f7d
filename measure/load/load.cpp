// dueq-load: a small load generator for first throughput figures (put, refresh, get,
// get-leader).
// The full benchmark with peers and percentiles is measure/bench (its own issue).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../cmd/common/credential_flags.h"
#include "client/client.h"

using namespace dueq::client;
using Clock = std::chrono::steady_clock;

namespace {

// SIGTERM or SIGINT ends the run early, with its summary (measure/member-change.py).
std::atomic<bool> g_stop_requested{false};

std::int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string payload_of(std::size_t bytes) {
    // msgpack bin8/bin16/bin32 of `bytes` filler bytes.
    std::string p;
    if (bytes < 256)
        p = {char(0xc4), char(bytes)};
    else if (bytes < 65536)
        p = {char(0xc5), char(bytes >> 8), char(bytes)};
    else
        p = {char(0xc6), char(bytes >> 24), char(bytes >> 16), char(bytes >> 8), char(bytes)};
    p.append(bytes, 'x');
    return p;
}

struct Run {
    std::string op, queue = "load";
    std::size_t keys = 100000, payload_bytes = 200;
    int connections = 1, depth = 1;
    double seconds = 5;
    std::uint64_t max_ops = 0;
    std::vector<std::string> addrs{"127.0.0.1:7700"};

    std::atomic<std::uint64_t> done{0}, errors{0}, next_key{0};
    // Failed ops by the code they failed with (a take that found nothing due: "empty").
    std::array<std::atomic<std::uint64_t>, dueq::wire::kCodeNames.size() + 1> by_code{};
    std::string progress_file;  // one line per second: unix ms, ops, errors
    std::atomic<bool> stop{false};
    std::mutex mu;  // guards latencies_us, finished_loops
    std::condition_variable cv;
    std::vector<std::uint32_t> latencies_us;
    int finished_loops = 0;
};

// One in-flight request slot of one connection: issues its next op when the last ends.
struct Loop : std::enable_shared_from_this<Loop> {
    Run& run;
    Client& client;
    std::string payload;
    std::vector<std::uint32_t> lat;
    Loop(Run& r, Client& c) : run(r), client(c), payload(payload_of(r.payload_bytes)) {}

    bool more() {
        const auto issued = run.op == "put" ? run.next_key.load() : run.done.load();
        return !run.stop && (run.max_ops == 0 || issued < run.max_ops);
    }
    void finish() {
        std::lock_guard lock(run.mu);
        run.latencies_us.insert(run.latencies_us.end(), lat.begin(), lat.end());
        ++run.finished_loops;
        run.cv.notify_all();
    }
    void record(Clock::time_point t0, bool ok, const Error* error = nullptr) {
        if (!ok) {
            ++run.errors;
            ++run.by_code[error ? std::min(std::size_t(error->code), run.by_code.size() - 2)
                                : run.by_code.size() - 1];
        }
        ++run.done;
        lat.push_back(std::uint32_t(
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count()));
    }
    void next() {
        if (!more()) return finish();
        auto self = shared_from_this();
        const auto t0 = Clock::now();
        if (run.op == "put") {
            PutRequest p;
            p.queue = run.queue;
            // Keys cycle through 0..keys-1, so --max-ops N --keys N puts each key once.
            p.key = "k" + std::to_string(run.next_key++ % run.keys);
            p.payload = payload;
            p.time = now_ms() + 3'600'000;
            client.async(p, [self, t0](Result<PutResponse> r) {
                self->record(t0, r.ok(), r.ok() ? nullptr : &r.error());
                self->next();
            });
            return;
        }
        if (run.op == "get" || run.op == "get-leader") {
            GetRequest g;
            g.queue = run.queue;
            g.key = "k" + std::to_string(run.next_key++ % run.keys);
            g.consistency = run.op == "get" ? "local" : "leader";
            client.async(g, [self, t0](Result<GetResponse> r) {
                self->record(t0, r.ok(), r.ok() ? nullptr : &r.error());
                self->next();
            });
            return;
        }
        TakeRequest t;
        t.queue = run.queue;
        t.ttr_ms = 30'000;
        client.async(t, [self, t0](Result<TakeResponse> r) {
            if (!r.ok() || r->tasks.empty()) {
                self->record(t0, false, r.ok() ? nullptr : &r.error());
                return self->next();
            }
            AckRequest a;
            a.queue = self->run.queue;
            a.key = r->tasks[0].key;
            a.lease = r->tasks[0].lease;
            a.payload = self->payload;
            a.time = now_ms();  // due again at once: a steady refresh cycle
            self->client.async(a, [self, t0](Result<AckResponse> ar) {
                self->record(t0, ar.ok(), ar.ok() ? nullptr : &ar.error());
                self->next();
            });
        });
    }
};

void preload(Run& run, Client& c) {
    std::vector<std::future<Result<PutResponse>>> f;
    const std::string payload = payload_of(run.payload_bytes);
    for (std::size_t i = 0; i < run.keys; ++i) {
        PutRequest p;
        p.queue = run.queue;
        p.key = "k" + std::to_string(i);
        p.payload = payload;
        p.time = now_ms() - 1;
        f.push_back(c.call_async(p));
        if (f.size() == 256 || i + 1 == run.keys) {
            for (auto& x : f) {
                auto r = x.get();
                if (!r.ok()) throw std::runtime_error("preload failed: " + r.error().to_string());
            }
            f.clear();
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    Run run;
    CLI::App app{
        "dueq-load: drive a dueq node with puts or take+ack refresh cycles and print ops/s.\n"
        "Example: dueq-load put --connections 64 --depth 4 --seconds 10"};
    app.add_option("op", run.op,
                   "put | refresh | get (local reads of preloaded tasks) | get-leader "
                   "(consistency \"leader\": the leader confirms it leads first)")
        ->required()
        ->check(CLI::IsMember({"put", "refresh", "get", "get-leader"}));
    app.add_option("--addr", run.addrs, "node address(es), host:port")->capture_default_str();
    app.add_option("--connections,-c", run.connections, "client connections")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024));
    app.add_option("--depth,-d", run.depth, "requests in flight per connection")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024));
    app.add_option("--seconds,-s", run.seconds, "how long to run (bounded)")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 3600.0));
    app.add_option("--max-ops", run.max_ops, "stop after this many ops (0: no limit)")
        ->capture_default_str();
    app.add_option("--keys", run.keys, "distinct keys (put) / tasks preloaded (refresh, gets)")
        ->capture_default_str();
    app.add_option("--payload-bytes", run.payload_bytes, "payload size")->capture_default_str();
    app.add_option("--queue", run.queue, "queue name")->capture_default_str();
    app.add_option("--progress-file", run.progress_file,
                   "append one line a second: unix ms, ops and errors in that second");
    dueq::client::Credentials credentials;
    dueq::cmd::add_credential_flags(app, credentials);
    CLI11_PARSE(app, argc, argv);
    ClientOptions with_credentials;
    if (auto err = credentials.apply(with_credentials); !err.empty()) {
        std::fprintf(stderr, "dueq-load: %s\n", err.c_str());
        return 2;
    }

    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < run.connections; ++i) {
        ClientOptions o = with_credentials;
        o.seeds = run.addrs;
        o.call_timeout = std::chrono::milliseconds(10000);
        clients.push_back(std::make_unique<Client>(o));
    }
    if (auto p = clients[0]->ping(); !p.ok()) {
        std::fprintf(stderr, "dueq-load: cannot reach %s: %s\n", run.addrs[0].c_str(),
                     p.error().to_string().c_str());
        return 1;
    }
    if (run.op != "put") {
        std::fprintf(stderr, "preloading %zu tasks...\n", run.keys);
        preload(run, *clients[0]);
    }
    const auto t0 = Clock::now();
    for (int c = 0; c < run.connections; ++c)
        for (int d = 0; d < run.depth; ++d)
            std::make_shared<Loop>(run, *clients[c])->next();
    const int loops = run.connections * run.depth;
    std::uint64_t last = 0, last_errors = 0;
    auto last_t = t0;
    std::signal(SIGTERM, [](int) { g_stop_requested = true; });
    std::signal(SIGINT, [](int) { g_stop_requested = true; });
    while (Clock::now() - t0 < std::chrono::duration<double>(run.seconds) &&
           !(run.max_ops && run.done >= run.max_ops) && !g_stop_requested) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        const auto n = run.done.load();
        const double dt = std::chrono::duration<double>(Clock::now() - last_t).count();
        std::fprintf(stderr, "\r%s: %llu ops, %.0f ops/s, %llu errors   ", run.op.c_str(),
                     (unsigned long long)n, (n - last) / dt, (unsigned long long)run.errors.load());
        if (!run.progress_file.empty()) {
            if (std::FILE* f = std::fopen(run.progress_file.c_str(), "a")) {
                const auto errors = run.errors.load();
                std::fprintf(f, "%lld %llu %llu\n", (long long)now_ms(),
                             (unsigned long long)(n - last),
                             (unsigned long long)(errors - last_errors));
                last_errors = errors;
                std::fclose(f);
            }
        }
        last = n;
        last_t = Clock::now();
    }
    run.stop = true;
    {
        std::unique_lock lock(run.mu);
        run.cv.wait(lock, [&] { return run.finished_loops == loops; });
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    auto& l = run.latencies_us;
    std::sort(l.begin(), l.end());
    auto pct = [&](double p) {
        return l.empty() ? 0u : l[std::min(l.size() - 1, std::size_t(p * l.size()))];
    };
    std::fprintf(stderr, "\n");
    std::string codes;
    for (std::size_t i = 0; i < run.by_code.size(); ++i) {
        if (run.by_code[i] == 0) continue;
        const std::string name = i + 1 == run.by_code.size()
                                     ? "empty"
                                     : std::string(dueq::wire::code_name(dueq::wire::Code(i)));
        codes += (codes.empty() ? "" : ",") + ("\"" + name + "\":") +
                 std::to_string(run.by_code[i].load());
    }
    std::printf(
        "{\"op\":\"%s\",\"connections\":%d,\"depth\":%d,\"ops\":%llu,\"errors\":%llu,\"seconds\":%."
        "2f,"
        "\"ops_per_s\":%.0f,\"p50_us\":%u,\"p99_us\":%u,\"errors_by_code\":{%s}}\n",
        run.op.c_str(), run.connections, run.depth, (unsigned long long)run.done.load(),
        (unsigned long long)run.errors.load(), secs, run.done / secs, pct(0.5), pct(0.99),
        codes.c_str());
    return run.errors > 0 ? 3 : 0;
}
