// What the parts of Database share (database.cpp, database_load.cpp): the column families
// and the meta keys. Internal to src/storage.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <rocksdb/slice.h>

#include "storage/be64.h"

namespace dueq::storage::db {

enum Cf { kDefault = 0, kLog = 1, kMeta = 2, kTasks = 3, kOverlay = 4 };
inline const char* const kCfNames[] = {"default", "log", "meta", "tasks", "overlay"};
inline constexpr std::string_view kAppliedKey = "applied";
inline constexpr std::string_view kStoreMetaKey = "store";
inline constexpr std::string_view kHardStateKey = "hardstate";
inline constexpr std::string_view kLogBaseKey = "logbase";
inline constexpr std::string_view kMemberKey = "member";
// Everything below the first task key's 2-byte queue length (queue names are < 64 KiB).
inline constexpr std::string_view kTasksEnd = "\xff\xff\xff";

inline std::string index_key(std::uint64_t index) {
    std::string k;
    put_be64(k, index);
    return k;
}
inline rocksdb::Slice slice(std::string_view s) {
    return rocksdb::Slice(s.data(), s.size());
}

}  // namespace dueq::storage::db
