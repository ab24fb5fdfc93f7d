// take and the ops that act on a taken task under its lease, plus kick.
#include <iostream>

#include "client/time_spec.h"
#include "command_util.h"
#include "output.h"

namespace dueq::dueqctl {
namespace {

Json task_json(const client::Task& t) {
    return {{"key", t.key},       {"payload", payload_json(t.payload)}, {"time", t.time},
            {"lease", t.lease},   {"lease_until", t.lease_until},      {"attempts", t.attempts}};
}

void add_take(CLI::App& app, Context& ctx) {
    struct Args {
        std::string queue, wait, ttr;
        std::optional<uint32_t> count;
        bool release_on_disconnect = false;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = command(
        app, ctx, "take",
        "Lease due tasks (earliest not-yet-late first, then late ones). Prints each task's key, "
        "lease id, attempts, time and payload; ack, touch, release or bury it with that lease.\n\n"
        "Unlike the protocol default, the lease survives dueqctl exiting (it only runs out after "
        "its ttr) unless --release-on-disconnect is given.",
        "  dueqctl take tokens\n"
        "  dueqctl take tokens --count 2 --timeout 5s --ttr 30s\n"
        "  dueqctl --json take jobs --count 10 | jq -r '.tasks[].key'\n",
        [&ctx, a]() -> int {
            client::TakeRequest req;
            req.queue = a->queue;
            req.count = a->count;
            req.release_on_disconnect = a->release_on_disconnect;
            if (!opt_duration("--timeout", a->wait, &req.timeout_ms) ||
                !opt_duration("--ttr", a->ttr, &req.ttr_ms)) {
                return kExitUsage;
            }
            auto r = ctx.client().take(req, ctx.call_options());
            if (!r.ok()) return report(r.error());
            if (ctx.json) {
                Json tasks = Json::array();
                for (const auto& t : r->tasks) tasks.push_back(task_json(t));
                print_json({{"tasks", tasks}});
                return 0;
            }
            if (r->tasks.empty()) {
                std::cout << "no task is due in " << a->queue << '\n';
                return 0;
            }
            const int64_t now = client::wall_clock_ms();
            Table table({"KEY", "LEASE", "ATTEMPTS", "TIME", "LEASE_UNTIL", "PAYLOAD"});
            for (const auto& t : r->tasks) {
                table.add({t.key, std::to_string(t.lease), std::to_string(t.attempts),
                           when(t.time, now), when(t.lease_until, now), payload_text(t.payload, 60)});
            }
            table.print();
            return 0;
        });
    add_queue(cmd, a->queue);
    cmd->add_option("--count,-n", a->count, "How many tasks at most (1..1000, default 1)")
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--timeout,--wait,-w", a->wait,
                    "Wait up to this long for a task to come due (default: answer at once)")
        ->type_name("DURATION");
    cmd->add_option("--ttr", a->ttr, "Lease length (default: the queue's ttr)")
        ->type_name("DURATION");
    cmd->add_flag("--release-on-disconnect", a->release_on_disconnect,
                  "Give the tasks back when dueqctl exits (after the server's grace period)");
}

void add_touch(CLI::App& app, Context& ctx) {
    auto a = std::make_shared<TaskArgs>();
    auto* cmd = command(app, ctx, "touch", "Extend a lease: it now runs out --ttr from now.",
                        "  dueqctl touch tokens k1 --lease 7 --ttr 1m\n", [&ctx, a]() -> int {
                            client::TouchRequest req{.queue = a->queue, .key = a->key,
                                                     .lease = a->lease};
                            if (!opt_duration("--ttr", a->ttr, &req.ttr_ms)) return kExitUsage;
                            auto r = ctx.client().touch(req, ctx.call_options());
                            if (!r.ok()) return report(r.error());
                            if (ctx.json) {
                                print_json({{"lease_until", r->lease_until}});
                            } else {
                                std::cout << "lease " << a->lease << " on " << a->queue << "/"
                                          << a->key << " runs until "
                                          << when(r->lease_until, client::wall_clock_ms()) << '\n';
                            }
                            return 0;
                        });
    add_queue_key(cmd, *a);
    add_lease(cmd, *a);
    cmd->add_option("--ttr", a->ttr, "New lease length (default: the queue's ttr)")
        ->type_name("DURATION");
}

void add_ack(CLI::App& app, Context& ctx) {
    auto a = std::make_shared<TaskArgs>();
    auto* cmd = command(
        app, ctx, "ack",
        "Finish a taken task. With --time it comes due again then (the recurring case), "
        "optionally with a new --payload; without --time it is done.",
        "  dueqctl ack tokens k1 --lease 7 --time +1h --payload '{\"t\":\"new\"}'\n"
        "  dueqctl ack jobs j7 --lease 12\n",
        [&ctx, a]() -> int {
            client::AckRequest req{.queue = a->queue, .key = a->key, .lease = a->lease};
            if (!a->payload.empty()) {
                std::string p;
                if (!parse_payload_arg(a->payload, &p)) return kExitUsage;
                req.payload = std::move(p);
            }
            if (!opt_time("--time", a->time, &req.time)) return kExitUsage;
            auto r = ctx.client().ack(req, ctx.call_options());
            if (!r.ok()) return report(r.error());
            if (ctx.json) {
                print_json({{"version", r->version}});
            } else {
                std::cout << "acked " << a->queue << "/" << a->key << " version " << r->version
                          << (req.time ? ", due again " + when(*req.time, client::wall_clock_ms())
                                       : ", done")
                          << '\n';
            }
            return 0;
        });
    add_queue_key(cmd, *a);
    add_lease(cmd, *a);
    cmd->add_option("--payload,-p", a->payload, "New payload as JSON (default: keep the old one)");
    cmd->add_option("--time", a->time, "Come due again at this time (default: done)")
        ->type_name("TIME");
}

void add_release_bury(CLI::App& app, Context& ctx) {
    auto a = std::make_shared<TaskArgs>();
    auto* rel = command(app, ctx, "release",
                        "Give a taken task back: ready again now, or after --delay.",
                        "  dueqctl release tokens k1 --lease 7\n"
                        "  dueqctl release tokens k1 --lease 7 --delay 30s\n",
                        [&ctx, a]() -> int {
                            client::ReleaseRequest req{.queue = a->queue, .key = a->key,
                                                       .lease = a->lease};
                            if (!opt_duration("--delay", a->delay, &req.delay_ms)) return kExitUsage;
                            auto r = ctx.client().release(req, ctx.call_options());
                            if (!r.ok()) return report(r.error());
                            if (ctx.json) print_json(Json::object());
                            else std::cout << "released " << a->queue << "/" << a->key << '\n';
                            return 0;
                        });
    add_queue_key(rel, *a);
    add_lease(rel, *a);
    rel->add_option("--delay,-d", a->delay, "Ready again only after this long")
        ->type_name("DURATION");

    auto b = std::make_shared<TaskArgs>();
    auto* bury = command(app, ctx, "bury",
                         "Set a taken task aside (status buried) until a kick brings it back.",
                         "  dueqctl bury tokens k1 --lease 7\n", [&ctx, b]() -> int {
                             auto r = ctx.client().bury(
                                 {.queue = b->queue, .key = b->key, .lease = b->lease},
                                 ctx.call_options());
                             if (!r.ok()) return report(r.error());
                             if (ctx.json) print_json(Json::object());
                             else std::cout << "buried " << b->queue << "/" << b->key << '\n';
                             return 0;
                         });
    add_queue_key(bury, *b);
    add_lease(bury, *b);
}

void add_kick(CLI::App& app, Context& ctx) {
    auto queue = std::make_shared<std::string>();
    auto count = std::make_shared<uint64_t>(1);
    auto key = std::make_shared<std::string>();
    auto* cmd = command(
        app, ctx, "kick",
        "Make up to --count buried tasks ready again (the earliest first), or the one --key "
        "names.",
        "  dueqctl kick tokens --count 100\n  dueqctl kick tokens --key k0042\n",
        [&ctx, queue, count, key]() -> int {
            client::KickRequest req{.queue = *queue, .count = *count};
            if (!key->empty()) req.key = *key;
            auto r = ctx.client().kick(req, ctx.call_options());
            if (!r.ok()) return report(r.error());
            if (ctx.json)
                print_json({{"kicked", r->kicked}});
            else
                std::cout << "kicked " << r->kicked << " in " << *queue << '\n';
            return 0;
        });
    add_queue(cmd, *queue);
    auto* n = cmd->add_option("--count,-n", *count, "At most this many (default 1)")
                  ->check(CLI::PositiveNumber);
    cmd->add_option("--key,-k", *key,
                    "Only this task, if it is buried (dueqctl list QUEUE --status buried)")
        ->excludes(n);
}

}  // namespace

void add_take_command(CLI::App& app, Context& ctx) { add_take(app, ctx); }

void add_lease_commands(CLI::App& app, Context& ctx) {
    add_touch(app, ctx);
    add_ack(app, ctx);
    add_release_bury(app, ctx);
    add_kick(app, ctx);
}

}  // namespace dueq::dueqctl
