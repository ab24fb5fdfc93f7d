#include "storage/sorted_flush_memtable.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <rocksdb/slice.h>
#include <rocksdb/version.h>

#include "common/huge_pages.h"

namespace dueq::storage {
namespace {

using rocksdb::MemTableRep;
using rocksdb::Slice;
constexpr std::size_t kMaxSlabBytes = std::size_t{2} << 20;

// A memtable's array of entry pointers grows to a few MiB by doubling, and malloc would
// map each size afresh in 4 KiB pages, each faulting on its first write: from 1 MiB on,
// huge pages.
template <class T>
using EntryArrayAllocator = HugePageAllocator<T, std::size_t{1} << 20>;

using Keys = std::vector<const char*, EntryArrayAllocator<const char*>>;
using KeyComparator = MemTableRep::KeyComparator;

// A memtable entry is a varint32-prefixed internal key (the user key, then 8 bytes of
// sequence number and type), then the value.
Slice user_key(const char* entry) {
    const Slice internal = rocksdb::GetLengthPrefixedSlice(entry);
    return Slice(internal.data(), internal.size() - 8);
}

// Up to 8 bytes of `user` from `from` on, big-endian, zero-padded: a key that ends early
// ties with one that goes on with zero bytes, and the full comparison decides between them.
std::uint64_t order_word(const Slice& user, std::size_t from) {
    std::uint64_t w = 0;
    const std::size_t n = std::min<std::size_t>(8, user.size() - from);
    for (std::size_t i = 0; i < n; ++i)
        w |= std::uint64_t(std::uint8_t(user[from + i])) << (56 - 8 * i);
    return w;
}

// The memtable key (length-prefixed internal key) a point lookup looks for. RocksDB's
// LookupKey is not in its public headers; since LevelDB it has begun with three pointers:
// the memtable key, the internal key inside it, and their end. They are used only when
// they agree with each other; otherwise nullptr.
static_assert(ROCKSDB_MAJOR == 7,
              "check rocksdb::LookupKey's layout (db/lookup_key.h) and whether "
              "MemTableRep::Get still leaks its iterator before building against this RocksDB");
const char* lookup_memtable_key(const rocksdb::LookupKey& k) {
    const char* const* fields = reinterpret_cast<const char* const*>(&k);
    const char* start = fields[0];
    const char* internal = fields[1];
    const char* end = fields[2];
    if (start == nullptr || internal <= start || internal - start > 5 || end < internal + 8 ||
        end - internal > (std::ptrdiff_t(1) << 31))
        return nullptr;
    const Slice s = rocksdb::GetLengthPrefixedSlice(start);
    return s.data() == internal && s.data() + s.size() == end ? start : nullptr;
}

// Where a sort puts an entry, mostly without reading it again: `word` holds the user key's
// 8 bytes after those every key shares. When a key has no bytes beyond those 8 (`rest`
// is how many it has after the shared ones), two keys with equal words and lengths are
// the same user key, and `rank` orders their versions as RocksDB does, newest first. So
// a key written again within a memtable, as a put and its later ack are, is placed
// without two cache misses for a full comparison.
struct SortItem {
    std::uint64_t word;
    std::uint64_t rank;  // ~(sequence << 8 | type)
    const char* entry;
    std::uint8_t rest;  // user key bytes after the shared ones; kLong when more than 8
    static constexpr std::uint8_t kLong = 9;

    SortItem(const char* e, std::size_t shared) : entry(e) {
        const Slice user = user_key(e);
        word = order_word(user, shared);
        rest = std::uint8_t(std::min<std::size_t>(user.size() - shared, kLong));
        std::uint64_t packed = 0;  // the 8 bytes after the user key, little-endian
        for (int i = 7; i >= 0; --i)
            packed = packed << 8 | std::uint8_t(user.data()[user.size() + std::size_t(i)]);
        rank = ~packed;
    }
};

// Sorts `keys` as `compare` orders them; every user key starts with the same `shared` bytes.
void sort_keys(Keys& keys, std::size_t shared, const KeyComparator& compare) {
    std::vector<SortItem, EntryArrayAllocator<SortItem>> items;
    items.reserve(keys.size());
    for (const char* e : keys)
        items.emplace_back(e, shared);
    auto less = [&compare](const SortItem& a, const SortItem& b) {
        if (a.word != b.word) return a.word < b.word;
        if (a.rest < SortItem::kLong && b.rest < SortItem::kLong) {
            // Equal words: the shorter key is a prefix of the other (its zero padding is
            // the other's zero bytes), or both are the same key.
            if (a.rest != b.rest) return a.rest < b.rest;
            return a.rank < b.rank;
        }
        return compare(a.entry, b.entry) < 0;
    };
    // Log entries arrive in index order.
    if (std::is_sorted(items.begin(), items.end(), less)) return;
    std::sort(items.begin(), items.end(), less);
    for (std::size_t i = 0; i < items.size(); ++i)
        keys[i] = items[i].entry;
}

class SortedIterator final : public MemTableRep::Iterator {
  public:
    // Iterates `keys` (sorted), which outlive it, or `owned` when given.
    SortedIterator(const Keys* keys, std::unique_ptr<Keys> owned, const KeyComparator& compare)
        : owned_(std::move(owned)),
          keys_(owned_ ? *owned_ : *keys),
          compare_(compare),
          pos_(keys_.size()) {}

