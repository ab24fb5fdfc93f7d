// faultproxy: the fault-injecting TCP proxy that chaos tests put on every peer link.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <random>

#include "faultproxy/fault_proxy.h"

namespace {

constexpr const char* kGrammar = R"(
Directions: 'up' = bytes from the dialer (the side that connects to the link's port) to
the target; 'down' = bytes from the target back to the dialer.

Control protocol: one command per line on the control port, one reply line each,
'ok ...' or 'error REASON' (an error changes nothing). LINK is a link name or '*'.
  set LINK up|down|both pass           forward as fast as possible
  set LINK up|down|both blackhole      forward nothing; connections stay open and the
                                       bytes wait unread until the direction passes again
  set LINK DIR delay MIN_MS MAX_MS [rate BYTES_PER_SEC]
                                       each chunk waits a uniform random delay, in order
  set LINK DIR rate BYTES_PER_SEC [delay MIN_MS MAX_MS]   bandwidth cap
  reject LINK                          close the link's connections, and new ones at once
  accept LINK                          undo reject
  drop LINK                            close the link's current connections -> ok dropped N
  heal                                 every link: pass both ways, accept
  status                               ok {"links":{NAME:{"up","down","accept",
                                       "connections","bytes_up","bytes_down",...}}}
  ping                                 ok pong
Lines over 4096 bytes close the control connection. Modes apply to current and future
connections. On start, stdout gets 'control listening on port N', 'link NAME listening on
port N' per link, then 'faultproxy ready'. SIGTERM or SIGINT stops the proxy.
)";

}  // namespace

int main(int argc, char** argv) {
    std::string control = "127.0.0.1:0";
    std::vector<std::string> link_args;
    std::uint64_t seed = std::random_device{}();
    std::string log_level = "info";

    CLI::App app{
        "faultproxy: a TCP proxy that injects faults into the peer links of a test "
        "cluster, steered at run time over a control port"};
    app.add_option("--control", control, "HOST:PORT of the control port (port 0: any free)")
        ->capture_default_str();
    app.add_option("--link", link_args,
                   "NAME=LISTEN@TARGET, repeatable: listen on LISTEN (port 0: any free) and "
                   "forward each connection to TARGET, e.g. n1-n2=127.0.0.1:0@127.0.0.1:7802")
        ->required();
    app.add_option("--seed", seed, "seed of the delay jitter (default: random)");
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
        ->capture_default_str();
    app.footer(kGrammar);
    CLI11_PARSE(app, argc, argv);

    // Logs go to stderr; stdout carries only the port lines that scripts read.
    spdlog::set_default_logger(spdlog::stderr_color_mt("faultproxy"));
    const auto level = spdlog::level::from_str(log_level);
    if (level == spdlog::level::off && log_level != "off") {
        std::cerr << "faultproxy: unknown log level '" << log_level << "'\n";
        return 2;
    }
    spdlog::set_level(level);
    std::signal(SIGPIPE, SIG_IGN);

    std::vector<dueq::faultproxy::LinkSpec> links;
    boost::asio::ip::tcp::endpoint control_ep;
    try {
        control_ep = dueq::faultproxy::parse_endpoint(control);
        for (const auto& a : link_args)
            links.push_back(dueq::faultproxy::parse_link_spec(a));
    } catch (const std::exception& e) {
        std::cerr << "faultproxy: " << e.what() << "\n";
        return 2;
    }

    boost::asio::io_context io(1);
    std::unique_ptr<dueq::faultproxy::FaultProxy> proxy;
    try {
        proxy = std::make_unique<dueq::faultproxy::FaultProxy>(io, control_ep, links, seed);
    } catch (const std::exception& e) {
        std::cerr << "faultproxy: cannot listen: " << e.what() << "\n";
        return 1;
    }
    proxy->start();
    std::printf("control listening on port %u\n", unsigned(proxy->control_port()));
    for (const auto& name : proxy->link_names())
        std::printf("link %s listening on port %u\n", name.c_str(),
                    unsigned(proxy->link_port(name)));
    std::printf("faultproxy ready\n");
    std::fflush(stdout);
    spdlog::info("ready: {} links, seed {}", links.size(), seed);

    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code ec, int sig) {
        if (ec) return;
        spdlog::info("signal {}: stopping", sig);
        proxy->stop();
    });
    // stop() closes everything, so run() returns once the aborted operations are done.
    io.run();
    return 0;
}
