#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace dueq::dueqctl {
namespace {

// Closes what it holds on every path out of run_shell.
struct Fd {
    int fd = -1;
    ~Fd() { reset(); }
    void reset() {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
};

std::vector<std::string> merged_environment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e) {
        std::string entry(*e);
        bool overridden = false;
        for (const auto& [k, v] : extra) overridden |= entry.rfind(k + "=", 0) == 0;
        if (!overridden) out.push_back(std::move(entry));
    }
    for (const auto& [k, v] : extra) out.push_back(k + "=" + v);
    return out;
}

// Starts /bin/sh -c `command` reading `stdin_fd` and writing `stdout_fd`; returns "" (and
// the child's pid) or why it could not.
std::string spawn_shell(const std::string& command,
                        const std::vector<std::pair<std::string, std::string>>& env,
                        int stdin_fd, int stdout_fd, pid_t& pid) {
    std::vector<std::string> env_strings = merged_environment(env);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
    char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
    posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
    const int rc = ::posix_spawn(&pid, "/bin/sh", &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    return rc == 0 ? "" : std::string("spawn /bin/sh: ") + std::strerror(rc);
}

}  // namespace

CommandResult run_shell(const std::string& command,
                        const std::vector<std::pair<std::string, std::string>>& env,
                        const std::string& input, std::chrono::milliseconds tick,
                        const std::function<void()>& on_tick, std::size_t max_output) {
    CommandResult result;
    int in_pipe[2], out_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
        result.error = std::string("pipe: ") + std::strerror(errno);
        return result;
    }
    Fd in_read{in_pipe[0]}, in_write{in_pipe[1]};
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
        result.error = std::string("pipe: ") + std::strerror(errno);
        return result;
    }
    Fd out_read{out_pipe[0]}, out_write{out_pipe[1]};

    pid_t pid = 0;
    result.error = spawn_shell(command, env, in_read.fd, out_write.fd, pid);
    if (!result.error.empty()) return result;
    result.started = true;
    in_read.reset();
    out_write.reset();
    ::fcntl(in_write.fd, F_SETFL, O_NONBLOCK);

    std::size_t written = 0;
    if (input.empty()) in_write.reset();
    auto last_tick = std::chrono::steady_clock::now();
    char buf[65536];
    while (out_read.fd >= 0) {
        pollfd fds[2];
        int n = 0;
        fds[n++] = {out_read.fd, POLLIN, 0};
        if (in_write.fd >= 0) fds[n++] = {in_write.fd, POLLOUT, 0};
        const int ready = ::poll(fds, n, static_cast<int>(tick.count()));
        if (ready < 0 && errno != EINTR) break;
        if (ready > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            const ssize_t got = ::read(out_read.fd, buf, sizeof buf);
            if (got > 0) {
                const std::size_t room = max_output - std::min(max_output, result.output.size());
                result.output.append(buf, std::min<std::size_t>(room, static_cast<std::size_t>(got)));
            } else if (got == 0 || errno != EINTR) {
                out_read.reset();
            }
        }
        if (ready > 0 && n == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            const ssize_t put = ::write(in_write.fd, input.data() + written, input.size() - written);
            // A command that ignores its stdin is fine: stop feeding it.
            if (put < 0 && errno != EAGAIN && errno != EINTR) in_write.reset();
            if (put > 0) written += static_cast<std::size_t>(put);
            if (written == input.size()) in_write.reset();
        }
        const auto now = std::chrono::steady_clock::now();
        if (on_tick && now - last_tick >= tick) {
            last_tick = now;
            on_tick();
        }
    }
    in_write.reset();
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
}

}  // namespace dueq::dueqctl
