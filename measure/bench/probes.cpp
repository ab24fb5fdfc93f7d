#include "probes.h"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <thread>

namespace dueq::bench {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// Sends one request on a fresh connection and runs until its reply (or 5 s).
template <class Send>
bool one_shot(BackendKind kind, const std::string& address, Send send, double timeout_s = 5) {
    asio::io_context io;
    std::shared_ptr<Connection> c;
    try {
        c = connect(kind, io, address, 1000);
    } catch (const std::exception&) {
        return false;
    }
    bool done = false, ok = false;
    send(*c, [&](bool success) {
        ok = success;
        done = true;
    });
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
    while (!done && Clock::now() < deadline)
        io.run_one_for(std::chrono::milliseconds(20));
    c->close();
    io.restart();
    io.poll();
    return ok;
}

}  // namespace

double wait_ready(BackendKind kind, const std::string& address, const std::string& queue,
                  const std::string& key, double timeout_s) {
    const auto t0 = Clock::now();
    const auto deadline =
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    while (Clock::now() < deadline) {
        const bool ok = one_shot(kind, address, [&](Connection& c, auto done) {
            c.get(queue, key, [done](Reply r) { done(r.ok); });
        });
        if (ok) return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
}

std::optional<std::int64_t> store_bytes(BackendKind kind, const std::string& address) {
    std::optional<std::int64_t> out;
    one_shot(kind, address, [&](Connection& c, auto done) {
        c.store_bytes([&out, done](Reply r, std::int64_t bytes) {
            if (r.ok) out = bytes;
            done(r.ok);
        });
    });
    return out;
}

bool checkpoint(BackendKind kind, const std::string& address, double timeout_s,
                std::string* error) {
    *error = "no answer";
    return one_shot(
        kind, address,
        [&](Connection& c, auto done) {
            c.checkpoint([error, done](Reply r) {
                *error = r.error;
                done(r.ok);
            });
        },
        timeout_s);
}

}  // namespace dueq::bench
