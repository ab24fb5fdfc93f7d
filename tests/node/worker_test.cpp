// The reference refresher end to end: dueqctl puts late and due tokens into a real
// dueqd, `dueqctl worker` refreshes them (builtin and --exec), and get shows new
// payloads and new times.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cstdio>

#include "node/process.h"
#include "node/support.h"

using namespace dueq::test;

namespace {

CommandRun run(const std::string& cmd) {
    return run_command(cmd);
}

}  // namespace

TEST_CASE("dueqctl worker refreshes due tokens and acks them with a new time") {
    const auto dir = fresh_dir("worker");
    DueqdProcess node(DUEQD_BINARY,
                      {"--listen", "127.0.0.1:0", "--data-dir", (dir / "data").string()},
                      (dir / "dueqd.log").string());
    const std::string ctl =
        std::string(DUEQCTL_BINARY) + " --addr 127.0.0.1:" + std::to_string(node.port());
    for (int i = 0; i < 4; ++i)
        REQUIRE(run(ctl + " put tokens t" + std::to_string(i) +
                    " --payload '{\"token\":\"old\"}' --time " + (i % 2 ? "-30s" : "now"))
                    .status == 0);
    REQUIRE(run(ctl + " put tokens later --payload '{\"token\":\"old\"}' --time +2h").status == 0);

    SECTION("builtin refresh") {
        const auto t0 = wall_ms();
        auto w =
            run(ctl + " worker tokens --builtin-refresh --next-in 1h --max-tasks 4 --duration 20s");
        CHECK(w.status == 0);
        for (int i = 0; i < 4; ++i) {
            auto g = run(ctl + " --json get tokens t" + std::to_string(i));
            REQUIRE(g.status == 0);
            auto j = nlohmann::json::parse(g.out);
            INFO(g.out);
            const auto& task = j.contains("task") ? j["task"] : j;
            CHECK(task["payload"]["token"] != "old");
            CHECK(task["status"] == "ready");
            const std::int64_t time =
                task["time"].is_number() ? task["time"].get<std::int64_t>() : 0;
            CHECK(time >= t0 + 3'600'000 - 1000);
        }
        // The task not yet due was left alone.
        auto later = nlohmann::json::parse(run(ctl + " --json get tokens later").out);
        const auto& task = later.contains("task") ? later["task"] : later;
        CHECK(task["payload"]["token"] == "old");
    }
    SECTION("--exec: the command's JSON becomes the new payload; a failing command releases") {
        auto w = run(ctl +
                     " worker tokens --max-tasks 4 --duration 20s --next-in 1h --exec "
                     "'case $DUEQ_KEY in t0) exit 3;; esac; echo "
                     "\"{\\\"payload\\\":{\\\"token\\\":\\\"new-$DUEQ_KEY\\\"}}\"'");
        INFO(w.out);
        auto g1 = nlohmann::json::parse(run(ctl + " --json get tokens t1").out);
        const auto& t1 = g1.contains("task") ? g1["task"] : g1;
        CHECK(t1["payload"]["token"] == "new-t1");
        auto g0 = nlohmann::json::parse(run(ctl + " --json get tokens t0").out);
        const auto& t0 = g0.contains("task") ? g0["task"] : g0;
        CHECK(t0["payload"]["token"] == "old");  // released, not acked
        CHECK(t0["status"] == "ready");
    }
    node.terminate();
    std::filesystem::remove_all(dir);
}
