// dueq-bench end to end at tiny scale against a real dueqd: each scenario runs for about
// two seconds with --json, and its output parses and has the fields the benchmark page
// is built from. Throughput and latency values are not checked, only that ops happened.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <string>

#include "node/process.h"
#include "node/support.h"

using namespace dueq::test;
using nlohmann::json;

namespace {

CommandRun run(const std::string& args) {
    return run_command(std::string(DUEQ_BENCH_BINARY) + " " + args);
}

json run_json(const std::string& args) {
    auto r = run(args + " --json --quiet");
    INFO("dueq-bench " << args << "\n" << r.out);
    REQUIRE(r.status == 0);
    json j;
    REQUIRE_NOTHROW(j = json::parse(r.out));
    REQUIRE(j.contains("results"));
    REQUIRE(j["results"].is_array());
    return j;
}

// The last result of a scenario run (a preload may come first).
const json& scenario_result(const json& j, const std::string& scenario) {
    const auto& results = j["results"];
    REQUIRE(!results.empty());
    const auto& r = results.back();
    REQUIRE(r["scenario"] == scenario);
    return r;
}

void check_op(const json& r, const std::string& op) {
    INFO(r.dump());
    REQUIRE(r["per_op"].contains(op));
    const auto& s = r["per_op"][op];
    CHECK(s["ops"].get<std::uint64_t>() > 0);
    for (const char* field : {"ops_per_s", "p50_us", "p99_us", "p999_us", "max_us", "errors"})
        CHECK(s.contains(field));
    CHECK(s["errors"].get<std::uint64_t>() == 0);
    CHECK(s["p50_us"].get<double>() <= s["p999_us"].get<double>());
}

}  // namespace

TEST_CASE("dueq-bench --help names every scenario") {
    auto r = run("--help");
    CHECK(r.status == 0);
    for (const char* s : {"put", "get", "refresh", "mixed", "preload", "drill", "failover",
                          "memory", "wait", "report"})
        CHECK(r.out.find(std::string("  ") + s + " ") != std::string::npos);
}

TEST_CASE("dueq-bench scenarios run against a real dueqd and their JSON parses") {
    const auto dir = fresh_dir("bench-smoke");
    DueqdProcess node(DUEQD_BINARY,
                      {"--listen", "127.0.0.1:0", "--data-dir", (dir / "data").string()},
                      (dir / "dueqd.log").string());
    const std::string addr = "--addr 127.0.0.1:" + std::to_string(node.port());

    SECTION("put, stopped by an op count") {
        auto j = run_json("put " + addr + " -c 4 -d 4 --warmup 0 --ops 300 --seconds 20");
        const auto& r = scenario_result(j, "put");
        CHECK(r["ops"] == 300);
        check_op(r, "put");
    }
    SECTION("refresh: preload, then take and ack cycles") {
        auto j = run_json("refresh " + addr +
                          " -c 4 -d 2 --keys 500 --warmup 0.5 --seconds 1.5 --queue smoke-r");
        REQUIRE(j["results"].size() == 2);
        CHECK(j["results"][0]["scenario"] == "preload");
        CHECK(j["results"][0]["ops"] == 500);
        const auto& r = scenario_result(j, "refresh");
        CHECK(r["ops"].get<std::uint64_t>() > 0);
        for (const char* op : {"take", "ack", "refresh"})
            check_op(r, op);
    }
    SECTION("get and mixed") {
        auto g = run_json("get " + addr + " -c 2 -d 4 --keys 200 --warmup 0.2 --seconds 1");
        check_op(scenario_result(g, "get"), "get");
        auto m = run_json("mixed " + addr +
                          " -c 4 --refreshers 1 --keys 200 --warmup 0.2 --seconds 1.5 "
                          "--queue smoke-m");
        const auto& r = scenario_result(m, "mixed");
        for (const char* op : {"get", "refresh"})
            check_op(r, op);
    }
    SECTION("the refresh drill, both orders") {
        auto j = run_json("drill " + addr +
                          " --tokens 2000 --hour-ms 6000 --late-share 0.2 --refreshers 8 "
                          "--service-ms 1 --seconds 3 --preload-rate 20000");
        const auto& results = j["results"];
        REQUIRE(results.size() == 2);
        CHECK(results[0]["order"] == "deadline-aware");
        CHECK(results[1]["order"] == "earliest-first");
        for (const auto& r : results) {
            INFO(r.dump());
            for (const char* f : {"late_at_start", "savable_due", "saved", "expired_savable",
                                  "drain_ms", "refreshes", "lead_ms"})
                CHECK(r.contains(f));
            CHECK(r["refreshes"].get<std::uint64_t>() > 0);
            CHECK(r["saved"].get<std::uint64_t>() + r["expired_savable"].get<std::uint64_t>() <=
                  r["savable_due"].get<std::uint64_t>());
            CHECK(r["errors"] == 0);
        }
    }
}
