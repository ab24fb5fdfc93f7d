// dueqd: one dueq node. Built a second time as dueqd-test (DUEQD_TEST_FLAGS), which also
// takes the test-only flags --plant and --power-cut that the chaos harness and the tests
// use; the dueqd a user runs has neither.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <iostream>

#include "common/invariant.h"
#include "common/version.h"
#include "node/config.h"
#include "node/json_log.h"
#include "node/node.h"
#include "node/restore.h"
#ifdef DUEQD_TEST_FLAGS
#include "testing/fault-fs/fault_fs.h"
#include "testing/planted/planted.h"
#endif

namespace {

struct Options {
    std::string config_path, data_dir, listen, log_level, restore;
    std::uint64_t join_id = 0;
    bool print_default = false;
#ifdef DUEQD_TEST_FLAGS
    std::string plant;
    bool power_cut = false;
#endif
};

void add_options(CLI::App& app, Options& o) {
    app.add_option("-c,--config", o.config_path, "TOML config file (see docs/config.md)")
        ->check(CLI::ExistingFile);
    app.add_option("--data-dir", o.data_dir, "override [node] data_dir");
    app.add_option("--listen", o.listen,
                   "override [node] client_listen, e.g. 127.0.0.1:7701 (port 0: any)");
    app.add_option("--log-level", o.log_level,
                   "trace, debug, info, warn, error (overrides [log] level)");
    app.add_flag("--print-default-config", o.print_default, "print the built-in config and exit");
    app.add_option("--join", o.join_id,
                   "join a running cluster as the new member ID that `dueqctl member add` made; "
                   "the data dir must be empty (docs/operations.md)")
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 32));
    app.add_option("--restore", o.restore,
                   "seed the (empty) data dir from a backup file that `dueqctl backup` wrote, "
                   "then exit; start dueqd again without it to serve (docs/operations.md)")
        ->check(CLI::ExistingFile);
#ifdef DUEQD_TEST_FLAGS
    const std::string names = dueq::testing::planted_list();
    app.add_option("--plant", o.plant,
                   "tests only: run with a deliberate defect of the Raft core, the shell, the "
                   "task store or the node (" +
                       names + "; docs/internals/simulation.md)");
    app.add_flag("--power-cut", o.power_cut,
                 "tests only: run RocksDB on a file system that tracks what was fsynced; "
                 "SIGUSR2 then cuts the power: everything not fsynced is lost and the process "
                 "exits at once with status 137");
#endif
}

// The usual soft limit of 1024 open files would refuse clients long before
// max_connections. Raises it to what the config needs: its client connections, plus room
// for peer links, RocksDB's files, listeners and logs; says so if the hard limit is lower.
void raise_open_files(const dueq::node::Config& c) {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    const rlim_t want = rlim_t(c.limits.max_connections) + 1024;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want) return;
    const rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
    if (rl.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &rl) != 0) rl.rlim_cur = was;
    if (rl.rlim_cur < want)
        spdlog::warn("the open-file limit is {} (hard limit {}), below the {} that [limits] "
                     "max_connections = {} needs: clients will be refused once about {} are "
                     "connected; raise it (systemd LimitNOFILE=, or ulimit -Hn)",
                     rl.rlim_cur, rl.rlim_max, want, c.limits.max_connections,
                     rl.rlim_cur > 1024 ? rl.rlim_cur - 1024 : rl.rlim_cur / 2);
    else if (rl.rlim_cur != was)
        spdlog::info("open-file limit raised from {} to {}", was, rl.rlim_cur);
}

