// dueq-floor: what this machine allows a one-deep request, measured beside dueq in the
// same run (docs/benchmarks.md, "The floor"):
//   - a loopback TCP round trip of a request-sized frame and an answer-sized one, between
//     two threads of one process with blocking sockets (no event loop, no parsing);
//   - an append of a log-record-sized block to a WAL file written as dueq writes it
//     (pre-zeroed, storage/prezeroed_wal.h) and its fdatasync.
// A put 1 x 1 can be no faster than one round trip (fsync never), one round trip and one
// sync (fsync always, one node), or round trip + sync + round trip (three nodes: the
// leader's sync and the followers' run side by side, their answer is one more hop).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <rocksdb/file_system.h>

#include "common/parse_size.h"
#include "storage/prezeroed_wal.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string dir;
    std::size_t round_trips = 20000;
    std::size_t request_bytes = 64;
    std::size_t answer_bytes = 32;
    std::size_t syncs = 2000;
    std::size_t record_bytes = 256;
    bool json = false;
};

const char* kUsage =
    "usage: dueq-floor --dir DIR [--round-trips N] [--request-bytes B] [--answer-bytes B]\n"
    "                  [--syncs N] [--record-bytes B] [--json]\n"
    "  The floor under a one-deep dueq request on this machine:\n"
    "  - N loopback TCP round trips (default 20000) of a B-byte request (default 64) and\n"
    "    a B-byte answer (default 32) between two threads;\n"
    "  - N appends of B bytes (default 2000 of 256) to a pre-zeroed WAL file in the new\n"
    "    directory DIR (removed afterwards), each followed by fdatasync.\n"
    "  Prints p50, p90 and p99 in microseconds, and a last line for scripts:\n"
    "    floor rtt_p50_us=... fdatasync_p50_us=... one_node_always_us=... three_nodes_us=...\n"
    "  --json: one JSON object instead (rtt_us and fdatasync_us, each {p50, p90, p99}), as\n"
    "  measure/bench/run-all.sh keeps it for the page's \"Against the floor\".\n";

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "dueq-floor: %s\n", what.c_str());
    std::exit(1);
}

bool io_all(int fd, char* p, std::size_t n, bool write) {
    while (n > 0) {
        const ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
        if (k <= 0) return false;
        p += k, n -= std::size_t(k);
    }
    return true;
}

struct Percentiles {
    double p50, p90, p99;
};

Percentiles percentiles(std::vector<double> us) {
    std::sort(us.begin(), us.end());
    auto at = [&](double q) {
        return us[std::min(us.size() - 1, std::size_t(q * double(us.size())))];
    };
    return {at(0.50), at(0.90), at(0.99)};
}

std::vector<double> loopback_round_trips(const Options& o) {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        die("cannot listen on 127.0.0.1");
    const int one = 1;
    std::thread server([&] {
        const int fd = ::accept(listener, nullptr, nullptr);
        if (fd < 0) return;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        std::string request(o.request_bytes, 'q'), answer(o.answer_bytes, 'a');
        while (io_all(fd, request.data(), request.size(), false) &&
               io_all(fd, answer.data(), answer.size(), true)) {
        }
        ::close(fd);
    });
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        die("cannot connect to 127.0.0.1");
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::string request(o.request_bytes, 'r'), answer(o.answer_bytes, '\0');
    std::vector<double> us;
    us.reserve(o.round_trips);
    for (std::size_t i = 0; i < o.round_trips; ++i) {
        const auto t0 = Clock::now();
        if (!io_all(fd, request.data(), request.size(), true) ||
            !io_all(fd, answer.data(), answer.size(), false))
            die("the loopback connection broke");
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    ::close(fd);
    server.join();
    ::close(listener);
    return us;
}

std::vector<double> appends_with_sync(const Options& o) {
    auto fs = dueq::storage::prezeroed_wal_fs(rocksdb::FileSystem::Default());
    // Named as RocksDB names a WAL file, so that the pre-zeroing layer takes it.
    const std::string name = o.dir + "/000001.log";
    std::unique_ptr<rocksdb::FSWritableFile> file;
    const rocksdb::IOOptions io;
    auto s = fs->NewWritableFile(name, rocksdb::FileOptions(), &file, nullptr);
    const std::string record(o.record_bytes, 'w');
    std::vector<double> us;
    us.reserve(o.syncs);
    for (std::size_t i = 0; s.ok() && i < o.syncs; ++i) {
        const auto t0 = Clock::now();
        s = file->Append(record, io, nullptr);
        if (s.ok()) s = file->Sync(io, nullptr);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    if (s.ok()) s = file->Close(io, nullptr);
    if (!s.ok()) die(s.ToString());
    return us;
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (a == "--json") {
            o.json = true;
            continue;
        }
        if (i + 1 >= argc) return false;
        const char* v = argv[++i];
        if (a == "--dir") {
            o.dir = v;
            continue;
        }
        std::size_t* target = a == "--round-trips"     ? &o.round_trips
                              : a == "--request-bytes" ? &o.request_bytes
                              : a == "--answer-bytes"  ? &o.answer_bytes
                              : a == "--syncs"         ? &o.syncs
                              : a == "--record-bytes"  ? &o.record_bytes
                                                       : nullptr;
        if (target == nullptr || !dueq::parse_size(v, target) || *target == 0) return false;
    }
    return !o.dir.empty();
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    if (std::filesystem::exists(o.dir)) die(o.dir + " exists; give a new directory");
    std::filesystem::create_directories(o.dir);
    const auto rtt = percentiles(loopback_round_trips(o));
    const auto sync = percentiles(appends_with_sync(o));
    std::filesystem::remove_all(o.dir);
    if (o.json) {
        auto obj = [](const Percentiles& p) {
            char b[128];
            std::snprintf(b, sizeof b, "{\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f}", p.p50,
                          p.p90, p.p99);
            return std::string(b);
        };
        std::printf(
            "{\"request_bytes\": %zu, \"answer_bytes\": %zu, \"record_bytes\": %zu, "
            "\"rtt_us\": %s, \"fdatasync_us\": %s}\n",
            o.request_bytes, o.answer_bytes, o.record_bytes, obj(rtt).c_str(), obj(sync).c_str());
        return 0;
    }
    std::printf("%-34s %10s %10s %10s\n", "", "p50 us", "p90 us", "p99 us");
    std::printf("%-34s %10.1f %10.1f %10.1f\n",
                ("loopback round trip " + std::to_string(o.request_bytes) + "/" +
                 std::to_string(o.answer_bytes) + " B")
                    .c_str(),
                rtt.p50, rtt.p90, rtt.p99);
    std::printf("%-34s %10.1f %10.1f %10.1f\n",
                ("append " + std::to_string(o.record_bytes) + " B + fdatasync").c_str(), sync.p50,
                sync.p90, sync.p99);
    std::printf(
        "floor rtt_p50_us=%.1f fdatasync_p50_us=%.1f one_node_always_us=%.1f "
        "three_nodes_us=%.1f\n",
        rtt.p50, sync.p50, rtt.p50 + sync.p50, 2 * rtt.p50 + sync.p50);
    return 0;
}
