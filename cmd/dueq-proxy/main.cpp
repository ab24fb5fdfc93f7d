// dueq-proxy: routes clients to the shards of a sharded dueq (docs/sharding.md).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>

#include "../common/credential_flags.h"
#include "common/version.h"
#include "shard/proxy.h"

namespace {

struct Flags {
    dueq::shard::ProxyOptions proxy;
    dueq::client::Credentials upstream;  // --cacert, --cert, --key: TLS to the shards
    std::string token_file, log_level = "info";
    std::int64_t grace_ms = 5000, call_timeout_ms = 4000, sweep_timeout_ms = 1000;
};

void add_options(CLI::App& app, Flags& f) {
    app.add_option("--map", f.proxy.map_file, "the shard map file (TOML; docs/sharding.md)")
        ->required()
        ->check(CLI::ExistingFile);
    app.add_option("--listen", f.proxy.listen, "host:port for clients (port 0: any)")
        ->capture_default_str();
    app.add_option("--name", f.proxy.name, "what hello and status call this proxy")
        ->capture_default_str();
    app.add_option("--token-file", f.token_file,
                   "a file holding the clients' auth token: clients must say hello with it, and "
                   "the proxy says it to the shards");
    app.add_option("--session-grace-ms", f.grace_ms,
                   "how long a closed client session's leases stay taken, waiting for a resume")
        ->capture_default_str()
        ->check(CLI::Range(0, 86'400'000));
    app.add_option("--call-timeout-ms", f.call_timeout_ms,
                   "how long the proxy waits for a shard's answer (a blocking take adds its own "
                   "timeout_ms)")
        ->capture_default_str()
        ->check(CLI::Range(100, 3'600'000));
    app.add_option("--sweep-timeout-ms", f.sweep_timeout_ms,
                   "a take asks the shards in turn for due tasks; a shard that does not answer "
                   "in this long is passed over (its tasks wait; the others' do not)")
        ->capture_default_str()
        ->check(CLI::Range(10, 3'600'000));
    app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error")
        ->capture_default_str();
    dueq::cmd::add_tls_flags(app, f.upstream);
    app.add_option("--tls-cert", f.proxy.listen_tls.cert_file,
                   "serve clients over TLS with this certificate (PEM); reread on SIGHUP")
        ->check(CLI::ExistingFile);
    app.add_option("--tls-key", f.proxy.listen_tls.key_file, "the private key of --tls-cert")
        ->check(CLI::ExistingFile);
    app.add_option("--tls-client-ca", f.proxy.listen_tls.ca_file,
                   "require clients to present a certificate of this CA (mutual TLS)")
        ->check(CLI::ExistingFile);
}

// The token file (without trailing white space) and the log level; false after saying
// why on stderr.
bool finish_options(Flags& f) {
    if (!f.token_file.empty()) {
        std::ifstream in(f.token_file);
        if (!in) {
            std::cerr << "dueq-proxy: cannot read --token-file " << f.token_file << "\n";
            return false;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        std::string token = ss.str();
        while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
            token.pop_back();
        f.proxy.token = token;
    }
    if (f.proxy.listen_tls.cert_file.empty() != f.proxy.listen_tls.key_file.empty()) {
        std::cerr << "dueq-proxy: --tls-cert and --tls-key go together\n";
        return false;
    }
    dueq::client::ClientOptions upstream;
    if (auto err = f.upstream.apply(upstream); !err.empty()) {
        std::cerr << "dueq-proxy: " << err << "\n";
        return false;
    }
    f.proxy.upstream_tls = upstream.tls;
    const auto level = spdlog::level::from_str(f.log_level);
    if (level == spdlog::level::off && f.log_level != "off") {
        std::cerr << "dueq-proxy: unknown log level '" << f.log_level << "'\n";
        return false;
    }
    // Logs go to stderr; stdout carries only the "listening on port" line for scripts.
    spdlog::set_default_logger(spdlog::stderr_color_mt("dueq-proxy"));
    spdlog::set_level(level);
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + f.proxy.name + "] %v");
    f.proxy.session_grace = std::chrono::milliseconds(f.grace_ms);
    f.proxy.call_timeout = std::chrono::milliseconds(f.call_timeout_ms);
    f.proxy.sweep_step_timeout = std::chrono::milliseconds(f.sweep_timeout_ms);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "dueq-proxy: one address in front of every shard of a sharded dueq.\n"
        "It speaks the client protocol (docs/protocol.md), sends each request to the leader\n"
        "of the shard its key belongs to, serves takes from every shard, and keeps no state\n"
        "on disk: run as many as you like. SIGHUP rereads the shard map; SIGTERM stops it.\n"
        "Example: dueq-proxy --map config/two-shards/shards.toml --listen 127.0.0.1:7600",
        "dueq-proxy"};
    Flags flags;
    add_options(app, flags);
    app.set_version_flag("--version", dueq::version_line("dueq-proxy"), "print the version and exit");
    CLI11_PARSE(app, argc, argv);
    if (!finish_options(flags)) return 2;
    std::signal(SIGPIPE, SIG_IGN);

    boost::asio::io_context io(1);
    dueq::shard::Proxy proxy(io, flags.proxy);
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
            spdlog::info("SIGHUP: rereading the shard map and the TLS files");
            proxy.reload_map();
            proxy.reload_tls();
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
