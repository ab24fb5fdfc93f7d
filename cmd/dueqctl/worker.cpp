// `dueqctl worker`: the reference refresher. Each of --concurrency threads loops
// take (blocking) -> work -> ack or release, all sharing one pipelined Client.
#include <csignal>
#include <iostream>
#include <random>
#include <thread>

#include "client/payload.h"
#include "client/time_spec.h"
#include "command_util.h"
#include "output.h"
#include "subprocess.h"

namespace dueq::dueqctl {
namespace {

using client::Code;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }

struct WorkerArgs {
    std::string queue, exec, next_in, retry_delay, wait = "2s", ttr, duration, latency;
    bool builtin = false;
    int concurrency = 1;
    uint32_t batch = 1;
    int64_t max_tasks = 0;
    int64_t progress_every = 1000;
};

// The parsed form of WorkerArgs.
struct Plan {
    std::optional<int64_t> next_in_ms, retry_delay_ms, ttr_ms;
    int64_t wait_ms = 2000;
    int64_t latency_ms = 0;
    std::optional<Clock::time_point> deadline;
};

class Worker {
public:
    Worker(Context& ctx, const WorkerArgs& args, Plan plan)
        : ctx_(ctx), args_(args), plan_(plan),
          remaining_(args.max_tasks > 0 ? args.max_tasks : INT64_MAX) {}

    int run();

private:
    void loop(unsigned seed);
    void process(const client::Task& task, std::mt19937_64& rng);
    bool builtin_result(std::mt19937_64& rng, client::AckRequest* ack);
    bool exec_result(const client::Task& task, client::AckRequest* ack);
    void finish(const client::Task& task, bool succeeded, client::AckRequest ack);
    int64_t reserve(int64_t want);
    void count_task(bool failed);
    bool stopping() const {
        return g_stop.load() || fatal_.load() || remaining_.load() <= 0 ||
               (plan_.deadline && Clock::now() >= *plan_.deadline);
    }

    Context& ctx_;
    const WorkerArgs& args_;
    const Plan plan_;
    std::atomic<int64_t> remaining_;  // slots left under --max-tasks
    std::atomic<int64_t> acked_{0}, failed_{0}, lost_{0}, take_errors_{0};
    std::atomic<bool> fatal_{false};
    Clock::time_point start_ = Clock::now();
};

int64_t Worker::reserve(int64_t want) {
    int64_t cur = remaining_.load();
    while (cur > 0) {
        const int64_t got = std::min(cur, want);
        if (remaining_.compare_exchange_weak(cur, cur - got)) return got;
    }
    return 0;
}

void Worker::count_task(bool failed) {
    const int64_t total = acked_.load() + failed_.load() + lost_.load();
    (void)failed;
    if (args_.progress_every > 0 && total % args_.progress_every == 0) {
        const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
        std::cerr << "worker: " << total << " tasks, " << failed_.load() << " failed, "
                  << lost_.load() << " lost, " << static_cast<int64_t>(total / std::max(secs, 1e-3))
                  << " tasks/s\n";
    }
}

void Worker::loop(unsigned seed) {
    std::mt19937_64 rng(seed);
    int64_t backoff_ms = 50;
    while (!stopping()) {
        const int64_t slots = reserve(args_.batch);
        if (slots == 0) break;
        client::TakeRequest take;
        take.queue = args_.queue;
        take.count = static_cast<uint32_t>(slots);
        take.ttr_ms = plan_.ttr_ms;
        int64_t wait = plan_.wait_ms;
        if (plan_.deadline) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                *plan_.deadline - Clock::now()).count();
            wait = std::max<int64_t>(0, std::min(wait, left));
        }
        take.timeout_ms = wait;
        auto r = ctx_.client().take(take, ctx_.call_options());
        if (!r.ok()) {
            remaining_ += slots;
            ++take_errors_;
            const Code c = r.code();
            if (c == Code::bad_request || c == Code::unauthorized) {
                report(r.error());
                fatal_ = true;
                return;
            }
            std::cerr << "worker: take: " << r.error().to_string() << " (retrying)\n";
            std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
            backoff_ms = std::min<int64_t>(backoff_ms * 2, 2000);
            continue;
        }
        backoff_ms = 50;
        remaining_ += slots - static_cast<int64_t>(r->tasks.size());
        for (const auto& task : r->tasks) process(task, rng);
    }
}

void Worker::process(const client::Task& task, std::mt19937_64& rng) {
    client::AckRequest ack{.queue = args_.queue, .key = task.key, .lease = task.lease};
    const bool ok = args_.builtin ? builtin_result(rng, &ack) : exec_result(task, &ack);
    finish(task, ok, std::move(ack));
}

bool Worker::builtin_result(std::mt19937_64& rng, client::AckRequest* ack) {
    if (plan_.latency_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(plan_.latency_ms));
    char token[33];
    std::snprintf(token, sizeof token, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()));
    const int64_t now = client::wall_clock_ms();
    const Json payload = {{"token", token}, {"refreshed_at", now}};
    const auto bytes = Json::to_msgpack(payload);
    ack->payload = std::string(bytes.begin(), bytes.end());
    ack->time = now + plan_.next_in_ms.value_or(3'600'000);
    return true;
}