// The config file (or the built-in one) with the command line's overrides; nullopt after
// saying why on stderr.
std::optional<dueq::node::Config> load_config(const Options& o) {
    dueq::node::Config config;
    try {
        config = o.config_path.empty() ? dueq::node::parse_config(dueq::node::default_config_text(),
                                                                  "built-in config")
                                       : dueq::node::load_config_file(o.config_path);
    } catch (const dueq::node::ConfigError& e) {
        std::cerr << "dueqd: bad config: " << e.what() << "\n";
        return std::nullopt;
    }
    if (!o.data_dir.empty()) config.data_dir = o.data_dir;
    if (!o.listen.empty()) {
        if (config.client_advertise == config.client_listen) config.client_advertise = o.listen;
        config.client_listen = o.listen;
    }
    if (!o.log_level.empty()) config.log_level = o.log_level;
    if (o.join_id != 0) {
        if (config.members.size() < 2) {
            std::cerr << "dueqd: --join needs [cluster] members to list this node and at least "
                         "one member of the cluster it joins\n";
            return std::nullopt;
        }
        config.join_id = o.join_id;
    }
    return config;
}

// Logs go to stderr; stdout carries only the "listening on port" line for scripts.
bool start_logging(const dueq::node::Config& config) {
    const auto level = spdlog::level::from_str(config.log_level);
    if (level == spdlog::level::off && config.log_level != "off") {
        std::cerr << "dueqd: unknown log level '" << config.log_level << "'\n";
        return false;
    }
    spdlog::set_default_logger(spdlog::stderr_color_mt("dueqd"));
    spdlog::set_level(level);
    if (config.log_format == "json") {
        spdlog::set_formatter(dueq::node::json_log_formatter(config.node_id));
    } else {
        spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + config.node_id + "] %v");
    }
    for (const auto& w : config.warnings)
        spdlog::warn("{}", w);
    return true;
}

#ifdef DUEQD_TEST_FLAGS
// --power-cut and --plant. Made before the node: RocksDB runs on fault_env until the node
// is destroyed, so it must outlive the node.
class TestFlags {
  public:
    explicit TestFlags(boost::asio::io_context& io) : power_switch_(io) {}
    // Before node.start(); false after saying why on stderr.
    bool apply(const Options& o, dueq::node::Node& node) {
        if (o.power_cut) arm_power_cut(node);
        if (o.plant.empty()) return true;
        const auto defects = dueq::testing::parse_planted(o.plant);
        if (!defects || *defects == dueq::node::PlantedDefects{}) {
            std::cerr << "dueqd: unknown --plant '" << o.plant << "'\n";
            return false;
        }
        node.plant(*defects);
        spdlog::warn("running with the planted defect {}: never use this in production", o.plant);
        return true;
    }

  private:
    void arm_power_cut(dueq::node::Node& node) {
        fault_env_ = dueq::test::make_fault_env();
        node.set_storage_env(fault_env_.get());
        power_switch_.add(SIGUSR2);
        power_switch_.async_wait([this, &node](boost::system::error_code ec, int) {
            if (ec) return;
            // From here on every write, sync and rename is a no-op, so nothing the storage
            // thread still does reaches the disk; then the disk goes back to what was synced.
            // RocksDB's flushes and compactions end first: one still reading a file that the
            // drop truncates would crash the process half-way through the drop.
            fault_env_.fs->crash();
            node.halt_storage_background_work();
            const auto dropped = fault_env_.fs->drop_unsynced();
            std::cerr << "dueqd: power cut: dropped " << dropped.bytes_dropped
                      << " unsynced bytes, truncated " << dropped.files_truncated
                      << " files, deleted " << dropped.files_deleted << std::endl;
            std::_Exit(137);
        });
        spdlog::warn("--power-cut: RocksDB runs on the fault file system; SIGUSR2 cuts the power");
    }

    dueq::test::FaultEnv fault_env_;
    boost::asio::signal_set power_switch_;
};
#endif

