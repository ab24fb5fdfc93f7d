// What every dueqctl subcommand shares: the global options and the one Client.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/client.h"
#include "client/credentials.h"

namespace dueq::dueqctl {

struct Context {
    std::vector<std::string> addrs;
    client::Credentials credentials;  // --token, --cacert, ... (checked before the action)
    std::string timeout = "5s";
    bool json = false;
    int64_t timeout_ms = 5000;  // parsed from `timeout` before the action runs

    // Set by the chosen subcommand's parse callback; main runs it once parsing is done.
    std::function<int()> action;

    client::Client& client();  // created on first use from addrs/timeout
    // Options for a client of `seeds` with the timeout and credentials given.
    client::ClientOptions client_options(std::vector<std::string> seeds) const;
    client::CallOptions call_options() const;

private:
    std::once_flag client_once_;  // worker threads ask for the client at the same time
    std::unique_ptr<client::Client> client_;
};

// Parses a time/duration option value; on error prints it and returns false.
bool parse_time_arg(const std::string& what, const std::string& text, int64_t* out);
bool parse_duration_arg(const std::string& what, const std::string& text, int64_t* out);
// JSON text -> msgpack payload; on error prints it and returns false.
bool parse_payload_arg(const std::string& text, std::string* out);

// Exit statuses, for scripts (dueqctl --help, docs/operations.md).
inline constexpr int kExitRefused = 1;        // the node said no (bad request, lease, ...)
inline constexpr int kExitUsage = 2;          // bad flags or arguments; nothing was sent
inline constexpr int kExitNotFound = 3;       // no such task, queue or member
inline constexpr int kExitNotApplied = 4;     // not applied now (no leader, no quorum): retry
inline constexpr int kExitUnknown = 5;        // no answer in time: it may have been applied
inline constexpr int kExitCannotConnect = 6;  // no node reachable: nothing was sent

void add_op_commands(CLI::App& app, Context& ctx);
void add_worker_command(CLI::App& app, Context& ctx);
void add_member_command(CLI::App& app, Context& ctx);

}  // namespace dueq::dueqctl
