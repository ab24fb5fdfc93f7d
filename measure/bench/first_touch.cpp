// dueq-first-touch: what the first write to fresh memory costs on this machine, in 4 KiB pages
// and in transparent huge pages, beside memory the process gave back a moment before. On
// the VMs dueq is measured on, a fresh huge page cost up to six times what the same bytes
// cost in 4 KiB pages, because the host backs it anew; memtable slabs use plain pages for
// that reason (src/storage/sorted_flush_memtable.cpp, docs/benchmarks.md).
//
//   dueq-first-touch [MIB] [ROUNDS]      defaults: 256 MiB, 3 rounds
//
// Each round maps MIB afresh, writes one byte per 4 KiB page and times it, unmaps, and
// does it again at once (the memory just given back); for plain pages, then for pages
// advised MADV_HUGEPAGE. Prints GB/s for each.
#include <sys/mman.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kHuge = std::size_t{2} << 20;

// Maps `bytes` afresh (aligned to 2 MiB, so that advised huge pages are whole ones), writes
// one byte per 4 KiB page, unmaps, and returns GB/s; 0 if the mapping failed.
double first_write(std::size_t bytes, bool huge) {
    void* raw = ::mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        std::perror("dueq-first-touch: mmap");
        return 0;
    }
    char* p = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw) + kHuge - 1) &
                                      ~(kHuge - 1));
    if (huge && ::madvise(p, bytes, MADV_HUGEPAGE) != 0) std::perror("dueq-first-touch: madvise");
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < bytes; i += kPage)
        p[i] = 1;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    ::munmap(raw, bytes + kHuge);
    return double(bytes) / took.count() / 1e9;
}

// Twice: the second mapping gets the memory the first gave back a moment before.
bool measure(std::size_t bytes, bool huge) {
    const double fresh = first_write(bytes, huge);
    const double again = fresh > 0 ? first_write(bytes, huge) : 0;
    if (again == 0) return false;
    std::printf("  %-10s %6.2f GB/s, then %6.2f GB/s in memory just given back\n",
                huge ? "huge pages" : "4 KiB", fresh, again);
    return true;
}

std::size_t parse(const char* s, const char* what) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(s, &end, 10);
    if (end == s || *end != '\0' || v == 0 || v > (1ul << 20)) {
        std::fprintf(stderr, "dueq-first-touch: %s must be a whole number from 1 to 1048576, not '%s'\n",
                     what, s);
        std::exit(2);
    }
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
        std::printf(
            "dueq-first-touch [MIB] [ROUNDS]: GB/s of the first write to freshly mapped memory (one\n"
            "byte per 4 KiB page), in plain pages and in transparent huge pages\n"
            "(MADV_HUGEPAGE), then again in the memory that mapping just gave back.\n"
            "Defaults: 256 MiB, 3 rounds. On a VM whose host takes back free memory, fresh\n"
            "huge pages are slow until the host backs them again.\n");
        return 0;
    }
    if (argc > 3) {
        std::fprintf(stderr, "dueq-first-touch: at most two arguments (MIB, ROUNDS); see --help\n");
        return 2;
    }
    const std::size_t mib = argc > 1 ? parse(argv[1], "MIB") : 256;
    const std::size_t rounds = argc > 2 ? parse(argv[2], "ROUNDS") : 3;
    for (std::size_t r = 1; r <= rounds; ++r) {
        std::printf("round %zu, %zu MiB:\n", r, mib);
        if (!measure(mib << 20, false) || !measure(mib << 20, true)) return 1;
    }
    return 0;
}
