#include "failover.h"

#include <signal.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "load.h"

namespace dueq::bench {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// Runs io until `done` or the deadline.
void run_until(asio::io_context& io, const bool& done, Clock::time_point deadline) {
    while (!done && Clock::now() < deadline) {
        io.run_one_for(std::chrono::milliseconds(20));
        if (io.stopped()) io.restart();
    }
}

std::vector<std::shared_ptr<Connection>> connect_all(BackendKind kind, asio::io_context& io,
                                                     const std::vector<std::string>& addrs) {
    std::vector<std::shared_ptr<Connection>> conns;
    for (const auto& a : addrs) {
        try {
            conns.push_back(connect(kind, io, a, 1000));
        } catch (const std::exception&) {
            conns.push_back(nullptr);
        }
    }
    return conns;
}

void close_all(std::vector<std::shared_ptr<Connection>>& conns) {
    for (auto& c : conns)
        if (c) c->close();
}

// One round of "who leads?": the indexes that said yes, and how many answered.
std::pair<std::vector<std::size_t>, std::size_t> ask_leaders(
    BackendKind kind, const std::vector<std::string>& addrs) {
    asio::io_context io;
    auto conns = connect_all(kind, io, addrs);
    std::vector<std::size_t> leaders;
    std::size_t answered = 0, waiting = 0;
    for (std::size_t i = 0; i < conns.size(); ++i) {
        if (!conns[i]) continue;
        ++waiting;
        conns[i]->is_leader([&, i](Reply r, bool leads) {
            --waiting;
            if (!r.ok) return;
            ++answered;
            if (leads) leaders.push_back(i);
        });
    }
    bool done = false;
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (waiting > 0 && Clock::now() < deadline)
        run_until(io, done, std::min(deadline, Clock::now() + std::chrono::milliseconds(20)));
    close_all(conns);
    io.run_for(std::chrono::milliseconds(50));
    return {leaders, answered};
}

}  // namespace