// Applies the command's stdout: {"payload": <json>, "time": ms | "+90s" | ISO | null}.
bool Worker::exec_result(const client::Task& task, client::AckRequest* ack) {
    const int64_t taken_at = client::wall_clock_ms();
    auto payload = client::payload_to_json(task.payload);
    const std::vector<std::pair<std::string, std::string>> env = {
        {"DUEQ_QUEUE", args_.queue},
        {"DUEQ_KEY", task.key},
        {"DUEQ_TIME", std::to_string(task.time)},
        {"DUEQ_LEASE", std::to_string(task.lease)},
        {"DUEQ_LEASE_UNTIL", std::to_string(task.lease_until)},
        {"DUEQ_ATTEMPTS", std::to_string(task.attempts)}};
    // Keep the lease alive while the command runs: touch at half of what is left.
    int64_t lease_until = task.lease_until;
    int64_t last_touch = taken_at;
    auto on_tick = [&] {
        const int64_t now = client::wall_clock_ms();
        if (now < last_touch + (lease_until - last_touch) / 2 || now - last_touch < 1000) return;
        last_touch = now;
        auto t = ctx_.client().touch({.queue = args_.queue, .key = task.key, .lease = task.lease,
                                      .ttr_ms = plan_.ttr_ms},
                                     ctx_.call_options());
        if (t.ok()) lease_until = t->lease_until;
    };
    CommandResult run = run_shell(args_.exec, env, (payload.ok() ? *payload : "null") + "\n",
                                  std::chrono::milliseconds(250), on_tick);
    if (!run.started) {
        std::cerr << "worker: " << run.error << '\n';
        fatal_ = true;
        return false;
    }
    if (run.exit_code != 0) {
        std::cerr << "worker: " << task.key << ": command exited with "
                  << (run.exit_code < 0 ? std::string("a signal") : std::to_string(run.exit_code))
                  << '\n';
        return false;
    }
    const auto first = run.output.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) {
        if (plan_.next_in_ms) ack->time = client::wall_clock_ms() + *plan_.next_in_ms;
        return true;
    }
    const Json out = Json::parse(run.output, nullptr, false);
    if (!out.is_object()) {
        std::cerr << "worker: " << task.key << ": command output is not a JSON object\n";
        return false;
    }
    if (out.contains("payload")) {
        const auto bytes = Json::to_msgpack(out["payload"]);
        ack->payload = std::string(bytes.begin(), bytes.end());
    }
    const int64_t now = client::wall_clock_ms();
    if (!out.contains("time")) {
        if (plan_.next_in_ms) ack->time = now + *plan_.next_in_ms;
    } else if (out["time"].is_number_integer()) {
        ack->time = out["time"].get<int64_t>();
    } else if (out["time"].is_string()) {
        auto t = client::parse_time_ms(out["time"].get<std::string>(), now);
        if (!t.ok()) {
            std::cerr << "worker: " << task.key << ": \"time\": " << t.error().message << '\n';
            return false;
        }
        ack->time = *t;
    } else if (!out["time"].is_null()) {
        std::cerr << "worker: " << task.key << ": \"time\" must be ms, a string or null\n";
        return false;
    }
    return true;
}

void Worker::finish(const client::Task& task, bool succeeded, client::AckRequest ack) {
    client::Status outcome = client::ok_status();
    if (succeeded) {
        auto r = ctx_.client().ack(ack, ctx_.call_options());
        if (!r.ok()) outcome = r.error();
    } else {
        auto r = ctx_.client().release({.queue = args_.queue, .key = task.key, .lease = task.lease,
                                        .delay_ms = plan_.retry_delay_ms},
                                       ctx_.call_options());
        if (!r.ok()) outcome = r.error();
    }
    if (!outcome.ok()) {
        // The lease ran out or the task was replaced: someone else owns it now.
        ++lost_;
        std::cerr << "worker: " << task.key << ": " << (succeeded ? "ack" : "release") << ": "
                  << outcome.error().to_string() << '\n';
    } else if (succeeded) {
        ++acked_;
    } else {
        ++failed_;
    }
    count_task(!succeeded);
}

int Worker::run() {
    std::signal(SIGPIPE, SIG_IGN);
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    std::random_device rd;
    std::vector<std::thread> threads;
    for (int i = 0; i < args_.concurrency; ++i) threads.emplace_back([this, s = rd()] { loop(s); });
    for (auto& t : threads) t.join();

    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    const int64_t total = acked_ + failed_ + lost_;
    const double rate = total / std::max(secs, 1e-3);
    if (ctx_.json) {
        print_json({{"tasks", total}, {"acked", acked_.load()}, {"failed", failed_.load()},
                    {"lost", lost_.load()}, {"take_errors", take_errors_.load()},
                    {"seconds", secs}, {"tasks_per_second", rate}});
    } else {
        std::printf("worker: %lld tasks in %.2fs (%.1f/s): %lld acked, %lld failed and released, "
                    "%lld lost leases, %lld take errors\n",
                    static_cast<long long>(total), secs, rate, static_cast<long long>(acked_.load()),
                    static_cast<long long>(failed_.load()), static_cast<long long>(lost_.load()),
                    static_cast<long long>(take_errors_.load()));
    }
    return fatal_ ? 1 : 0;
}

