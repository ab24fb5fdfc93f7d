// A dueqd child process for tests: started with posix_spawn, its port read from the
// line it prints, stopped by its PID (SIGKILL for crashes, SIGTERM otherwise).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dueq::test {

class DueqdProcess {
  public:
    // Starts `binary` with `args`; waits for "listening on port N". Output goes to
    // `log_path` (appended) so a failing test can show it.
    DueqdProcess(const std::string& binary, const std::vector<std::string>& args,
                 const std::string& log_path);
    ~DueqdProcess();
    std::uint16_t port() const { return port_; }
    pid_t pid() const { return pid_; }
    void kill9();      // SIGKILL, then reap
    void terminate();  // SIGTERM, then reap
    bool alive() const { return pid_ > 0; }

  private:
    pid_t pid_ = -1;
    std::uint16_t port_ = 0;
};

// A shell command run to its end: its exit status (as pclose gives it; -1 if it could
// not start) and its standard output (standard error is dropped).
struct CommandRun {
    int status = -1;
    std::string out;
};
CommandRun run_command(const std::string& cmd);

}  // namespace dueq::test
