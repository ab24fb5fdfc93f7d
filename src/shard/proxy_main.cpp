// dueq-proxy: routes clients to the shards of a sharded dueq (docs/sharding.md).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include "shard/proxy.h"

int main(int argc, char** argv) {
    CLI::App app{
        "dueq-proxy: one address in front of every shard of a sharded dueq.\n"
        "It speaks the client protocol (docs/protocol.md), sends each request to the leader\n"
        "of the shard its key belongs to, serves takes from every shard, and keeps no state\n"
        "on disk: run as many as you like. SIGHUP rereads the shard map; SIGTERM stops it.\n"
        "Example: dueq-proxy --map config/two-shards/shards.toml --listen 127.0.0.1:7600",
        "dueq-proxy"};
    dueq::shard::ProxyOptions o;
    std::string token_file, log_level = "info";
    std::int64_t grace_ms = 5000, call_timeout_ms = 4000, sweep_timeout_ms = 1000;
    app.add_option("--map", o.map_file, "the shard map file (TOML; docs/sharding.md)")
        ->required()
        ->check(CLI::ExistingFile);
    app.add_option("--listen", o.listen, "host:port for clients (port 0: any)")
        ->capture_default_str();
    app.add_option("--name", o.name, "what hello and status call this proxy")
        ->capture_default_str();
    app.add_option("--token-file", token_file,
                   "a file holding the clients' auth token: clients must say hello with it, and "
                   "the proxy says it to the shards");
    app.add_option("--session-grace-ms", grace_ms,
                   "how long a closed client session's leases stay taken, waiting for a resume")
        ->capture_default_str()
        ->check(CLI::Range(0, 86'400'000));
    app.add_option("--call-timeout-ms", call_timeout_ms,
                   "how long the proxy waits for a shard's answer (a blocking take adds its own "
                   "timeout_ms)")
        ->capture_default_str()
        ->check(CLI::Range(100, 3'600'000));
    app.add_option("--sweep-timeout-ms", sweep_timeout_ms,
                   "a take asks the shards in turn for due tasks; a shard that does not answer "
                   "in this long is passed over (its tasks wait; the others' do not)")
        ->capture_default_str()
        ->check(CLI::Range(10, 3'600'000));
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    if (!token_file.empty()) {
        std::ifstream in(token_file);
        if (!in) {
            std::cerr << "dueq-proxy: cannot read --token-file " << token_file << "\n";
            return 2;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        std::string token = ss.str();
        while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
            token.pop_back();
        o.token = token;
    }
    const auto level = spdlog::level::from_str(log_level);
    if (level == spdlog::level::off && log_level != "off") {
        std::cerr << "dueq-proxy: unknown log level '" << log_level << "'\n";
        return 2;
    }
    // Logs go to stderr; stdout carries only the "listening on port" line for scripts.
    spdlog::set_default_logger(spdlog::stderr_color_mt("dueq-proxy"));
    spdlog::set_level(level);
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + o.name + "] %v");
    o.session_grace = std::chrono::milliseconds(grace_ms);
    o.call_timeout = std::chrono::milliseconds(call_timeout_ms);
    o.sweep_step_timeout = std::chrono::milliseconds(sweep_timeout_ms);
    std::signal(SIGPIPE, SIG_IGN);

    boost::asio::io_context io(1);
    dueq::shard::Proxy proxy(io, o);
    // The handlers are in place before the port line: a script may signal at once after it.
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code, int sig) {
        spdlog::info("signal {}: stopping", sig);
        proxy.stop();
        io.stop();
    });
    boost::asio::signal_set reload(io, SIGHUP);
    std::function<void()> wait_for_hup = [&] {
        reload.async_wait([&](boost::system::error_code ec, int) {
            if (ec) return;
            spdlog::info("SIGHUP: rereading the shard map");
            proxy.reload_map();
            wait_for_hup();
        });
    };
    wait_for_hup();
    if (auto err = proxy.start()) {
        spdlog::critical("{}", *err);
        return 1;
    }
    // Scripts read this line to learn the port (useful with --listen 127.0.0.1:0).
    std::cout << "dueq-proxy listening on port " << proxy.port() << std::endl;
    io.run();
    return 0;
}
