// The dueqd a user runs carries no test machinery: --plant and --power-cut exist only in
// dueqd-test, the build the chaos harness and the tests start.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

namespace {
// Runs `command` through the shell; returns its stdout and stderr, and its exit status.
std::string run(const std::string& command, int* status) {
    std::string out;
    FILE* p = popen((command + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p))
        out.append(buf, n);
    *status = pclose(p);
    return out;
}
}  // namespace

TEST_CASE("dueqd --help shows no test-only flag, and dueqd refuses them") {
    int status = 0;
    const std::string help = run(std::string(DUEQD_BINARY) + " --help", &status);
    CHECK(status == 0);
    CHECK(help.find("--config") != std::string::npos);
    CHECK(help.find("--plant") == std::string::npos);
    CHECK(help.find("--power-cut") == std::string::npos);
    CHECK(help.find("tests only") == std::string::npos);
    run(std::string(DUEQD_BINARY) + " --plant reply_before_commit --print-default-config", &status);
    CHECK(status != 0);
    run(std::string(DUEQD_BINARY) + " --power-cut --print-default-config", &status);
    CHECK(status != 0);
}

TEST_CASE("dueqd-test has both test-only flags") {
    int status = 0;
    const std::string help = run(std::string(DUEQD_TEST_BINARY) + " --help", &status);
    CHECK(status == 0);
    CHECK(help.find("--plant") != std::string::npos);
    CHECK(help.find("--power-cut") != std::string::npos);
    const std::string bad =
        run(std::string(DUEQD_TEST_BINARY) + " --plant no_such_defect", &status);
    CHECK(status != 0);
    CHECK(bad.find("unknown --plant") != std::string::npos);
}
