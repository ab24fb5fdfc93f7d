#include "node/backups.h"

#include "wire/limits.h"

namespace dueq::node {

bool Backups::reserve() {
    if (streams_.size() + reserved_ >= limits::kMaxBackups) return false;
    ++reserved_;
    return true;
}

void Backups::unreserve() {
    if (reserved_ > 0) --reserved_;
}

std::optional<Backups::Chunk> Backups::begin(std::shared_ptr<const storage::Checkpoint> cp,
                                             std::uint64_t owner, std::int64_t now,
                                             std::string& problem) {
    unreserve();
    Stream s;
    s.owner = owner;
    s.checkpoint = cp;
    s.reader = std::make_unique<storage::Checkpoint::Reader>(cp);
    s.last_asked = now;
    Chunk c;
    c.backup = next_id_++;
    c.meta = cp->meta();
    c.data = s.reader->store_meta();
    if (auto st = s.reader->status(); !st.ok) {
        problem = st.message;
        return std::nullopt;
    }
    streams_.emplace(c.backup, std::move(s));
    return c;
}

std::optional<Backups::Chunk> Backups::next(std::uint64_t backup, std::uint64_t owner,
                                            std::uint32_t seq, std::int64_t now,
                                            std::string& problem) {
    auto it = streams_.find(backup);
    if (it == streams_.end() || it->second.owner != owner) {
        problem = "no backup " + std::to_string(backup) +
                  " on this connection (it ended, was idle for over " +
                  std::to_string(limits::kBackupIdleMs / 1000) +
                  " s, or another connection started it): start a new one";
        return std::nullopt;
    }
    Stream& s = it->second;
    if (seq != s.next_seq) {
        problem = "backup " + std::to_string(backup) + " expected chunk " +
                  std::to_string(s.next_seq) + ", not " + std::to_string(seq) +
                  "; the backup is dropped: start a new one";
        streams_.erase(it);
        return std::nullopt;
    }
    Chunk c;
    c.backup = backup;
    c.seq = seq;
    c.meta = s.checkpoint->meta();
    c.last = !s.reader->next(c.data, limits::kBackupChunkBytes);
    if (auto st = s.reader->status(); !st.ok) {
        problem = st.message;
        streams_.erase(it);
        return std::nullopt;
    }
    s.last_asked = now;
    ++s.next_seq;
    if (c.last) {
        streams_.erase(it);
        ++completed_;
    }
    return c;
}

void Backups::end_owner(std::uint64_t owner) {
    std::erase_if(streams_, [owner](const auto& kv) { return kv.second.owner == owner; });
}

void Backups::sweep(std::int64_t now) {
    std::erase_if(streams_, [now](const auto& kv) {
        return now - kv.second.last_asked >= limits::kBackupIdleMs;
    });
}

}  // namespace dueq::node
