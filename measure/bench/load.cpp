#include "load.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <thread>

namespace dueq::bench {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

std::int64_t wall_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string_view scenario_name(Scenario s) {
    switch (s) {
        case Scenario::put:
            return "put";
        case Scenario::get:
            return "get";
        case Scenario::refresh:
            return "refresh";
        case Scenario::mixed:
            return "mixed";
        case Scenario::preload:
            return "preload";
    }
    return "?";
}

std::string_view op_name(Op op) {
    switch (op) {
        case Op::put:
            return "put";
        case Op::get:
            return "get";
        case Op::take:
            return "take";
        case Op::ack:
            return "ack";
        case Op::refresh:
            return "refresh";
    }
    return "?";
}

std::uint64_t LoadResult::main_ops() const {
    const auto& o = ops;
    auto n = [&](Op op) { return o[std::size_t(op)].ops; };
    if (scenario == "refresh") return n(Op::refresh);
    if (scenario == "get") return n(Op::get);
    if (scenario == "mixed") return n(Op::get) + n(Op::put) + n(Op::refresh);
    return n(Op::put);
}

namespace {

// What every worker thread shares.
struct Shared {
    explicit Shared(const LoadOptions& opts) : o(opts) {}
    const LoadOptions& o;
    Clock::time_point start, measure_from, measure_until, hard_stop;
    std::int64_t wall_start = 0;
    std::atomic<std::uint64_t> issued{0};                // measured ops started (and preload keys)
    std::atomic<std::uint64_t> completed{0}, failed{0};  // every op, for the progress line
    std::atomic<int> workers_left{0};
    std::atomic<bool> stop{false};
};

std::uint64_t nanos(Clock::duration d) {
    return std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// One thread: its own io_context, connections and statistics.
class Worker {
  public:
    Worker(Shared& shared, std::vector<int> conn_ids, std::uint64_t seed)
        : sh_(shared), o_(shared.o), conn_ids_(std::move(conn_ids)), rng_(seed), drain_(io_) {
        payload_.assign(o_.payload_bytes, 'x');
        new_payload_.assign(o_.payload_bytes, 'y');
        if (o_.random_payloads) {
            // 1 MiB of base64-like noise, the same in every run; payload i starts at a
            // different offset in it.
            std::mt19937_64 noise(0x7e57ab1e);
            const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            noise_.resize((1u << 20) + o_.payload_bytes);
            for (char& ch : noise_)
                ch = digits[noise() & 63];
        }
        for (std::size_t i = 0; i < conn_ids_.size(); ++i)
            conns_.push_back(connect(o_.backend, io_,
                                     o_.addrs[std::size_t(conn_ids_[i]) % o_.addrs.size()],
                                     o_.connect_timeout_ms));
    }

    // Declares the scenario's queue through the first connection (blocking).
    void declare() {
        if (conns_.empty()) return;
        bool done = false;
        Reply result;
        conns_[0]->declare(QueueSetup{o_.queue, o_.lead_ms, o_.ttr_ms}, [&](Reply r) {
            result = std::move(r);
            done = true;
        });
        while (!done && io_.run_one()) {
        }
        if (!result.ok) throw std::runtime_error("declare " + o_.queue + ": " + result.error);
    }

    void run() {
        for (std::size_t c = 0; c < conns_.size(); ++c)
            for (int d = 0; d < o_.depth; ++d) {
                ++active_;
                asio::post(io_, [this, c] { issue(c); });
            }
        // Whatever is still in flight this long after the end is abandoned.
        drain_.expires_at(sh_.hard_stop + std::chrono::seconds(30));
        drain_.async_wait([this](boost::system::error_code ec) {
            if (!ec) close_all();
        });
        io_.run();
    }

    std::array<OpStats, kOpCount> stats;
    std::map<std::string, std::uint64_t> errors;
    std::uint64_t empty_takes = 0, superseded = 0;
    Clock::time_point last_measured{};

  private:
    bool role_refresh(std::size_t c) const {
        switch (o_.scenario) {
            case Scenario::refresh:
                return true;
            case Scenario::mixed:
                return conn_ids_[c] < o_.refreshers;
            default:
                return false;
        }
    }

    // Whether slot on connection c may start another op; counts it if so.
    bool may_issue(std::size_t c, Clock::time_point now) {
        if (sh_.stop.load(std::memory_order_relaxed) || conns_[c]->broken()) return false;
        if (now >= sh_.hard_stop) return false;
        if (o_.max_ops == 0) return now < sh_.measure_until;
        if (now < sh_.measure_from) return true;
        return sh_.issued.fetch_add(1, std::memory_order_relaxed) < o_.max_ops;
    }

    void slot_done() {
        if (--active_ == 0) close_all();
    }
    void close_all() {
        drain_.cancel();
        for (auto& c : conns_)
            c->close();
    }

    void record(Op op, Clock::time_point t0, Clock::time_point t1, const Reply& r) {
        sh_.completed.fetch_add(1, std::memory_order_relaxed);
        if (!r.ok) sh_.failed.fetch_add(1, std::memory_order_relaxed);
        if (t0 < sh_.measure_from) return;
        if (o_.max_ops == 0 && t0 >= sh_.measure_until) return;
        auto& s = stats[std::size_t(op)];
        ++s.ops;
        s.latency.record(nanos(t1 - t0));
        if (t1 > last_measured) last_measured = t1;
        if (!r.ok) {
            ++s.errors;
            ++errors[std::string(op_name(op)) + ": " + r.error.substr(0, 80)];
        }
    }

    std::uint64_t key_count() const {
        return o_.key_numbers.empty() ? o_.keys : o_.key_numbers.size();
    }
    // The key of the i-th allowed key number.
    std::string key_at(std::uint64_t i) const {
        return key_of(o_.key_numbers.empty() ? i : o_.key_numbers[i], o_.key_bytes);
    }
    std::uint64_t random_key() { return rng_() % key_count(); }

    void issue(std::size_t c) {
        const auto now = Clock::now();
        if (o_.scenario == Scenario::preload) return issue_preload(c);
        if (!may_issue(c, now)) return slot_done();
        if (role_refresh(c)) return issue_refresh(c, now);
        const bool is_get = o_.scenario == Scenario::get ||
                            (o_.scenario == Scenario::mixed &&
                             std::uniform_real_distribution<double>(0, 1)(rng_) < o_.read_share);
        const auto key = key_at(random_key());
        if (is_get) {
            conns_[c]->get(o_.queue, key, [this, c, now](Reply r) {
                // A front end reading a token that was never written is not a failure of
                // the store; count only transport and server errors.
                if (!r.ok && r.error == "not_found") r = Reply{true, {}};
                record(Op::get, now, Clock::now(), r);
                issue(c);
            });
            return;
        }
        // put: an upsert of a random key. In `put` the task comes due in an hour; in
        // `mixed` a front end writes a token that is due now, so refreshers never run dry.
        const std::int64_t time = wall_ms() + (o_.scenario == Scenario::mixed ? 0 : 3'600'000);
        conns_[c]->put(o_.queue, key, payload_, time, [this, c, now](Reply r) {
            record(Op::put, now, Clock::now(), r);
            issue(c);
        });
    }

    void issue_preload(std::size_t c) {
        if (sh_.stop || conns_[c]->broken() || Clock::now() >= sh_.hard_stop) return slot_done();
        const auto i = sh_.issued.fetch_add(1, std::memory_order_relaxed);
        if (i >= key_count()) return slot_done();
        std::int64_t time = o_.base_time_ms ? o_.base_time_ms : sh_.wall_start + o_.time_offset_ms;
        if (o_.spread_ms > 0)
            time += std::int64_t((long double)(i) * (long double)(o_.spread_ms) /
                                 (long double)(key_count()));
        const auto t0 = Clock::now();
        const std::string_view payload =
            noise_.empty()
                ? std::string_view(payload_)
                : std::string_view(noise_).substr((i * 7919) % (1u << 20), o_.payload_bytes);
        conns_[c]->put(o_.queue, key_at(i), payload, time, [this, c, t0](Reply r) {
            record(Op::put, t0, Clock::now(), r);
            if (!r.ok) {
                std::fprintf(stderr, "\npreload: put failed: %s\n", r.error.c_str());
                sh_.stop = true;
            }
            issue_preload(c);
        });
    }

    void issue_refresh(std::size_t c, Clock::time_point t0) {
        conns_[c]->take(o_.queue, o_.ttr_ms, [this, c, t0](Reply r, std::optional<Taken> task) {
            const auto t1 = Clock::now();
            if (!r.ok || !task) {
                if (r.ok) {
                    // Nothing due (e.g. every task is taken): not an op; try again shortly.
                    if (t0 >= sh_.measure_from) ++empty_takes;
                    auto timer = std::make_shared<asio::steady_timer>(io_);
                    timer->expires_after(std::chrono::milliseconds(1));
                    timer->async_wait([this, c, timer](auto) { issue(c); });
                    return;
                }
                record(Op::take, t0, t1, r);
                record(Op::refresh, t0, t1, r);
                return issue(c);
            }
            record(Op::take, t0, t1, r);
            // The refreshed token: a new payload, due again at once (a steady cycle).
            conns_[c]->ack(o_.queue, *task, new_payload_, wall_ms(), [this, c, t0, t1](Reply ar) {
                const auto t2 = Clock::now();
                // In `mixed` a front end may have replaced the token meanwhile:
                // the store then refuses the stale lease, as it must.
                if (o_.scenario == Scenario::mixed && ar.error == "lease_mismatch") {
                    if (t0 >= sh_.measure_from) ++superseded;
                    ar = Reply{true, {}};
                }
                record(Op::ack, t1, t2, ar);
                record(Op::refresh, t0, t2, ar);
                issue(c);
            });
        });
    }

    Shared& sh_;
    const LoadOptions& o_;
    std::vector<int> conn_ids_;
    asio::io_context io_;
    std::vector<std::shared_ptr<Connection>> conns_;
    std::mt19937_64 rng_;
    asio::steady_timer drain_;
    std::string payload_, new_payload_;
    std::string noise_;  // random_payloads: where preload payloads are cut from
    int active_ = 0;
};

void progress_loop(Shared& sh, const std::string& label) {
    const bool tty = isatty(2);
    std::uint64_t last = 0;
    auto last_t = Clock::now();
    while (sh.workers_left.load() > 0) {
        for (int i = 0; i < 10 && sh.workers_left.load() > 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (sh.workers_left.load() == 0) break;
        const auto now = Clock::now();
        const auto n = sh.completed.load();
        const double dt = std::chrono::duration<double>(now - last_t).count();
        const double elapsed = std::chrono::duration<double>(now - sh.start).count();
        const char* phase = now < sh.measure_from ? "warm-up" : "measuring";
        std::fprintf(stderr,
                     "%s%s: %5.1fs %s, %10.0f ops/s, %" PRIu64 " ops, %" PRIu64 " errors   %s",
                     tty ? "\r" : "", label.c_str(), elapsed, phase, double(n - last) / dt, n,
                     sh.failed.load(), tty ? "" : "\n");
        std::fflush(stderr);
        last = n;
        last_t = now;
    }
    if (tty) std::fprintf(stderr, "\n");
}

}  // namespace

LoadResult run_load(const LoadOptions& options) {
    LoadOptions o = options;
    if (o.connections < 1 || o.depth < 1 || o.threads < 1)
        throw std::runtime_error("connections, depth and threads must be at least 1");
    if (o.keys == 0) throw std::runtime_error("--keys must be at least 1");
    if (o.scenario == Scenario::mixed && o.refreshers <= 0)
        o.refreshers = std::max(1, o.connections / 4);
    if (o.scenario == Scenario::preload) o.warmup_s = 0;
    o.threads = std::min(o.threads, o.connections);

    Shared sh(o);
    std::vector<std::unique_ptr<Worker>> workers;
    for (int t = 0; t < o.threads; ++t) {
        std::vector<int> ids;
        for (int c = t; c < o.connections; c += o.threads)
            ids.push_back(c);
        workers.push_back(std::make_unique<Worker>(sh, std::move(ids), 0x5eed + std::uint64_t(t)));
    }
    workers[0]->declare();

    sh.start = Clock::now();
    sh.wall_start = wall_ms();
    sh.measure_from = sh.start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(o.warmup_s));
    sh.measure_until = sh.measure_from + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(o.seconds));
    // With an op count the duration is only a bound.
    sh.hard_stop = sh.measure_until;
    sh.workers_left = o.threads;

