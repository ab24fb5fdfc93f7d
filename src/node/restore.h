// dueqd --restore: seeds a fresh data dir from a backup file (storage/backup_file.h;
// docs/operations.md, "Backing up").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "node/config.h"
#include "storage/backup_file.h"

namespace dueq::node {

struct RestoreSummary {
    storage::BackupHeader header;
    std::uint64_t tasks = 0, file_bytes = 0;
};

// Writes the backup at `file` into config.data_dir, which must be absent or empty, as the
// applied state at the backup's index: the node then starts from it as from a snapshot
// its leader sent. Every checksum is checked and every record decoded before anything is
// written. The membership the backup holds is left out, so the restored node's comes from
// its config's [cluster] members as at a first start: every member of a new cluster is
// restored from the same file before any of them starts (or one is, and the others join
// it). `progress(read, total)` hears how much of the file was read. Returns why not.
std::optional<std::string> restore_backup(
    const Config& config, const std::string& file, RestoreSummary& out,
    const std::function<void(std::uint64_t read, std::uint64_t total)>& progress = {});

}  // namespace dueq::node
