// A restart's read of the task records, on a thread of its own.
//
// Iterating ten million records out of RocksDB takes about as long as building the store
// from them. With the two on different cores a restart takes about the longer of the two
// instead of their sum. The reader copies records, still sealed, into chunks of about
// kScanChunkBytes and hands them over through at most kScanChunks of them: memory stays
// bounded whatever the size of the store, and the same chunks are reused (fresh memory
// costs a page fault per page, which is as slow as the reading). The loader checks each
// record's CRC: RocksDB's iteration is the slower side, so the reader does nothing else.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "storage/database.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
}  // namespace rocksdb

namespace dueq::storage {

inline constexpr std::size_t kScanChunkBytes = 1 << 20;
inline constexpr std::size_t kScanChunks = 4;

// Calls `each(key, body)` on this thread for every record of `cf` below `end`, in key
// order, with the record's body once its CRC checked out, a chunk of records at a time,
// and `chunk_done()` after each chunk: until then the views `each` was given stay valid.
// Stops at the first record whose CRC fails, or when `each` or `chunk_done` returns
// false; either is a corrupt record, and the answer says so.
struct ScanCalls {
    std::function<bool(std::string_view key, std::string_view body)> each;
    std::function<bool()> chunk_done;
    // On the reading thread, after it hands over a chunk, when it is ahead of the loader.
    std::function<void()> between_chunks;
};
Status scan_task_records(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view end,
                         const ScanCalls& calls);

}  // namespace dueq::storage