int run_worker(Context& ctx, const WorkerArgs& args) {
    if (args.builtin == !args.exec.empty()) {
        std::cerr << "dueqctl worker: give exactly one of --exec CMD and --builtin-refresh\n";
        return kExitUsage;
    }
    Plan plan;
    int64_t duration = 0;
    if (!opt_duration("--next-in", args.next_in, &plan.next_in_ms) ||
        !opt_duration("--retry-delay", args.retry_delay, &plan.retry_delay_ms) ||
        !opt_duration("--ttr", args.ttr, &plan.ttr_ms) ||
        !parse_duration_arg("--wait", args.wait, &plan.wait_ms) ||
        (!args.latency.empty() && !parse_duration_arg("--latency", args.latency, &plan.latency_ms)) ||
        (!args.duration.empty() && !parse_duration_arg("--duration", args.duration, &duration))) {
        return kExitUsage;
    }
    if (!args.duration.empty()) plan.deadline = Clock::now() + std::chrono::milliseconds(duration);
    Worker worker(ctx, args, plan);
    return worker.run();
}

}  // namespace

void add_worker_command(CLI::App& app, Context& ctx) {
    auto a = std::make_shared<WorkerArgs>();
    auto* cmd = command(
        app, ctx, "worker",
        "Run the reference refresher: take due tasks, do the work, ack with the new payload and "
        "time (or release on failure), until --max-tasks, --duration or Ctrl-C. A progress line "
        "goes to stderr every --progress-every tasks, a summary to stdout at the end.\n\n"
        "With --exec CMD, each task runs `/bin/sh -c CMD` with the payload as JSON on stdin and\n"
        "DUEQ_QUEUE, DUEQ_KEY, DUEQ_TIME (ms), DUEQ_LEASE, DUEQ_LEASE_UNTIL, DUEQ_ATTEMPTS in its\n"
        "environment. Exit 0 acks, printing on stdout an optional JSON object:\n"
        "  {\"payload\": <any JSON: the new payload>, \"time\": <ms | \"+3600s\" | ISO-8601 | null>}\n"
        "A missing \"payload\" keeps the old one; a missing \"time\" (or no output) means now +\n"
        "--next-in, or done when --next-in is not given; \"time\": null means done. A non-zero\n"
        "exit, or output that is not such an object, releases the task (after --retry-delay).\n"
        "The lease is touched while the command runs longer than half of it.\n\n"
        "With --builtin-refresh no command is run: the payload becomes\n"
        "{\"token\": \"<random hex>\", \"refreshed_at\": <ms>} and the time now + --next-in (1h).",
        "  dueqctl worker tokens --builtin-refresh --next-in 1h --concurrency 8 --duration 30s\n"
        "  dueqctl worker tokens --exec './refresh.sh' --next-in 55m --retry-delay 30s\n"
        "  dueqctl worker jobs --exec 'jq -c \"{payload: (.n + 1)}\"' --next-in 10s --max-tasks 100\n",
        [&ctx, a] { return run_worker(ctx, *a); });
    add_queue(cmd, a->queue);
    cmd->add_option("--exec,-e", a->exec, "Shell command to run per task")->type_name("CMD");
    cmd->add_flag("--builtin-refresh", a->builtin, "Refresh with a random token, no command");
    cmd->add_option("--next-in", a->next_in, "New time = now + this, unless the command says")
        ->type_name("DURATION");
    cmd->add_option("--retry-delay", a->retry_delay, "Release a failed task with this delay")
        ->type_name("DURATION");
    cmd->add_option("--concurrency,-c", a->concurrency, "Tasks worked on at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--batch", a->batch, "Tasks per take, per thread")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--wait,--interval", a->wait,
                    "How long each blocking take waits for a task before asking again")
        ->capture_default_str()
        ->type_name("DURATION");
    cmd->add_option("--ttr", a->ttr, "Lease length (default: the queue's ttr)")
        ->type_name("DURATION");
    cmd->add_option("--max-tasks,-m", a->max_tasks, "Stop after this many tasks")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--duration", a->duration, "Stop after this long")->type_name("DURATION");
    cmd->add_option("--latency", a->latency,
                    "With --builtin-refresh: pretend each refresh takes this long")
        ->type_name("DURATION");
    cmd->add_option("--progress-every", a->progress_every,
                    "Print a progress line to stderr every N tasks (0: never)")
        ->capture_default_str();
}

}  // namespace dueq::dueqctl
