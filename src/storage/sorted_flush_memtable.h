// A RocksDB memtable for the column families that one thread appends to and that are read
// in order once, when the memtable is flushed (or by a restart or a checkpoint): the log
// and the task records.
//
// Inserts append to a vector, as RocksDB's VectorRep does, and the first iterator sorts
// it. What differs is the sort: each key is first compared by an 8-byte integer taken from
// its user key just after the bytes that every key in the memtable shares, so that most
// comparisons touch neither record; only keys whose integers tie are compared in full.
// With VectorRep the flush's sort was about a third of the CPU of writing log entries and
// task records (measure/log-write, docs/benchmarks.md). A memtable of log entries, which
// arrive in index order, is not sorted at all.
//
// Entries are kept in this memtable's own 2 MiB slabs instead of RocksDB's arena, whose
// blocks are fresh memory for every memtable: the factory can keep freed memtables' slabs,
// faulted in already, for the next ones (keep_freed_slabs).
//
// An iterator over a memtable still being written sorts a copy of its keys; a point
// lookup scans it (dueq reads these column families by iterator only, and RocksDB's
// default lookup would leak an iterator per call).
//
// The integer order is the byte order of the user keys, so the column family must use
// RocksDB's default (bytewise) comparator.
#pragma once

#include <cstddef>
#include <memory>

#include <rocksdb/memtablerep.h>

namespace dueq::storage {

class SlabPool;

class SortedFlushMemTableFactory final : public rocksdb::MemTableRepFactory {
  public:
    explicit SortedFlushMemTableFactory(std::size_t slab_bytes);
    ~SortedFlushMemTableFactory() override;
    const char* Name() const override { return "DueqSortedFlushMemTable"; }
    using MemTableRepFactory::CreateMemTableRep;
    rocksdb::MemTableRep* CreateMemTableRep(const rocksdb::MemTableRep::KeyComparator& compare,
                                            rocksdb::Allocator* allocator,
                                            const rocksdb::SliceTransform*,
                                            rocksdb::Logger*) override;

    // From now on, slabs of freed memtables, up to `bytes` of them, are kept for the next
    // memtables instead of going back to the system (none are at first). A slab whose
    // pages are all in use already costs no page faults and no zeroing by the kernel. The
    // price is that much memory held while no memtable needs it.
    void keep_freed_slabs(std::size_t bytes);
    std::size_t kept_slab_bytes() const;

  private:
    std::shared_ptr<SlabPool> pool_;  // shared with the memtables, which may outlive this
};

// `slab_bytes` (4 KiB to 2 MiB): the size of the slabs entries are kept in. Each counts
// in full towards the memtable's size as soon as it is taken, as RocksDB's arena blocks
// do, so it should be well under the write buffer size (RocksDB's blocks are an eighth
// of it). The default suits RocksDB's default 64 MiB write buffer.
std::shared_ptr<SortedFlushMemTableFactory> sorted_flush_memtable(
    std::size_t slab_bytes = std::size_t{2} << 20);

}  // namespace dueq::storage
