// dueq-sync-cost: what an append and its fdatasync cost in a WAL file written as RocksDB
// writes it (the file grows with each append) and as dueq writes it (over zeros written
// ahead, storage/prezeroed_wal.h), on the disk under DIR.
//
// Rounds alternate between the two ways, so that both see the same machine; each
// round writes --syncs appends of --bytes and syncs after each, in --files files at once
// (one thread each: three nodes of a cluster on one disk). It prints, per sync, the
// wall time and the process's CPU time for each way, and their ratios.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <rocksdb/file_system.h>

#include "common/parse_size.h"
#include "common/process_cpu.h"
#include "storage/prezeroed_wal.h"

namespace {

struct Options {
    std::string dir;
    std::size_t syncs = 2000;
    std::size_t bytes = 4096;
    std::size_t files = 1;
    std::size_t rounds = 3;
};

const char* kUsage =
    "usage: dueq-sync-cost --dir DIR [--syncs N] [--bytes B] [--files F] [--rounds R]\n"
    "  In a new directory DIR (removed afterwards), R rounds (default 3) of each way:\n"
    "  F files at once (default 1), each N appends (default 2000) of B bytes (default\n"
    "  4096) with an fdatasync after each. Prints wall and CPU microseconds per sync for\n"
    "  a growing file (RocksDB's way) and a pre-zeroed one (dueq's), and their ratios.\n";

struct Cost {
    double wall_us = 0;
    double cpu_us = 0;
};

// One round: every file written at once; the cost per sync, averaged over all of them.
Cost run_round(rocksdb::FileSystem& fsys, const Options& o, const std::string& tag, int r) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(o.files);
    const std::string data(o.bytes, 'd');
    const double cpu0 = dueq::process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t f = 0; f < o.files; ++f) {
        threads.emplace_back([&, f] {
            // Named as RocksDB names a WAL file, so that the pre-zeroing layer takes it.
            const std::string name = o.dir + "/" + tag + std::to_string(r) + "-" +
                                     std::to_string(f) + "/000001.log";
            std::filesystem::create_directories(std::filesystem::path(name).parent_path());
            std::unique_ptr<rocksdb::FSWritableFile> file;
            const rocksdb::IOOptions io;
            auto s = fsys.NewWritableFile(name, rocksdb::FileOptions(), &file, nullptr);
            for (std::size_t i = 0; s.ok() && i < o.syncs; ++i) {
                s = file->Append(data, io, nullptr);
                if (s.ok()) s = file->Sync(io, nullptr);
            }
            if (s.ok()) s = file->Close(io, nullptr);
            if (!s.ok()) errors[f] = s.ToString();
        });
    }
    for (auto& t : threads)
        t.join();
    for (const auto& e : errors)
        if (!e.empty()) {
            std::fprintf(stderr, "dueq-sync-cost: %s\n", e.c_str());
            std::exit(1);
        }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double n = double(o.syncs * o.files);
    // Wall time per sync as each file saw it: the files ran side by side.
    return {wall * 1e6 / double(o.syncs), (dueq::process_cpu_seconds() - cpu0) * 1e6 / n};
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (i + 1 >= argc) return false;
        const char* v = argv[++i];
        std::size_t* target = a == "--syncs"   ? &o.syncs
                              : a == "--bytes" ? &o.bytes
                              : a == "--files" ? &o.files
                              : a == "--rounds" ? &o.rounds
                                                : nullptr;
        if (a == "--dir") {
            o.dir = v;
            continue;
        }
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
    if (std::filesystem::exists(o.dir)) {
        std::fprintf(stderr, "dueq-sync-cost: %s exists; give a new directory\n", o.dir.c_str());
        return 2;
    }
    std::filesystem::create_directories(o.dir);
    auto growing = rocksdb::FileSystem::Default();
    auto prezeroed = dueq::storage::prezeroed_wal_fs(rocksdb::FileSystem::Default());
    std::printf("%zu syncs of %zu B per file, %zu file(s) at once, in %s\n", o.syncs, o.bytes,
                o.files, o.dir.c_str());
    std::printf("round  growing wall/cpu us  pre-zeroed wall/cpu us  ratio wall/cpu\n");
    Cost g_sum, z_sum;
    for (std::size_t r = 0; r < o.rounds; ++r) {
        const Cost g = run_round(*growing, o, "growing", int(r));
        const Cost z = run_round(*prezeroed, o, "prezeroed", int(r));
        std::printf("%5zu  %9.1f %9.1f  %11.1f %9.1f  %7.2f %5.2f\n", r + 1, g.wall_us, g.cpu_us,
                    z.wall_us, z.cpu_us, z.wall_us / g.wall_us, z.cpu_us / g.cpu_us);
        std::fflush(stdout);
        g_sum.wall_us += g.wall_us;
        g_sum.cpu_us += g.cpu_us;
        z_sum.wall_us += z.wall_us;
        z_sum.cpu_us += z.cpu_us;
    }
    std::printf("all    %9.1f %9.1f  %11.1f %9.1f  %7.2f %5.2f\n", g_sum.wall_us / double(o.rounds),
                g_sum.cpu_us / double(o.rounds), z_sum.wall_us / double(o.rounds),
                z_sum.cpu_us / double(o.rounds), z_sum.wall_us / g_sum.wall_us,
                z_sum.cpu_us / g_sum.cpu_us);
    std::filesystem::remove_all(o.dir);
    return 0;
}
