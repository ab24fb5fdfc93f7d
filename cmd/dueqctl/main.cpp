// dueqctl: every protocol op from the shell, plus the reference worker.
#include <cstdlib>
#include <iostream>

#include "../common/credential_flags.h"
#include "client/payload.h"
#include "common/version.h"
#include "client/time_spec.h"
#include "context.h"
#include "output.h"

namespace dueq::dueqctl {

client::Client& Context::client() {
    std::call_once(client_once_,
                   [this] { client_ = std::make_unique<client::Client>(client_options(addrs)); });
    return *client_;
}

client::ClientOptions Context::client_options(std::vector<std::string> seeds) const {
    client::ClientOptions opts;
    opts.seeds = std::move(seeds);
    opts.call_timeout = std::chrono::milliseconds(timeout_ms);
    opts.connect_timeout = std::chrono::milliseconds(std::min<int64_t>(timeout_ms, 2000));
    credentials.apply(opts);  // checked in main: cannot fail here
    return opts;
}

client::CallOptions Context::call_options() const {
    client::CallOptions o;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    return o;
}

bool parse_time_arg(const std::string& what, const std::string& text, int64_t* out) {
    auto t = client::parse_time_ms(text, client::wall_clock_ms());
    if (!t.ok()) {
        std::cerr << "dueqctl: " << what << ": " << t.error().message << '\n';
        return false;
    }
    *out = *t;
    return true;
}

bool parse_duration_arg(const std::string& what, const std::string& text, int64_t* out) {
    auto d = client::parse_duration_ms(text);
    if (!d.ok()) {
        std::cerr << "dueqctl: " << what << ": " << d.error().message << '\n';
        return false;
    }
    *out = *d;
    return true;
}

bool parse_payload_arg(const std::string& text, std::string* out) {
    auto p = client::payload_from_json(text);
    if (!p.ok()) {
        std::cerr << "dueqctl: --payload: " << p.error().message << '\n';
        return false;
    }
    *out = std::move(p).value();
    return true;
}

}  // namespace dueq::dueqctl

int main(int argc, char** argv) {
    using namespace dueq::dueqctl;
    Context ctx;
    CLI::App app{"dueqctl: talk to a dueq cluster (a replicated store of tasks that come due)."};
    app.footer(
        "Times: absolute ms since the epoch (1767225600000), ISO-8601 UTC\n"
        "(2026-01-01T00:00:00Z), 'now', or relative to this machine's clock: +90s, +5m, +1h,\n"
        "+250ms, -10m. Durations: 250ms, 5s, 2m, 1h, 1d, 1h30m, or bare ms.\n"
        "Payloads are JSON text; they are stored as msgpack.\n"
        "Exit codes (the code and message go to stderr): 0 ok; 1 refused by the node (bad\n"
        "request, lease mismatch, ...); 2 bad usage; 3 not found; 4 not applied, retry (no\n"
        "leader, no quorum, store full); 5 outcome unknown (no answer in time: it may have\n"
        "been applied); 6 no node reachable (nothing was sent).\n\n"
        "Examples:\n"
        "  dueqctl put tokens k1 --payload '{\"a\":1}' --time +3600s\n"
        "  dueqctl take tokens --count 2 --timeout 5s --ttr 30s\n"
        "  dueqctl ack tokens k1 --lease 7 --time +1h --payload '{\"t\":\"new\"}'\n"
        "  dueqctl --addr 10.0.0.1:7700 --addr 10.0.0.2:7700 status\n"
        "  dueqctl worker tokens --builtin-refresh --next-in 1h --concurrency 8\n\n"
        "Run 'dueqctl <command> --help' for the options of each command.");
    app.set_version_flag("--version", dueq::version_line("dueqctl"), "Print the version and exit.");
    app.require_subcommand(1);
    app.fallthrough();
    app.add_option("--addr,-a", ctx.addrs,
                   "A node's client address host:port; repeat (or comma-separate in DUEQ_ADDR) "
                   "to give several seeds. Writes are redirected to the leader automatically.")
        ->envname("DUEQ_ADDR")
        ->delimiter(',')
        ->type_name("HOST:PORT");
    app.add_option("--timeout,-t", ctx.timeout,
                   "How long each call may take before it fails with 'timeout' (a blocking "
                   "take waits this much longer than its own --timeout).")
        ->capture_default_str()
        ->type_name("DURATION");
    std::string output = "table";
    app.add_option("--output,-o", output,
                   "table: text for people (default); json: one JSON document per command; "
                   "jsonl: one JSON object per line, an item of a list per line")
        ->check(CLI::IsMember({"table", "json", "jsonl"}));
    app.add_flag("--json,-j", ctx.json, "The same as --output json.");
    dueq::cmd::add_credential_flags(app, ctx.credentials);

    add_op_commands(app, ctx);
    add_worker_command(app, ctx);
    add_member_command(app, ctx);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? 0 : kExitUsage;
    }
    if (output != "table") ctx.json = true;
    set_json_lines(output == "jsonl");
    if (ctx.addrs.empty()) ctx.addrs.push_back("127.0.0.1:7700");
    if (!parse_duration_arg("--timeout", ctx.timeout, &ctx.timeout_ms)) return kExitUsage;
    if (dueq::client::ClientOptions probe; !ctx.credentials.apply(probe).empty()) {
        std::cerr << "dueqctl: " << ctx.credentials.apply(probe) << '\n';
        return kExitUsage;
    }
    if (!ctx.action) return kExitUsage;
    return ctx.action();
}
