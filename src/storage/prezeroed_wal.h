// A RocksDB file system whose write-ahead log files are written with zeros ahead of the
// log, so that each synced append overwrites blocks the file already has.
//
// Why: on ext4, an fdatasync after an append that grows the file must also write the
// inode (the new size, and the extent that turns from unwritten to written), which is a
// second device write per sync. Overwriting blocks that already hold data needs only the
// data and the cache flush. On this project's test machine, a 4 KiB append and
// fdatasync cost 294 µs and 113 µs of CPU; the same write over zeros, 191 µs and 66 µs
// (measure/sync-cost, docs/benchmarks.md). The Raft log is synced once per write batch, so this is paid on
// every answered write with `storage.fsync = always`.
//
// How: a WAL file (a name `<digits>.log`, as RocksDB names them) is opened by this file
// system, not RocksDB's. It keeps at least kZeroChunk bytes past the appended end written
// with zeros: when an append would come closer, the next chunk is written and its
// write-back started at once (sync_file_range), so that the sync that follows does not
// wait for a whole chunk; that sync writes the inode, once per chunk. Appends then write
// in place; a clean close truncates the file to what was appended.
//
// After a crash the file keeps its zero tail. RocksDB's log reader reads an all-zero
// block header as a record of the type reserved for preallocated files and skips the
// rest of that block without reporting a corruption, so recovery ends at the last
// record (tests/storage/prezeroed_wal_test.cpp, and the crash tests, which kill dueqd
// with SIGKILL). A record torn by
// the crash is followed by zeros instead of the end of the file; its checksum fails and
// point-in-time recovery (RocksDB's default, which dueq keeps) ends the log there, as it
// does at a torn end of file.
//
// Every other file goes to the wrapped file system unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <rocksdb/file_system.h>

namespace dueq::storage {

inline constexpr std::uint64_t kZeroChunk = 1u << 20;

std::shared_ptr<rocksdb::FileSystem> prezeroed_wal_fs(std::shared_ptr<rocksdb::FileSystem> base);

// True for a RocksDB write-ahead log file name ("/dir/000123.log").
bool is_wal_file_name(const std::string& path);

}  // namespace dueq::storage
