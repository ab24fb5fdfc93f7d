#include "node/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>

extern char** environ;

namespace dueq::test {

DueqdProcess::DueqdProcess(const std::string& binary, const std::vector<std::string>& args,
                           const std::string& log_path) {
    int out[2];
    REQUIRE(pipe(out) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addopen(&fa, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<std::string> argv_s{binary};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_s)
        argv.push_back(s.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, binary.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    REQUIRE(rc == 0);
    // Read stdout until the port line, for at most 30 s.
    std::string seen;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (port_ == 0 && std::chrono::steady_clock::now() < deadline) {
        pollfd p{out[0], POLLIN, 0};
        if (poll(&p, 1, 200) <= 0) continue;
        char buf[256];
        const ssize_t n = read(out[0], buf, sizeof buf);
        if (n <= 0) break;
        seen.append(buf, std::size_t(n));
        auto at = seen.find("listening on port ");
        auto nl = seen.find('\n', at);
        if (at != std::string::npos && nl != std::string::npos)
            port_ = std::uint16_t(std::stoi(seen.substr(at + 18, nl - at - 18)));
    }
    close(out[0]);
    if (port_ == 0) {
        kill9();
        std::ifstream log(log_path);
        std::string text((std::istreambuf_iterator<char>(log)), {});
        FAIL("dueqd did not start; its log:\n" << text);
    }
}

void DueqdProcess::kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

void DueqdProcess::terminate() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

DueqdProcess::~DueqdProcess() {
    kill9();
}

CommandRun run_command(const std::string& cmd) {
    CommandRun r;
    FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
    if (!p) return r;
    char buf[4096];
    while (std::size_t n = fread(buf, 1, sizeof buf, p))
        r.out.append(buf, n);
    r.status = pclose(p);
    return r;
}

}  // namespace dueq::test