    bool Valid() const override { return pos_ < keys_.size(); }
    const char* key() const override { return keys_[pos_]; }
    void Next() override {
        ++pos_;
        // Sorted keys of random writes lie all over the slabs, and a flush reads each entry
        // right after stepping to it: waiting on memory there was 3% of a three-node put
        // run's CPU. Ask for the entry a few steps ahead (its key and the value's start).
        if (pos_ + kAhead < keys_.size()) {
            const char* ahead = keys_[pos_ + kAhead];
            __builtin_prefetch(ahead);
            __builtin_prefetch(ahead + 64);
        }
    }
    void Prev() override { pos_ = pos_ == 0 ? keys_.size() : pos_ - 1; }
    void SeekToFirst() override { pos_ = 0; }
    void SeekToLast() override { pos_ = keys_.empty() ? 0 : keys_.size() - 1; }

    void Seek(const Slice& internal_key, const char* memtable_key) override {
        pos_ = lower_bound(internal_key, memtable_key);
    }
    void SeekForPrev(const Slice& internal_key, const char* memtable_key) override {
        pos_ = lower_bound(internal_key, memtable_key);
        if (Valid() && compare(keys_[pos_], internal_key, memtable_key) == 0) return;
        Prev();  // from the first key: not valid; from past the end: the last key
    }

  private:
    int compare(const char* entry, const Slice& internal_key, const char* memtable_key) const {
        return memtable_key ? compare_(entry, memtable_key) : compare_(entry, internal_key);
    }
    std::size_t lower_bound(const Slice& internal_key, const char* memtable_key) const {
        auto it = std::lower_bound(keys_.begin(), keys_.end(), 0, [&](const char* entry, int) {
            return compare(entry, internal_key, memtable_key) < 0;
        });
        return std::size_t(it - keys_.begin());
    }

    static constexpr std::size_t kAhead = 8;

    std::unique_ptr<Keys> owned_;
    const Keys& keys_;
    const KeyComparator& compare_;
    std::size_t pos_;
};

}  // namespace

// Full slabs that freed memtables gave back, kept (up to a limit) for the memtables after
// them. Fresh memory must be zeroed by the kernel on first touch, and for memtables that
// was 4% of a three-node put run's CPU (docs/benchmarks.md); a kept slab is reused as it
// is. Memtables are made on the writing thread and freed on whichever drops the last
// reference: a mutex, taken once per slab.
class SlabPool {
  public:
    explicit SlabPool(std::size_t slab) : slab_(slab) {}
    SlabPool(const SlabPool&) = delete;
    SlabPool& operator=(const SlabPool&) = delete;
    ~SlabPool() { keep(0); }

    std::size_t slab() const { return slab_; }
    char* take() {
        {
            std::lock_guard lock(mu_);
            if (!kept_.empty()) {
                char* p = kept_.back();
                kept_.pop_back();
                return p;
            }
        }
        return Blocks{}.allocate(slab_);
    }
    void give(char* p) {
        {
            std::lock_guard lock(mu_);
            if ((kept_.size() + 1) * slab_ <= limit_) {
                kept_.push_back(p);
                return;
            }
        }
        Blocks{}.deallocate(p, slab_);
    }
    // From now on keeps up to `bytes` of slabs; frees what is kept beyond.
    void keep(std::size_t bytes) {
        std::vector<char*> drop;
        {
            std::lock_guard lock(mu_);
            limit_ = bytes;
            while (!kept_.empty() && kept_.size() * slab_ > limit_) {
                drop.push_back(kept_.back());
                kept_.pop_back();
            }
        }
        for (char* p : drop)
            Blocks{}.deallocate(p, slab_);
    }
    std::size_t kept_bytes() const {
        std::lock_guard lock(mu_);
        return kept_.size() * slab_;
    }

