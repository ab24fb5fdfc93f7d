// One subcommand per protocol op. Each parses its arguments, makes one call, and prints
// the result as text or (--json) as the response's fields.
#include <iostream>

#include "client/payload.h"
#include "client/time_spec.h"
#include "context.h"
#include "command_util.h"
#include "output.h"

namespace dueq::dueqctl {

void add_status_command(CLI::App& app, Context& ctx);
void add_shards_command(CLI::App& app, Context& ctx);
void add_shard_command(CLI::App& app, Context& ctx);
void add_list_command(CLI::App& app, Context& ctx);
void add_backup_command(CLI::App& app, Context& ctx);

namespace {

using client::Code;

int run_ping(Context& ctx) {
    const auto start = std::chrono::steady_clock::now();
    auto r = ctx.client().ping(ctx.call_options());
    if (!r.ok()) return report(r.error());
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - start).count();
    if (ctx.json) {
        print_json({{"address", ctx.client().current_address()}, {"rtt_us", us}});
    } else {
        std::cout << "pong from " << ctx.client().current_address() << " in " << us / 1000.0
                  << " ms\n";
    }
    return 0;
}

int run_stats(Context& ctx, const std::string& queue, const std::string& consistency) {
    client::StatsRequest req;
    if (!queue.empty()) req.queue = queue;
    if (!consistency.empty()) req.consistency = consistency;
    auto r = ctx.client().stats(req, ctx.call_options());
    if (!r.ok()) return report(r.error());
    if (ctx.json) {
        print_json(payload_json(r->raw));
        return 0;
    }
    const int64_t now = client::wall_clock_ms();
    Table t({"QUEUE", "READY", "TAKEN", "BURIED", "DONE", "DUE_NOW", "NEXT_DUE", "OLDEST_LATE"});
    for (const auto& q : r->queues) {
        t.add({q.queue, std::to_string(q.ready), std::to_string(q.taken), std::to_string(q.buried),
               std::to_string(q.done), std::to_string(q.due_now),
               q.next_due ? when(*q.next_due, now) : "-",
               q.oldest_late ? when(*q.oldest_late, now) : "-"});
    }
    t.print();
    return 0;
}

void add_simple_commands(CLI::App& app, Context& ctx) {
    command(app, ctx, "ping", "Check that a node answers (round trip time).",
            "  dueqctl ping\n  dueqctl --addr 10.0.0.2:7700 ping --json\n",
            [&ctx] { return run_ping(ctx); });
    add_status_command(app, ctx);
    add_shards_command(app, ctx);
    add_shard_command(app, ctx);
    add_list_command(app, ctx);
    add_backup_command(app, ctx);
    auto queue = std::make_shared<std::string>();
    auto consistency = std::make_shared<std::string>();
    auto* stats = command(app, ctx, "stats",
                          "Count tasks by status, with the next due and the oldest late task, "
                          "for one queue or for all.",
                          "  dueqctl stats\n  dueqctl stats tokens --json\n"
                          "  dueqctl stats tokens --consistency leader\n",
                          [&ctx, queue, consistency] {
                              return run_stats(ctx, *queue, *consistency);
                          });
    stats->add_option("queue", *queue, "Queue name (default: every known queue)");
    stats->add_option("--consistency", *consistency,
                      "local (default: this node's copy) | leader (the leader's, once it has "
                      "confirmed it still leads)")
        ->check(CLI::IsMember({"local", "leader"}));
}

void add_declare(CLI::App& app, Context& ctx) {
    struct Args {
        std::string queue, lead, ttr, retention;
        std::optional<int64_t> max_attempts;
        std::optional<double> late_share;
        std::optional<bool> autonomous;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = command(
        app, ctx, "declare",
        "Create a queue or change its settings (replicated). Prints the resulting settings.",
        "  dueqctl declare tokens --lead 5m --ttr 30s --max-attempts 10\n"
        "  dueqctl declare jobs --lead 0 --late-share 0.2 --retention 1h\n"
        "  dueqctl declare tokens --autonomous true\n",
        [&ctx, a]() -> int {
            client::DeclareRequest req;
            req.queue = a->queue;
            req.max_attempts = a->max_attempts;
            req.late_share = a->late_share;
            req.autonomous = a->autonomous;
            if (!opt_duration("--lead", a->lead, &req.lead_ms) ||
                !opt_duration("--ttr", a->ttr, &req.ttr_ms) ||
                !opt_duration("--retention", a->retention, &req.retention_ms)) {
                return kExitUsage;
            }
            auto r = ctx.client().declare(req, ctx.call_options());
            if (!r.ok()) return report(r.error());
            const auto& s = r->settings;
            if (ctx.json) {
                print_json({{"settings", {{"lead_ms", s.lead_ms}, {"ttr_ms", s.ttr_ms},
                                          {"max_attempts", s.max_attempts},
                                          {"retention_ms", s.retention_ms},
                                          {"late_share", s.late_share},
                                          {"autonomous", s.autonomous}}}});
            } else {
                print_fields({{"queue", a->queue},
                              {"lead", client::format_duration_ms(s.lead_ms)},
                              {"ttr", client::format_duration_ms(s.ttr_ms)},
                              {"max_attempts", std::to_string(s.max_attempts)},
                              {"retention", client::format_duration_ms(s.retention_ms)},
                              {"late_share", std::to_string(s.late_share)},
                              {"autonomous", s.autonomous ? "true" : "false"}});
            }
            return 0;
        });
    add_queue(cmd, a->queue);
    cmd->add_option("--lead", a->lead, "Hand tasks out this long before their time")
        ->type_name("DURATION");
    cmd->add_option("--ttr", a->ttr, "Default lease length of a take")->type_name("DURATION");
    cmd->add_option("--max-attempts", a->max_attempts, "Bury a task after this many takes");
    cmd->add_option("--retention", a->retention, "Keep done tasks this long (refuses re-inserts)")
        ->type_name("DURATION");
    cmd->add_option("--late-share", a->late_share, "Share of takes reserved for late tasks")
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--autonomous", a->autonomous,
                    "true: a node cut off from the majority keeps serving this queue on its "
                    "own, and merges when the partition heals (tasks may run once per side)");
}

void add_put(CLI::App& app, Context& ctx) {
    auto a = std::make_shared<TaskArgs>();
    auto* cmd = command(
        app, ctx, "put", "Store a task: it comes due at --time (default: now).",
        "  dueqctl put tokens k1 --payload '{\"a\":1}' --time +3600s\n"
        "  dueqctl put jobs j7 --payload '\"hello\"' --time 2026-01-01T09:00:00Z --mode insert\n",
        [&ctx, a]() -> int {
            client::PutRequest req;
            req.queue = a->queue;
            req.key = a->key;
            if (!parse_payload_arg(a->payload, &req.payload)) return kExitUsage;
            if (!opt_time("--time", a->time, &req.time)) return kExitUsage;
            if (a->mode == "insert") req.mode = client::PutMode::insert;
            if (a->mode == "update") req.mode = client::PutMode::update;
            if (a->mode == "upsert") req.mode = client::PutMode::upsert;
            auto r = ctx.client().put(req, ctx.call_options());
            if (!r.ok()) return report(r.error());
            if (ctx.json) {
                print_json({{"version", r->version}});
            } else {
                std::cout << "put " << a->queue << "/" << a->key << " version " << r->version
                          << '\n';
            }
            return 0;
        });
    add_queue_key(cmd, *a);
    cmd->add_option("--payload,-p", a->payload, "Payload as JSON text")->required();
    cmd->add_option("--time", a->time, "When the task comes due (default: now)")->type_name("TIME");
    cmd->add_option("--mode", a->mode,
                    "upsert (default) | insert (fails with 'exists') | update (fails with "
                    "'not_found')")
        ->check(CLI::IsMember({"upsert", "insert", "update"}));
}

void add_get(CLI::App& app, Context& ctx) {
    auto a = std::make_shared<TaskArgs>();
    auto* cmd = command(
        app, ctx, "get", "Show one task: payload, status, time, attempts, version.",
        "  dueqctl get tokens k1\n  dueqctl get tokens k1 --consistency leader --json\n",
        [&ctx, a]() -> int {
            client::GetRequest req;
            req.queue = a->queue;
            req.key = a->key;
            if (!a->consistency.empty()) req.consistency = a->consistency;
            auto r = ctx.client().get(req, ctx.call_options());
            if (!r.ok()) return report(r.error());
            const auto& t = r->task;
            if (ctx.json) {
                Json j = {{"key", t.key}, {"payload", payload_json(t.payload)},
                          {"status", t.status}, {"time", t.time}, {"attempts", t.attempts},
                          {"version", t.version}};
                if (t.lease_until) j["lease_until"] = *t.lease_until;
                print_json({{"task", j}});
                return 0;
            }
            const int64_t now = client::wall_clock_ms();
            std::vector<std::pair<std::string, std::string>> f = {
                {"key", t.key}, {"status", t.status}, {"time", when(t.time, now)},
                {"attempts", std::to_string(t.attempts)}, {"version", std::to_string(t.version)}};
            if (t.lease_until) f.emplace_back("lease_until", when(*t.lease_until, now));
            f.emplace_back("payload", payload_text(t.payload));
            print_fields(f);
            return 0;
        });
    add_queue_key(cmd, *a);
    cmd->add_option("--consistency", a->consistency,
                    "local (default: this node's copy) | leader (the leader's, once it has "
                    "confirmed it still leads)")
        ->check(CLI::IsMember({"local", "leader"}));
}

void add_delete(CLI::App& app, Context& ctx) {
    auto a = std::make_shared<TaskArgs>();
    auto* cmd = command(app, ctx, "delete", "Remove a task, whatever its status.",
                        "  dueqctl delete tokens k1\n", [&ctx, a]() -> int {
                            auto r = ctx.client().del({.queue = a->queue, .key = a->key},
                                                      ctx.call_options());
                            if (!r.ok()) return report(r.error());
                            if (ctx.json) print_json(Json::object());
                            else std::cout << "deleted " << a->queue << "/" << a->key << '\n';
                            return 0;
                        });
    add_queue_key(cmd, *a);
}

}  // namespace

void add_take_command(CLI::App& app, Context& ctx);
void add_lease_commands(CLI::App& app, Context& ctx);

void add_op_commands(CLI::App& app, Context& ctx) {
    add_simple_commands(app, ctx);
    add_declare(app, ctx);
    add_put(app, ctx);
    add_get(app, ctx);
    add_delete(app, ctx);
    add_take_command(app, ctx);
    add_lease_commands(app, ctx);
}

}  // namespace dueq::dueqctl
