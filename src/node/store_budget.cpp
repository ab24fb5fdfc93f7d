#include "node/store_budget.h"

#include <unistd.h>

#include <algorithm>

#include <cstdio>

#include "wire/limits.h"

namespace dueq::node {

namespace {
std::string human_bytes(std::uint64_t bytes) {
    const bool large = bytes >= (std::uint64_t{1} << 30);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.2f %s", double(bytes) / double(large ? 1 << 30 : 1 << 20),
                  large ? "GiB" : "MiB");
    return buf;
}

// Bytes `cmd` adds given what the store holds now: what a put replaces and the payload
// an ack replaces are given back.
std::uint64_t exact_growth(const queue::Store& store, const queue::Command& cmd,
                           std::uint64_t bound) {
    if (const auto* put = std::get_if<queue::Put>(&cmd)) {
        const auto old = store.content_bytes(put->queue, put->key);
        if (!old) return bound;
        const std::uint64_t now = put->key.size() + put->payload.size();
        return now > *old ? now - *old : 0;
    }
    if (const auto* ack = std::get_if<queue::Ack>(&cmd)) {
        const auto old = store.content_bytes(ack->queue, ack->key);
        if (!old) return 0;  // not_found: nothing changes
        const std::uint64_t now = ack->key.size() + (ack->payload ? ack->payload->size() : 0);
        return now > *old ? now - *old : 0;
    }
    return bound;
}
}  // namespace

std::uint64_t StoreBudget::growth_bound(const queue::Command& cmd) {
    if (const auto* put = std::get_if<queue::Put>(&cmd))
        return kTaskOverheadBytes + put->key.size() + put->payload.size();
    if (const auto* ack = std::get_if<queue::Ack>(&cmd))
        return ack->payload ? ack->payload->size() : 0;
    return 0;
}

std::variant<std::uint64_t, std::string> StoreBudget::admit(const queue::Store& store,
                                                            const queue::Command& cmd) {
    const std::uint64_t bound = growth_bound(cmd);
    if (bound == 0) return std::uint64_t{0};
    const std::uint64_t used = store.memory_bytes() + in_flight_;
    const std::uint64_t region_room =
        store.region_limit_bytes() -
        std::min<std::uint64_t>(store.region_limit_bytes(),
                                store.region_bytes() + kRegionMarginBytes);
    std::uint64_t growth = bound;
    // Near a wall, what the write replaces counts too (one lookup, only then).
    if (used + bound > limit_ || bound > region_room) growth = exact_growth(store, cmd, bound);
    if (growth == 0) return std::uint64_t{0};
    if (used + growth > limit_)
        return "the store is full: its tasks take " + human_bytes(used) + " of the " +
               human_bytes(limit_) +
               " budget ([limits] max_store_bytes, docs/config.md); deletes and acks still "
               "work; not applied";
    if (growth > region_room)
        return "the store's task records are " + human_bytes(store.region_bytes()) + " of their " +
               human_bytes(store.region_limit_bytes()) +
               " range (docs/config.md); deletes and acks still work; not applied";
    in_flight_ += growth;
    return growth;
}

std::uint64_t effective_store_budget(std::uint64_t configured, bool set, std::uint64_t ram_bytes) {
    if (set || ram_bytes == 0) return configured;
    return std::max<std::uint64_t>(limits::kMaxStoreBytes.min, std::min(configured, ram_bytes / 2));
}

std::uint64_t physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : 0;
}

}  // namespace dueq::node