// dueqd --restore FILE: progress on stderr, a summary on stdout.
int restore(const dueq::node::Config& config, const std::string& file) {
    const auto started = std::chrono::steady_clock::now();
    auto last = started;
    dueq::node::RestoreSummary summary;
    auto err = dueq::node::restore_backup(
        config, file, summary, [&](std::uint64_t read, std::uint64_t total) {
            const auto now = std::chrono::steady_clock::now();
            if (now - last < std::chrono::seconds(1)) return;
            last = now;
            spdlog::info("restore: read {} of {} MiB", read >> 20, total >> 20);
        });
    if (err) {
        spdlog::critical("restore: {}", *err);
        return 1;
    }
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const auto& h = summary.header;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f s", took);
    std::cout << "dueqd restored " << summary.tasks << " tasks (" << (summary.file_bytes >> 20)
              << " MiB) into " << config.data_dir << " in " << seconds << ": index " << h.index
              << ", term " << h.term << ", backed up from node " << h.node << " of cluster "
              << h.cluster << " (" << h.version << ")" << std::endl;
    if (h.cluster != config.cluster_id)
        spdlog::warn(
            "the backup is of cluster '{}'; this node's config says '{}', which it "
            "will serve as",
            h.cluster, config.cluster_id);
    return 0;
}

// Runs the node until SIGINT or SIGTERM. SIGHUP rereads the shard map file ([shard]
// map_file) and the TLS files ([tls]); a map the node cannot serve by, or files that do not
// load, are refused with a log line and the old ones stay. Open connections are not
// touched: new ones use the new certificates.
int serve(boost::asio::io_context& io, dueq::node::Node& node) {
    boost::asio::signal_set reload(io, SIGHUP);
    std::function<void()> wait_for_hup = [&] {
        reload.async_wait([&](boost::system::error_code ec, int) {
            if (ec) return;
            spdlog::info("SIGHUP: rereading the shard map and the TLS files");
            node.reload_shard_map();
            node.reload_tls();
            wait_for_hup();
        });
    };
    wait_for_hup();
    if (auto err = node.start()) {
        spdlog::critical("{}", *err);
        return 1;
    }
    // Scripts read this line to learn the port (useful with --listen 127.0.0.1:0); a
    // systemd unit of Type=notify learns it here (nothing happens outside systemd).
    std::cout << "dueqd listening on port " << node.client_port() << std::endl;
    sd_notifyf(0, "READY=1\nSTATUS=serving clients on port %u", unsigned(node.client_port()));
    if (node.admin_port() != 0)
        std::cout << "dueqd admin on port " << node.admin_port() << std::endl;
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code, int sig) {
        spdlog::info("signal {}: stopping", sig);
        sd_notify(0, "STOPPING=1");
        node.stop();
        io.stop();
    });
    io.run();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "dueqd: a node of dueq, the store of tasks that come due.\n"
        "Without --config it runs one node on 127.0.0.1:7700 with data in ./data/n1\n"
        "(print that config with --print-default-config). Stop it with SIGTERM or Ctrl-C.",
        "dueqd"};
    Options options;
    add_options(app, options);
    app.set_version_flag("--version", dueq::version_line("dueqd"), "print the version and exit");
    CLI11_PARSE(app, argc, argv);
    if (options.print_default) {
        std::cout << dueq::node::default_config_text();
        return 0;
    }
    auto config = load_config(options);
    if (!config || !start_logging(*config)) return 2;
    spdlog::info("{} starting", dueq::version_line("dueqd"));
    if (!options.restore.empty()) return restore(*config, options.restore);
    raise_open_files(*config);
    std::signal(SIGPIPE, SIG_IGN);
    boost::asio::io_context io(1);
#ifdef DUEQD_TEST_FLAGS
    TestFlags test_flags(io);  // before the node: it outlives it
#endif
    dueq::node::Node node(io, *config);
#ifdef DUEQD_TEST_FLAGS
    if (!test_flags.apply(options, node)) return 2;
#endif
    try {
        return serve(io, node);
    } catch (const dueq::InvariantBroken& e) {
        // Nothing more is written: what is on disk stays as the last good write left it.
        spdlog::critical("{}; stopping", e.what());
        spdlog::shutdown();
        std::_Exit(70);
    }
}
