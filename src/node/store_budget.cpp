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

// Bytes `cmd` adds given what the store holds now: a put or an ack with a payload replaces
// the content of the task it names (a put of a new key adds `bound`, its whole record).
std::uint64_t exact_growth(const queue::Store& store, const queue::Command& cmd,
                           std::uint64_t bound) {
    const auto* put = std::get_if<queue::Put>(&cmd);
    const auto* ack = std::get_if<queue::Ack>(&cmd);
    if (!put && !(ack && ack->payload)) return bound;
    const std::string& queue = put ? put->queue : ack->queue;
    const std::string& key = put ? put->key : ack->key;
    const std::uint64_t content = key.size() + (put ? put->payload : *ack->payload).size();
    const auto old = store.content_bytes(queue, key);
    if (!old) return put ? bound : 0;  // an ack of no task changes nothing (not_found)
    return content > *old ? content - *old : 0;
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