std::size_t find_leader(BackendKind kind, const std::vector<std::string>& addrs, double timeout_s) {
    if (addrs.size() == 1) return 0;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
    while (Clock::now() < deadline) {
        auto [leaders, answered] = ask_leaders(kind, addrs);
        if (leaders.size() == 1) return leaders[0];
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("no single leader among the members within the timeout");
}

namespace {

// Waits until every member answers and exactly one leads.
void wait_healthy(BackendKind kind, const std::vector<std::string>& addrs, double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
    while (Clock::now() < deadline) {
        auto [leaders, answered] = ask_leaders(kind, addrs);
        if (leaders.size() == 1 && answered == addrs.size()) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("the cluster did not come back whole within the timeout");
}

// Waits (up to 60 s) until `pid` is gone, or a zombie whose other threads are gone too: a
// killed process keeps its files (RocksDB's LOCK, a listening port) until its last thread
// has exited, and a member restarted before that cannot open its data directory or bind
// its port. The first thread turns zombie while the others may still be exiting: an
// etcd member restarted then failed with "address already in use".
void wait_gone(pid_t pid) {
    const auto give_up = Clock::now() + std::chrono::seconds(60);
    const std::string proc = "/proc/" + std::to_string(pid);
    while (Clock::now() < give_up) {
        if (::kill(pid, 0) != 0 && errno == ESRCH) return;
        std::ifstream stat(proc + "/stat");
        std::string comm_end, state;
        std::getline(stat, comm_end, ')');
        if (stat >> state && state == "Z") {
            std::error_code ec;
            std::size_t threads = 0;
            for (std::filesystem::directory_iterator it(proc + "/task", ec), end; !ec && it != end;
                 it.increment(ec))
                ++threads;
            if (ec || threads <= 1) return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

// Runs the restart command for member i (1-based); its last line of output is the PID.
int restart_member(const std::string& cmd_template, std::size_t i) {
    std::string cmd = cmd_template;
    for (std::size_t at; (at = cmd.find("{i}")) != std::string::npos;)
        cmd.replace(at, 3, std::to_string(i));
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("cannot run: " + cmd);
    std::string out;
    char buf[256];
    while (std::size_t n = fread(buf, 1, sizeof buf, p))
        out.append(buf, n);
    const int status = pclose(p);
    if (status != 0) throw std::runtime_error("restart command failed: " + cmd);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
        out.pop_back();
    const auto nl = out.rfind('\n');
    const std::string last = nl == std::string::npos ? out : out.substr(nl + 1);
    try {
        return std::stoi(last);
    } catch (const std::exception&) {
        throw std::runtime_error("restart command printed no PID: " + cmd);
    }
}

// The probe: every probe_ms, one more op to each surviving member on a connection that
// is not waiting for an answer (a new one if all are), until one op succeeds. A request
// that hangs (etcd holds a put that a follower forwarded to the dead leader until its
// 7 s request timeout) thus never hides a later one that would succeed; a connection
// whose request has waited for a second is closed (a client's own timeout).
// Returns ms from `killed_at`, or a negative value on timeout.
double probe(const FailoverOptions& o, std::size_t dead, Clock::time_point killed_at) {
    struct Slot {
        std::shared_ptr<Connection> conn;
        bool busy = false;
        Clock::time_point sent_at{};
    };
    constexpr std::size_t kMaxPerMember = 128;
    constexpr auto kGiveUpAfter = std::chrono::seconds(1);
    asio::io_context io;
    std::vector<std::vector<std::shared_ptr<Slot>>> slots(o.addrs.size());
    bool done = false;
    Clock::time_point succeeded_at{};
    auto success = [&] {
        if (done) return;
        done = true;
        succeeded_at = Clock::now();
    };
    auto send = [&](std::size_t i) {
        const auto now = Clock::now();
        for (auto& s : slots[i])
            if (s->busy && now - s->sent_at > kGiveUpAfter) s->conn->close();
        std::erase_if(slots[i], [](auto& s) { return s->conn->broken(); });
        std::shared_ptr<Slot> slot;
        for (auto& s : slots[i])
            if (!s->busy) slot = s;
        if (!slot) {
            if (slots[i].size() >= kMaxPerMember) return;
            try {
                slot = std::make_shared<Slot>(Slot{connect(o.backend, io, o.addrs[i], 200)});
            } catch (const std::exception&) {
                return;
            }
            slots[i].push_back(slot);
        }
        slot->busy = true;
        slot->sent_at = now;
        auto c = slot->conn;
        if (o.backend == BackendKind::dueq) {
            c->take(o.queue, 1000, [&, c, slot](Reply r, std::optional<Taken> task) {
                slot->busy = false;
                if (!r.ok) return;
                success();
                // Give the task straight back so the pool stays full for the next kill.
                if (task) c->ack(o.queue, *task, "p", wall_ms(), [](Reply) {});
            });
        } else {
            c->put(o.queue, "probe", "p", wall_ms(), [&, slot](Reply r) {
                slot->busy = false;
                if (r.ok) success();
            });
        }
    };
    asio::steady_timer tick(io);
    std::function<void()> round = [&] {
        if (done) return;
        for (std::size_t i = 0; i < o.addrs.size(); ++i)
            if (i != dead) send(i);
        tick.expires_after(std::chrono::milliseconds(o.probe_ms));
        tick.async_wait([&](boost::system::error_code ec) {
            if (!ec) round();
        });
    };
    round();
    run_until(io, done,
              killed_at + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(o.timeout_s)));
    tick.cancel();
    for (auto& member : slots)
        for (auto& s : member)
            s->conn->close();
    io.restart();
    io.run_for(std::chrono::milliseconds(100));
    if (!done) return -1;
    return std::chrono::duration<double, std::milli>(succeeded_at - killed_at).count();
}

// dueq: a few due tasks so that each probe's take hands one out.
void seed_tasks(const FailoverOptions& o, std::size_t leader) {
    if (o.backend != BackendKind::dueq) return;
    asio::io_context io;
    auto c = connect(o.backend, io, o.addrs[leader]);
    int left = 100;
    bool done = false, failed = false;
    for (int k = 0; k < 100; ++k)
        c->put(o.queue, key_of(std::uint64_t(k), 16), "p", wall_ms() - 1, [&](Reply r) {
            if (!r.ok) failed = true;
            if (--left == 0) done = true;
        });
    run_until(io, done, Clock::now() + std::chrono::seconds(10));
    c->close();
    io.restart();
    io.run_for(std::chrono::milliseconds(20));
    if (!done || failed) throw std::runtime_error("failover: could not seed tasks on the leader");
}

}  // namespace

FailoverResult run_failover(FailoverOptions& o) {
    if (o.addrs.size() < 3 || o.pids.size() != o.addrs.size())
        throw std::runtime_error("failover needs 3+ members and one --pid per --addr");
    if (o.restart_cmd.empty()) throw std::runtime_error("failover needs --restart-cmd");
    FailoverResult result;
    wait_healthy(o.backend, o.addrs, o.timeout_s);
    seed_tasks(o, find_leader(o.backend, o.addrs));
    for (int k = 0; k < o.kills; ++k) {
        const auto leader = find_leader(o.backend, o.addrs, o.timeout_s);
        // Keep connections to the survivors open, as a client would have them.
        const auto killed_at = Clock::now();
        if (::kill(o.pids[leader], o.stop_instead ? SIGSTOP : SIGKILL) != 0)
            throw std::runtime_error("cannot kill pid " + std::to_string(o.pids[leader]));
        const double ms = probe(o, leader, killed_at);
        if (ms < 0) throw std::runtime_error("no member answered within the timeout after a kill");
        if (o.stop_instead) ::kill(o.pids[leader], SIGKILL);
        wait_gone(o.pids[leader]);
        result.leaders.push_back(leader);
        result.ms.push_back(ms);
        if (o.progress)
            std::fprintf(
                stderr, "failover %d/%d: killed member %zu (pid %d), first success after %.0f ms\n",
                k + 1, o.kills, leader + 1, o.pids[leader], ms);
        o.pids[leader] = restart_member(o.restart_cmd, leader + 1);
        wait_healthy(o.backend, o.addrs, o.timeout_s);
        std::this_thread::sleep_for(std::chrono::milliseconds(o.settle_ms));
    }
    return result;
}

nlohmann::json FailoverResult::to_json(const FailoverOptions& o) const {
    auto sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    auto at = [&](double q) {
        return sorted.empty()
                   ? 0.0
                   : sorted[std::min(sorted.size() - 1, std::size_t(q * double(sorted.size())))];
    };
    double median = 0;
    if (!sorted.empty()) {
        const auto n = sorted.size();
        median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
    return {{"backend", backend_name(o.backend)},
            {"kills", ms.size()},
            {"probe_ms", o.probe_ms},
            {"signal", o.stop_instead ? "STOP" : "KILL"},
            {"ms", ms},
            {"leaders", leaders},
            {"median_ms", median},
            {"min_ms", sorted.empty() ? 0.0 : sorted.front()},
            {"max_ms", sorted.empty() ? 0.0 : sorted.back()},
            {"p90_ms", at(0.9)}};
}

}  // namespace dueq::bench
