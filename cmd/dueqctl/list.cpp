// dueqctl list: which tasks of a queue are in one status, a page at a time (the `list`
// op, docs/protocol.md). Each page costs the node O(log n + limit) whatever the queue
// holds, so listing a queue of ten million tasks never stalls it.
#include <iostream>

#include "client/time_spec.h"
#include "command_util.h"
#include "context.h"
#include "output.h"

namespace dueq::dueqctl {

namespace {

struct ListArgs {
    std::string queue, status, after, consistency;
    std::optional<int64_t> after_time;
    uint64_t limit = 100;
    bool all = false;
};

Json listed_json(const client::ListedTask& t) {
    Json j{{"key", t.key}, {"status", t.status}, {"time", t.time}, {"attempts", t.attempts}};
    if (t.status == wire::word::taken) j["lease_until"] = t.lease_until;
    return j;
}

int run_list(Context& ctx, const ListArgs& a) {
    client::ListRequest req;
    req.queue = a.queue;
    req.status = a.status;
    req.count = a.limit;
    if (!a.consistency.empty()) req.consistency = a.consistency;
    if (!a.after.empty()) req.after = a.after;
    if (a.after_time && a.after.empty()) {
        std::cerr << "dueqctl: --after-time needs --after\n";
        return kExitUsage;
    }
    req.after_time = a.after_time;
    std::vector<client::ListedTask> tasks;
    std::optional<std::string> next;
    int64_t next_time = 0;
    // --all: every page, each its own request; a page is at most `limit` tasks.
    for (;;) {
        auto r = ctx.client().list(req, ctx.call_options());
        if (!r.ok()) return report(r.error());
        for (auto& t : r->tasks)
            tasks.push_back(std::move(t));
        next = r->after;
        next_time = r->after_time;
        if (!a.all || !next) break;
        req.after = next;
        req.after_time = next_time;
    }
    if (ctx.json) {
        Json j{{"tasks", Json::array()}};
        for (const auto& t : tasks)
            j["tasks"].push_back(listed_json(t));
        if (next) {
            j["after"] = *next;
            j["after_time"] = next_time;
        }
        print_json(j);
        return 0;
    }
    const int64_t now = client::wall_clock_ms();
    const bool taken = a.status == wire::word::taken;
    Table t(taken ? std::vector<std::string>{"KEY", "TIME", "ATTEMPTS", "LEASE_UNTIL"}
                  : std::vector<std::string>{"KEY", "TIME", "ATTEMPTS"});
    for (const auto& x : tasks) {
        std::vector<std::string> row{x.key, when(x.time, now), std::to_string(x.attempts)};
        if (taken) row.push_back(when(x.lease_until, now));
        t.add(std::move(row));
    }
    t.print();
    if (next)
        std::cout << "more: dueqctl list " << a.queue << " --status " << a.status << " --after '"
                  << *next << "' --after-time " << next_time << "\n";
    return 0;
}

}  // namespace

void add_list_command(CLI::App& app, Context& ctx) {
    auto a = std::make_shared<ListArgs>();
    auto* cmd = command(
        app, ctx, "list",
        "List the keys of a queue's tasks in one status, a page at a time.\n\n"
        "ready and late (ready, time passed) come in due order, buried by time, taken by "
        "lease_until, done by when they are removed. Past the last task listed, the output "
        "says how to ask for the next page (--after and --after-time); --all asks for every "
        "page. Payloads are not listed: dueqctl get shows one.",
        "  dueqctl list tokens --status late --limit 100\n"
        "  dueqctl list tokens --status buried --all --json\n"
        "  dueqctl list tokens --status late --after k0042 --after-time 1795931607967\n",
        [&ctx, a] { return run_list(ctx, *a); });
    add_queue(cmd, a->queue);
    cmd->add_option("--status,-s", a->status, "ready | late | taken | buried | done")
        ->required()
        ->check(CLI::IsMember(
            std::vector<std::string>(wire::kListStatuses.begin(), wire::kListStatuses.end())));
    cmd->add_option("--limit,-n", a->limit, "Tasks per page (1..1000, default 100)")
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--after", a->after,
                    "Start after this key (a previous page's last; with --after-time, or the "
                    "task must still be in that status)");
    cmd->add_option("--after-time", a->after_time,
                    "The order time of --after, as the previous page printed it (ms)");
    cmd->add_flag("--all", a->all, "Every page, from the first (or from --after) to the end");
    cmd->add_option("--consistency", a->consistency, "local (default) | leader")
        ->check(CLI::IsMember({"local", "leader"}));
}

}  // namespace dueq::dueqctl
