// A restart's load (Store::Loader) and the bulk linking of what it loads (BulkLinks).
#include "queue/store_loader.h"

#include <algorithm>
#include <tuple>

#include "queue/store_impl.h"

namespace dueq::queue {

namespace {
// Loads smaller than this fault their memory in as they go: setting slabs aside pays
// only when there are hundreds of them.
constexpr std::size_t kPrefaultFrom = 64u << 20;
// Records: enough to cover a memory access.
constexpr std::size_t kPrefetchAhead = 8;
}  // namespace

// ---------------------------------------------------------------- Store::Loader

Store::Loader::Loader(Store& store, std::size_t tasks, std::size_t record_bytes)
    : store_(store), links_(std::make_unique<detail::BulkLinks>(tasks)) {
    detail::StoreState& s = *store_.impl_;
    s.table.reserve(tasks);
    s.bulk = links_.get();
    // A record in memory has a larger header than on disk: set aside a quarter more.
    if (record_bytes >= kPrefaultFrom) s.arena.reserve_spares(record_bytes / 4 * 5);
}

Store::Loader::~Loader() {
    finish();
}

bool Store::Loader::meta(std::string_view encoded) {
    return store_.impl_->load_meta(encoded);
}

bool Store::Loader::task(std::string_view queue, std::string_view key, std::string_view encoded) {
    return store_.impl_->load_task(queue, key, encoded);
}

bool Store::Loader::tasks(std::span<const Record> records) {
    const detail::StoreState& s = *store_.impl_;
    for (std::size_t i = 0; i < records.size(); ++i) {
        // The table slot is what installing a task reads first.
        if (i + kPrefetchAhead < records.size()) {
            const Record& next = records[i + kPrefetchAhead];
            if (const detail::Queue* q = s.find_queue(next.queue))
                s.table.prefetch(q->id, next.key);
        }
        if (!task(records[i].queue, records[i].key, records[i].encoded)) return false;
    }
    return true;
}

void Store::Loader::prefault() {
    // 64 MiB ahead: a reader hands over about 1 MiB of records at a time, and the memory
    // faulted in but never used stays small.
    store_.impl_->arena.prefault_spares(32);
}

void Store::Loader::finish() {
    if (!links_) return;
    detail::StoreState& s = *store_.impl_;
    s.arena.drop_spares();
    links_->link_all(s);
    s.bulk = nullptr;
    links_.reset();
}

namespace detail {

// ---------------------------------------------------------------- BulkLinks

BulkLinks::BulkLinks(std::size_t tasks) {
    tasks_.reserve(std::min<std::size_t>(tasks, std::size_t{1} << 26));
    items_.reserve(tasks_.capacity());
}

void BulkLinks::add(StoreState& s, Task* t) {
    if (tasks_.size() >= UINT32_MAX) link_all(s);  // an item's seq is 32 bits
    const bool by_time = t->state() == State::ready || t->state() == State::buried;
    items_.push_back({by_time ? t->time : t->aux, std::uint32_t(tasks_.size()),
                      std::uint16_t(t->queue_id), std::uint8_t(t->state())});
    tasks_.push_back(t);
}

void BulkLinks::link_all(StoreState& s) {
    if (tasks_.empty()) return;
    auto& items = items_;
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
        return std::tie(a.queue_id, a.state, a.at, a.seq) <
               std::tie(b.queue_id, b.state, b.at, b.seq);
    });
    // Each run of items with one queue and state fills one tree. An empty tree (usually,
    // in a restart) is built from the run at once if the run is in the tree's order (ties
    // on time are in load order, which is key order when RocksDB hands the records).
    // Otherwise the tasks go in one by one, each most likely last. In time order the tasks
    // are all over memory: the pointer of each is asked for a few items ahead, and the
    // tree's build asks for the tasks themselves.
    constexpr std::size_t kAhead = 8;
    auto same_tree = [&](std::size_t a, std::size_t b) {
        return items[a].queue_id == items[b].queue_id && items[a].state == items[b].state;
    };
    // Room for the longest run only: one per task would be 8 more bytes per task at peak.
    std::size_t longest = 0;
    for (std::size_t begin = 0, i = 0; i <= items.size(); ++i)
        if (i == items.size() || !same_tree(i, begin)) {
            longest = std::max(longest, i - begin);
            begin = i;
        }
    std::vector<Task*, HugePageAllocator<Task*>> run;
    run.reserve(longest);
    for (std::size_t begin = 0; begin < items.size();) {
        std::size_t end = begin;
        run.clear();
        for (; end < items.size() && same_tree(end, begin); ++end) {
            if (end + kAhead < items.size()) __builtin_prefetch(&tasks_[items[end + kAhead].seq]);
            run.push_back(tasks_[items[end].seq]);
        }
        StoreState::with_tree(*s.queues[items[begin].queue_id], State(items[begin].state),
                              [&](auto& tree) {
                                  if (tree.assign_sorted(run.data(), run.size())) return;
                                  for (Task* t : run)
                                      tree.insert(tree.end(), *t);
                              });
        begin = end;
    }
    decltype(run)().swap(run);
    decltype(tasks_)().swap(tasks_);
    decltype(items_)().swap(items_);
    for (auto& q : s.queues)
        if (q) s.update_calendar(*q);
}

}  // namespace detail

}  // namespace dueq::queue
