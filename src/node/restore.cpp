#include "node/restore.h"

#include <filesystem>

#include "storage/database.h"

namespace dueq::node {

std::optional<std::string> restore_backup(
    const Config& config, const std::string& file, RestoreSummary& out,
    const std::function<void(std::uint64_t read, std::uint64_t total)>& progress) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(config.data_dir, ec) && !fs::is_empty(config.data_dir, ec))
        return "refusing to restore into " + config.data_dir +
               ": it is not empty (a restore seeds a fresh data dir; move the old one away "
               "first)";
    storage::BackupFileReader reader;
    if (!reader.open(file)) return reader.error();
    out.header = reader.header();
    out.file_bytes = reader.file_bytes();

    storage::SnapshotInstall snap;
    std::string chunk, store_meta;
    bool first = true;
    while (reader.next(chunk)) {
        if (first) {
            store_meta = std::move(chunk);
            first = false;
        } else if (!storage::split_pairs(chunk, snap.tasks)) {
            return file + ": a chunk holds malformed records";
        }
        if (progress) progress(reader.read_bytes(), reader.file_bytes());
    }
    if (!reader.done()) return reader.error();
    if (first) return file + ": it holds no store-wide record";
    if (snap.tasks.size() != reader.tasks())
        return file + ": it holds " + std::to_string(snap.tasks.size()) +
               " records but its end record says " + std::to_string(reader.tasks());

    // Decoded as a follower decodes a snapshot it is sent, so that the node can load what
    // is written; written back without the backup's membership.
    snap.store_meta_sealed = std::move(store_meta);
    auto check = storage::store_of(snap);
    if (!check) return file + ": a record does not decode";
    check->set_membership(std::string());
    snap.store_meta_sealed = storage::seal_store_meta(check->encode_meta());
    snap.meta =
        raft::SnapshotMeta{out.header.index, out.header.term, raft::Millis(out.header.time)};
    snap.hard_state = raft::HardState{out.header.term, raft::kNoNode, out.header.index};
    out.tasks = snap.tasks.size();

    fs::create_directories(config.data_dir, ec);
    if (ec) return "cannot create " + config.data_dir + ": " + ec.message();
    storage::Status st;
    auto db = storage::Database::open(config.data_dir, true, st);
    if (!db) return "opening " + config.data_dir + ": " + st.message;
    if (st = db->install(snap); !st.ok) return "writing " + config.data_dir + ": " + st.message;
    if (st = db->flush(); !st.ok) return "flushing " + config.data_dir + ": " + st.message;
    return std::nullopt;
}

}  // namespace dueq::node
