// A RocksDB memtable for the column families that one thread appends to and that are read
// in order once, when the memtable is flushed (or by a restart or a checkpoint): the log
// and the task records.
//
// Inserts append to a vector, as RocksDB's VectorRep does, and the first iterator sorts
// it. What differs is the sort: each key is first compared by an 8-byte integer taken from
// its user key just after the bytes that every key in the memtable shares, so that most
// comparisons touch neither record; only keys whose integers tie are compared in full.
// With VectorRep the flush's sort was about a third of the CPU of writing log entries and
// task records (tools/log-write, docs/benchmarks.md). A memtable of log entries, which
// arrive in index order, is not sorted at all.
//
// An iterator over a memtable still being written sorts a copy of its keys; a point
// lookup scans it (dueq reads these column families by iterator only, and RocksDB's
// default lookup would leak an iterator per call).
//
// The integer order is the byte order of the user keys, so the column family must use
// RocksDB's default (bytewise) comparator.
#pragma once

#include <memory>

#include <rocksdb/memtablerep.h>

namespace dueq::storage {

std::shared_ptr<rocksdb::MemTableRepFactory> sorted_flush_memtable();

}  // namespace dueq::storage
