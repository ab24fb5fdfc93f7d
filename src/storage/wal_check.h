// Finds a damaged record inside the written part of RocksDB's WAL before RocksDB opens it.
//
// dueq opens RocksDB with point-in-time recovery (docs/internals/storage.md §3.1): replay
// stops at the first record whose checksum fails and the node opens with what came
// before. That is right for a write torn by a kill or a power cut, which nobody was told
// of, and wrong for a byte flipped inside records that were synced and acknowledged: the
// node would come back with a shorter log than it promised, silently.
//
// The two leave different traces. Everything synced is on disk, so a write that was lost
// leaves the pre-zeroed file's zeros behind it: an all-zero 512-byte sector, an all-zero
// record header, or the end of the file, between the bad record and whatever comes next.
// A flipped byte leaves a record whose checksum fails with no such gap, followed by
// records that are whole. So: a bad stretch followed by a whole record, with no zeros or
// file end between them, is damage.
//
// What it cannot see: a flip in the last records of the WAL (nothing whole follows, as
// after a torn write), and a flip inside a record whose payload holds a zero sector.
#pragma once

#include <string>

#include "storage/database.h"

namespace dueq::storage {

// Scans every WAL file (`<digits>.log`) in `dir`, oldest first. An error names the file
// and offset of the damaged record; its message says "Corruption", as RocksDB's do.
Status check_wal(const std::string& dir);

}  // namespace dueq::storage