    // Plain pages, not huge ones: on the VMs dueq is measured on, the first write to a
    // fresh huge page cost up to six times what the same bytes cost in 4 KiB pages (the host
    // backs a huge page, returned to it whenever free, anew), and slabs are fresh until
    // the first memtables are freed: with huge pages, a three-node put 64 x 1 run spent
    // 17% of the leader's storage thread zeroing them (docs/benchmarks.md).
    struct Blocks {
        static char* allocate(std::size_t n) { return static_cast<char*>(::operator new(n)); }
        static void deallocate(char* p, std::size_t) { ::operator delete(p); }
    };

  private:
    const std::size_t slab_;
    mutable std::mutex mu_;
    std::vector<char*> kept_;
    std::size_t limit_ = 0;
};

namespace {

// Memory for one memtable's entries, in slabs of up to 2 MiB. RocksDB's own arena takes
// its blocks from malloc, fresh pages for every memtable, and the first write to each page
// faults: that was 12% of each storage thread's CPU in a three-node put run
// (docs/benchmarks.md). Full slabs come from, and go back to, the factory's pool, which
// keeps them faulted in. One writer.
class EntrySlabs {
  public:
    explicit EntrySlabs(std::shared_ptr<SlabPool> pool)
        : pool_(std::move(pool)), slab_(pool_->slab()) {}
    EntrySlabs(const EntrySlabs&) = delete;
    EntrySlabs& operator=(const EntrySlabs&) = delete;
    ~EntrySlabs() {
        for (const auto& [p, n] : blocks_)
            if (n == slab_)
                pool_->give(p);
            else
                SlabPool::Blocks{}.deallocate(p, n);
    }

    char* allocate(std::size_t n) {
        // An entry larger than an eighth of a slab gets a block of its own, so that it
        // never strands the rest of a slab.
        if (n > slab_ / 8) return keep(SlabPool::Blocks{}.allocate(n), n);
        if (n > std::size_t(end_ - next_)) {
            next_ = keep(pool_->take(), slab_);
            end_ = next_ + slab_;
        }
        char* p = next_;
        next_ += n;
        return p;
    }
    std::size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  private:
    char* keep(char* p, std::size_t bytes) {
        blocks_.emplace_back(p, bytes);
        bytes_.fetch_add(bytes, std::memory_order_relaxed);
        return p;
    }

    const std::shared_ptr<SlabPool> pool_;
    const std::size_t slab_;
    std::vector<std::pair<char*, std::size_t>> blocks_;
    char* next_ = nullptr;
    char* end_ = nullptr;
    std::atomic<std::size_t> bytes_{0};
};

class SortedFlushRep final : public MemTableRep {
  public:
    SortedFlushRep(const KeyComparator& compare, rocksdb::Allocator* allocator,
                   std::shared_ptr<SlabPool> pool)
        : MemTableRep(allocator), compare_(compare), slabs_(std::move(pool)) {}

    // Entries live in this memtable's slabs, not RocksDB's arena; they are counted in
    // ApproximateMemoryUsage, which RocksDB adds to the arena's bytes to decide a flush.
    rocksdb::KeyHandle Allocate(const size_t len, char** buf) override {
        *buf = slabs_.allocate(len);
        return static_cast<rocksdb::KeyHandle>(*buf);
    }

    void Insert(rocksdb::KeyHandle handle) override {
        const char* entry = static_cast<const char*>(handle);
        const Slice user = user_key(entry);
        std::lock_guard lock(mu_);
        assert(!read_only_);  // RocksDB's promise: nothing is added once read-only
        if (keys_.empty()) {
            first_ = user;
            shared_ = user.size();
        } else {
            std::size_t i = 0;
            const std::size_t n = std::min(shared_, user.size());
            while (i < n && first_[i] == user[i])
                ++i;
            shared_ = i;
        }
        keys_.push_back(entry);
        bytes_.store(keys_.capacity() * sizeof(const char*), std::memory_order_relaxed);
    }

    bool Contains(const char* key) const override {
        std::lock_guard lock(mu_);
        return std::any_of(keys_.begin(), keys_.end(),
                           [&](const char* e) { return compare_(e, key) == 0; });
    }

    void MarkReadOnly() override {
        std::lock_guard lock(mu_);
        read_only_ = true;
    }

    std::size_t ApproximateMemoryUsage() override {
        return sizeof(*this) + bytes_.load(std::memory_order_relaxed) + slabs_.bytes();
    }

