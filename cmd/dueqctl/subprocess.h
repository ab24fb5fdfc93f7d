// Runs one shell command for the worker: payload in on stdin, result out on stdout.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace dueq::dueqctl {

struct CommandResult {
    bool started = false;  // false: the shell could not be spawned (see error)
    int exit_code = -1;    // -1 when killed by a signal
    std::string output;    // stdout, capped at max_output bytes
    std::string error;
};

// Runs `/bin/sh -c command` with `env` added to this process's environment, `input` on
// its stdin and its stderr shared with ours. While it runs, on_tick is called about every
// `tick` (the worker extends its lease there). Blocks until the command exits.
// Thread-safe: the pipes are close-on-exec, so concurrent runs never hold each other's ends.
CommandResult run_shell(const std::string& command,
                        const std::vector<std::pair<std::string, std::string>>& env,
                        const std::string& input, std::chrono::milliseconds tick,
                        const std::function<void()>& on_tick, std::size_t max_output = 16u << 20);

}  // namespace dueq::dueqctl
