// dueqd: one dueq node. Built a second time as dueqd-test (DUEQD_TEST_FLAGS), which also
// takes the test-only flags --plant and --power-cut that the chaos harness and the tests
// use; the dueqd a user runs has neither.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdlib>
#include <functional>

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <iostream>

#include "node/config.h"
#include "node/json_log.h"
#include "node/node.h"
#include "raft/config.h"
#ifdef DUEQD_TEST_FLAGS
#include "storage/fault_fs.h"
#endif

int main(int argc, char** argv) {
    CLI::App app{
        "dueqd: a node of dueq, the store of tasks that come due.\n"
        "Without --config it runs one node on 127.0.0.1:7700 with data in ./data/n1\n"
        "(print that config with --print-default-config). Stop it with SIGTERM or Ctrl-C.",
        "dueqd"};
    std::string config_path, data_dir, listen, log_level;
    bool print_default = false;
    app.add_option("-c,--config", config_path, "TOML config file (see docs/config.md)")
        ->check(CLI::ExistingFile);
    app.add_option("--data-dir", data_dir, "override [node] data_dir");
    app.add_option("--listen", listen,
                   "override [node] client_listen, e.g. 127.0.0.1:7701 (port 0: any)");
    app.add_option("--log-level", log_level,
                   "trace, debug, info, warn, error (overrides [log] level)");
    app.add_flag("--print-default-config", print_default, "print the built-in config and exit");
#ifdef DUEQD_TEST_FLAGS
    std::string plant;
    bool power_cut = false;
    app.add_option("--plant", plant,
                   "tests only: run with a deliberate defect of the Raft shell "
                   "(reply_before_commit: the leader answers writes before they commit; "
                   "shell_applies_uncommitted, lease_from_local_clock; shard_serves_every_key: "
                   "keys of other shards are served here instead of forwarded; merge_dropped: no "
                   "write of autonomous mode is ever merged) or of the Raft core "
                   "(apply_uncommitted, commit_prior_term, vote_before_persist, "
                   "vote_for_stale_log, ack_before_persist) or of the task store "
                   "(fork_put_below_deletion, merge_older_finish_wins); docs/simulation.md");
    app.add_flag("--power-cut", power_cut,
                 "tests only: run RocksDB on a file system that tracks what was fsynced; "
                 "SIGUSR2 then cuts the power: everything not fsynced is lost and the process "
                 "exits at once with status 137");
#endif
    CLI11_PARSE(app, argc, argv);

    if (print_default) {
        std::cout << dueq::node::default_config_text();
        return 0;
    }
    dueq::node::Config config;
    try {
        config = config_path.empty() ? dueq::node::parse_config(dueq::node::default_config_text(),
                                                                "built-in config")
                                     : dueq::node::load_config_file(config_path);
    } catch (const dueq::node::ConfigError& e) {
        std::cerr << "dueqd: bad config: " << e.what() << "\n";
        return 2;
    }
    if (!data_dir.empty()) config.data_dir = data_dir;
    if (!listen.empty()) {
        if (config.client_advertise == config.client_listen) config.client_advertise = listen;
        config.client_listen = listen;
    }
    if (!log_level.empty()) config.log_level = log_level;
    const auto level = spdlog::level::from_str(config.log_level);
    if (level == spdlog::level::off && config.log_level != "off") {
        std::cerr << "dueqd: unknown log level '" << config.log_level << "'\n";
        return 2;
    }
    // Logs go to stderr; stdout carries only the "listening on port" line for scripts.
    spdlog::set_default_logger(spdlog::stderr_color_mt("dueqd"));
    std::signal(SIGPIPE, SIG_IGN);
    spdlog::set_level(level);
    if (config.log_format == "json") {
        spdlog::set_formatter(dueq::node::json_log_formatter(config.node_id));
    } else {
        spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + config.node_id + "] %v");
    }
    for (const auto& w : config.warnings)
        spdlog::warn("{}", w);

    boost::asio::io_context io(1);
#ifdef DUEQD_TEST_FLAGS
    // Declared before the node, whose RocksDB runs on it until the node is destroyed, and
    // before the signal set below: it outlives every use of it.
    dueq::test::FaultEnv fault_env;
#endif
    dueq::node::Node node(io, config);
#ifdef DUEQD_TEST_FLAGS
    boost::asio::signal_set power_switch(io);
    if (power_cut) {
        fault_env = dueq::test::make_fault_env();
        node.set_storage_env(fault_env.get());
        power_switch.add(SIGUSR2);
        power_switch.async_wait([&](boost::system::error_code ec, int) {
            if (ec) return;
            // From here on every write, sync and rename is a no-op, so nothing the storage
            // thread still does reaches the disk; then the disk goes back to what was synced.
            // RocksDB's flushes and compactions end first: one still reading a file that the
            // drop truncates would crash the process half-way through the drop.
            fault_env.fs->crash();
            node.halt_storage_background_work();
            const auto dropped = fault_env.fs->drop_unsynced();
            std::cerr << "dueqd: power cut: dropped " << dropped.bytes_dropped
                      << " unsynced bytes, truncated " << dropped.files_truncated
                      << " files, deleted " << dropped.files_deleted << std::endl;
            std::_Exit(137);
        });
        spdlog::warn("--power-cut: RocksDB runs on the fault file system; SIGUSR2 cuts the power");
    }
    if (!plant.empty()) {
        dueq::raft::PlantedBug raft_bug{};
        if (dueq::raft::parse_planted_bug(plant, raft_bug) &&
            raft_bug != dueq::raft::PlantedBug::none) {
            node.plant(raft_bug);
        } else {
            std::cerr << "dueqd: unknown --plant '" << plant << "'\n";
            return 2;
        }
        spdlog::warn("running with the planted defect {}: never use this in production", plant);
    }
#endif
    // SIGHUP rereads the shard map file ([shard] map_file); a map the node cannot serve by
    // is refused with a log line and the old one stays. Connections are not touched.
    boost::asio::signal_set reload(io, SIGHUP);
    std::function<void()> wait_for_hup = [&] {
        reload.async_wait([&](boost::system::error_code ec, int) {
            if (ec) return;
            spdlog::info("SIGHUP: rereading the shard map");
            node.reload_shard_map();
            wait_for_hup();
        });
    };
    wait_for_hup();
    if (auto err = node.start()) {
        spdlog::critical("{}", *err);
        return 1;
    }
    // Scripts read this line to learn the port (useful with --listen 127.0.0.1:0).
    std::cout << "dueqd listening on port " << node.client_port() << std::endl;
    if (node.admin_port() != 0)
        std::cout << "dueqd admin on port " << node.admin_port() << std::endl;
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code, int sig) {
        spdlog::info("signal {}: stopping", sig);
        node.stop();
        io.stop();
    });
    io.run();
    return 0;
}