    // RocksDB's default Get leaks the iterator it makes (7.8), and a copy of every key
    // with it here: this one makes none. It hands `callback` the versions of the user key
    // at or after the lookup key, in order, as an iterator would from a seek.
    void Get(const rocksdb::LookupKey& k, void* args,
             bool (*callback)(void* arg, const char* entry)) override {
        const char* target = lookup_memtable_key(k);
        if (target == nullptr) return MemTableRep::Get(k, args, callback);  // correct; leaks
        const Slice user = user_key(target);
        Keys versions;
        {
            std::lock_guard lock(mu_);
            if (read_only_) {
                sort_once();
                auto it = std::lower_bound(
                    keys_.begin(), keys_.end(), target,
                    [&](const char* e, const char* t) { return compare_(e, t) < 0; });
                for (; it != keys_.end() && user_key(*it) == user; ++it)
                    versions.push_back(*it);
            } else {
                // Not sorted yet: a scan, which is cheaper than sorting a copy. dueq reads
                // these column families by iterator only; this serves RocksDB's contract.
                for (const char* e : keys_)
                    if (user_key(e) == user && compare_(e, target) >= 0) versions.push_back(e);
            }
        }
        // A key's versions are few; from a read-only memtable they are in order already.
        std::sort(versions.begin(), versions.end(),
                  [&](const char* a, const char* b) { return compare_(a, b) < 0; });
        for (const char* e : versions)
            if (!callback(args, e)) return;
    }

    Iterator* GetIterator(rocksdb::Arena* arena) override {
        const Keys* keys = nullptr;
        std::unique_ptr<Keys> owned;
        std::size_t shared = 0;
        {
            std::lock_guard lock(mu_);
            if (read_only_) {
                sort_once();
                keys = &keys_;
            } else {
                owned = std::make_unique<Keys>(keys_);
                shared = shared_;
            }
        }
        if (owned) sort_keys(*owned, shared, compare_);
        if (arena == nullptr) return new SortedIterator(keys, std::move(owned), compare_);
        // RocksDB destroys an iterator made for an arena without freeing its memory, and
        // the arena's type is not in RocksDB's public headers. This memtable keeps that
        // memory and frees it with itself (the memtable's own allocator must not grow once
        // it is read-only): one iterator per flush, restart or checkpoint, each after
        // records were written. It is not counted in the memtable's size, which RocksDB
        // expects to stay as it was once the memtable is read-only.
        void* p = ::operator new(sizeof(SortedIterator));
        {
            std::lock_guard lock(mu_);
            iterator_memory_.push_back(p);
        }
        return new (p) SortedIterator(keys, std::move(owned), compare_);
    }

    ~SortedFlushRep() override {
        for (void* p : iterator_memory_)
            ::operator delete(p);
    }

  private:
    // Once read-only nothing is added any more: sort once, in place, for every reader.
    // Called with mu_ held.
    void sort_once() {
        if (!sorted_) sort_keys(keys_, shared_, compare_);
        sorted_ = true;
    }

    const KeyComparator& compare_;
    mutable std::mutex mu_;
    Keys keys_;               // in the order they were added, until sorted_
    Slice first_;             // the first key's user key (in the memtable's memory)
    std::size_t shared_ = 0;  // bytes every user key so far starts with
    bool read_only_ = false;
    bool sorted_ = false;
    std::atomic<std::size_t> bytes_{0};
    std::vector<void*> iterator_memory_;  // of iterators made for an arena, destroyed by RocksDB
    EntrySlabs slabs_;  // declared last: destroyed first, after nothing reads an entry
};

}  // namespace

SortedFlushMemTableFactory::SortedFlushMemTableFactory(std::size_t slab_bytes)
    : pool_(std::make_shared<SlabPool>(std::clamp((slab_bytes + 4095) & ~std::size_t{4095},
                                                  std::size_t{4096}, kMaxSlabBytes))) {}

SortedFlushMemTableFactory::~SortedFlushMemTableFactory() = default;

MemTableRep* SortedFlushMemTableFactory::CreateMemTableRep(const KeyComparator& compare,
                                                           rocksdb::Allocator* allocator,
                                                           const rocksdb::SliceTransform*,
                                                           rocksdb::Logger*) {
    return new SortedFlushRep(compare, allocator, pool_);
}

void SortedFlushMemTableFactory::keep_freed_slabs(std::size_t bytes) {
    pool_->keep(bytes);
}

std::size_t SortedFlushMemTableFactory::kept_slab_bytes() const {
    return pool_->kept_bytes();
}

std::shared_ptr<SortedFlushMemTableFactory> sorted_flush_memtable(std::size_t slab_bytes) {
    return std::make_shared<SortedFlushMemTableFactory>(slab_bytes);
}

}  // namespace dueq::storage