    const std::string label =
        std::string(backend_name(o.backend)) + " " + std::string(scenario_name(o.scenario));
    std::thread progress;
    if (o.progress) progress = std::thread([&] { progress_loop(sh, label); });
    std::vector<std::thread> threads;
    for (int t = 1; t < o.threads; ++t)
        threads.emplace_back([&, t] {
            workers[std::size_t(t)]->run();
            --sh.workers_left;
        });
    workers[0]->run();
    --sh.workers_left;
    for (auto& t : threads)
        t.join();
    if (progress.joinable()) progress.join();

    LoadResult r;
    r.scenario = std::string(scenario_name(o.scenario));
    r.options = o;
    Clock::time_point last = sh.measure_from;
    for (auto& w : workers) {
        for (std::size_t i = 0; i < kOpCount; ++i) {
            r.ops[i].ops += w->stats[i].ops;
            r.ops[i].errors += w->stats[i].errors;
            r.ops[i].latency.merge(w->stats[i].latency);
        }
        for (auto& [k, v] : w->errors)
            r.errors[k] += v;
        r.empty_takes += w->empty_takes;
        r.superseded += w->superseded;
        last = std::max(last, w->last_measured);
    }
    r.seconds = std::chrono::duration<double>(last - sh.measure_from).count();
    return r;
}

nlohmann::json to_json(const LoadResult& r) {
    const auto& o = r.options;
    nlohmann::json j = {
        {"scenario", r.scenario},
        {"backend", backend_name(o.backend)},
        {"addrs", o.addrs},
        {"connections", o.connections},
        {"depth", o.depth},
        {"threads", o.threads},
        {"keys", o.keys},
        {"key_bytes", o.key_bytes},
        {"payload_bytes", o.payload_bytes},
        {"warmup_s", o.warmup_s},
        {"seconds", r.seconds},
        {"ops", r.main_ops()},
        {"ops_per_s", r.seconds > 0 ? double(r.main_ops()) / r.seconds : 0.0},
        {"empty_takes", r.empty_takes},
        {"superseded_acks", r.superseded},
        {"errors", r.errors},
    };
    nlohmann::json per_op = nlohmann::json::object();
    for (std::size_t i = 0; i < kOpCount; ++i) {
        const auto& s = r.ops[i];
        if (s.ops == 0) continue;
        auto us = [&](double q) { return double(s.latency.quantile(q)) / 1000.0; };
        per_op[std::string(op_name(Op(i)))] = {
            {"ops", s.ops},
            {"errors", s.errors},
            {"ops_per_s", r.seconds > 0 ? double(s.ops) / r.seconds : 0.0},
            {"p50_us", us(0.5)},
            {"p99_us", us(0.99)},
            {"p999_us", us(0.999)},
            {"max_us", double(s.latency.max()) / 1000.0},
            {"mean_us", s.latency.mean() / 1000.0},
        };
    }
    j["per_op"] = per_op;
    return j;
}

namespace {
std::string fmt_us(double us) {
    char b[32];
    if (us >= 10'000)
        std::snprintf(b, sizeof b, "%.0f ms", us / 1000);
    else if (us >= 1000)
        std::snprintf(b, sizeof b, "%.1f ms", us / 1000);
    else
        std::snprintf(b, sizeof b, "%.0f us", us);
    return b;
}
}  // namespace

std::string to_table(const std::vector<LoadResult>& results) {
    std::string out;
    char line[256];
    std::snprintf(line, sizeof line, "%-10s %-8s %-8s %5s %5s %12s %10s %8s %9s %9s %9s\n",
                  "backend", "scenario", "op", "conns", "depth", "ops", "ops/s", "errors", "p50",
                  "p99", "p99.9");
    out += line;
    for (const auto& r : results)
        for (std::size_t i = 0; i < kOpCount; ++i) {
            const auto& s = r.ops[i];
            if (s.ops == 0) continue;
            std::snprintf(line, sizeof line,
                          "%-10s %-8s %-8s %5d %5d %12" PRIu64 " %10.0f %8" PRIu64 " %9s %9s %9s\n",
                          std::string(backend_name(r.options.backend)).c_str(), r.scenario.c_str(),
                          std::string(op_name(Op(i))).c_str(), r.options.connections,
                          r.options.depth, s.ops, r.seconds > 0 ? double(s.ops) / r.seconds : 0.0,
                          s.errors, fmt_us(double(s.latency.quantile(0.5)) / 1000).c_str(),
                          fmt_us(double(s.latency.quantile(0.99)) / 1000).c_str(),
                          fmt_us(double(s.latency.quantile(0.999)) / 1000).c_str());
            out += line;
        }
    return out;
}

}  // namespace dueq::bench
