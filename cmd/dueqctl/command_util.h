// Small helpers shared by the subcommand files.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "context.h"

namespace dueq::dueqctl {

// Fields shared by the ops that address one task under a lease.
struct TaskArgs {
    std::string queue;
    std::string key;
    uint64_t lease = 0;
    std::string payload;
    std::string time;
    std::string mode;
    std::string ttr;
    std::string delay;
    std::string consistency;
};

inline CLI::App* command(CLI::App& app, Context& ctx, const std::string& name, const std::string& help,
                  const std::string& examples, std::function<int()> run) {
    // The first paragraph lists the command in `dueqctl --help`; the rest shows in its own.
    const auto split = help.find("\n\n");
    CLI::App* cmd = app.add_subcommand(name, help.substr(0, split));
    std::string footer;
    if (split != std::string::npos) footer = help.substr(split + 2) + "\n\n";
    cmd->footer(footer + "Examples:\n" + examples);
    cmd->callback([&ctx, run = std::move(run)] { ctx.action = run; });
    return cmd;
}

inline void add_queue(CLI::App* cmd, std::string& queue) {
    cmd->add_option("queue", queue, "Queue name")->required();
}
inline void add_queue_key(CLI::App* cmd, TaskArgs& a) {
    add_queue(cmd, a.queue);
    cmd->add_option("key", a.key, "Task key")->required();
}
inline void add_lease(CLI::App* cmd, TaskArgs& a) {
    cmd->add_option("--lease,-l", a.lease, "The lease id that take returned (fencing token)")
        ->required();
}

inline bool opt_duration(const std::string& name, const std::string& text, std::optional<int64_t>* out) {
    if (text.empty()) return true;
    int64_t v = 0;
    if (!parse_duration_arg(name, text, &v)) return false;
    *out = v;
    return true;
}

inline bool opt_time(const std::string& name, const std::string& text, std::optional<int64_t>* out) {
    if (text.empty()) return true;
    int64_t v = 0;
    if (!parse_time_arg(name, text, &v)) return false;
    *out = v;
    return true;
}

}  // namespace dueq::dueqctl
