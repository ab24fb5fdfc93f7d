#include "node/snapshot_transfer.h"

#include <spdlog/spdlog.h>

#include "raft/message_check.h"

namespace dueq::node {
namespace {

constexpr std::size_t kChunkBytes = 1u << 20;
constexpr std::size_t kMaxQueuedBytes = 8u << 20;
constexpr std::size_t kHeaderBytes = 1 + 8 * 4 + 4 + 1;

void put_be(std::string& out, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i)
        out.push_back(char(v >> (8 * i)));
}
std::uint64_t get_be(std::string_view s, std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
        v = (v << 8) | static_cast<unsigned char>(s[at + i]);
    return v;
}

std::string header(raft::Term term, const raft::SnapshotMeta& meta, std::uint32_t seq, bool last) {
    std::string h;
    h.reserve(kChunkBytes + 4096);
    h.push_back(SnapshotTransfer::kKind);
    put_be(h, term, 8);
    put_be(h, meta.index, 8);
    put_be(h, meta.term, 8);
    put_be(h, meta.time, 8);
    put_be(h, seq, 4);
    h.push_back(last ? 1 : 0);
    return h;
}

}  // namespace

void SnapshotTransfer::start_send(const raft::Message& m,
                                  std::shared_ptr<const storage::Checkpoint> cp) {
    auto it = out_.find(m.to);
    if (it != out_.end() && it->second.checkpoint->meta() == cp->meta() &&
        it->second.message.term == m.term)
        return;
    Outgoing o;
    o.message = m;
    o.message.snapshot->meta = cp->meta();
    o.reader = std::make_unique<storage::Checkpoint::Reader>(cp);
    o.checkpoint = std::move(cp);
    spdlog::info("sending snapshot at index {} to peer {}", o.checkpoint->meta().index, m.to);
    out_[m.to] = std::move(o);
}

void SnapshotTransfer::pump(const Send& send, const QueuedBytes& queued) {
    for (auto it = out_.begin(); it != out_.end();) {
        const std::uint64_t peer = it->first;
        Outgoing& o = it->second;
        bool failed = false;
        while (!o.done && queued(peer) < kMaxQueuedBytes) {
            std::string chunk;
            bool more = true;
            if (o.next_seq == 0) {
                chunk = header(o.message.term, o.checkpoint->meta(), 0, false);
                chunk += o.reader->store_meta();
                if (!o.reader->status().ok) {
                    spdlog::error("snapshot to peer {}: {}", peer, o.reader->status().message);
                    failed = true;
                    break;
                }
            } else {
                chunk = header(o.message.term, o.checkpoint->meta(), o.next_seq, false);
                more = o.reader->next(chunk, kChunkBytes);
                if (!o.reader->status().ok) {
                    spdlog::error("snapshot to peer {}: {}", peer, o.reader->status().message);
                    failed = true;
                    break;
                }
                if (!more) chunk[kHeaderBytes - 1] = 1;
            }
            if (!send(peer, std::move(chunk))) {
                failed = true;  // the link dropped it: the stream has a hole
                break;
            }
            ++o.next_seq;
            if (!more) {
                o.done = true;
                ++sent_;
                spdlog::info("sent snapshot at index {} to peer {} in {} chunks",
                             o.checkpoint->meta().index, peer, o.next_seq);
            }
        }
        it = (failed || o.done) ? out_.erase(it) : std::next(it);
    }
}

void SnapshotTransfer::cancel(std::uint64_t peer) {
    out_.erase(peer);
    in_.erase(peer);
}

void SnapshotTransfer::cancel_all() {
    out_.clear();
    in_.clear();
}

std::optional<raft::Message> SnapshotTransfer::receive(std::uint64_t from, std::uint64_t self,
                                                       std::string_view chunk,
                                                       std::string& problem) {
    auto refuse = [&](std::string why) -> std::optional<raft::Message> {
        in_.erase(from);
        problem = std::move(why);
        return std::nullopt;
    };
    if (chunk.size() < kHeaderBytes) return refuse("chunk shorter than its header");
    const raft::Term term = get_be(chunk, 1, 8);
    const raft::SnapshotMeta meta{get_be(chunk, 9, 8), get_be(chunk, 17, 8),
                                  raft::Millis(get_be(chunk, 25, 8))};
    const auto seq = std::uint32_t(get_be(chunk, 33, 4));
    const bool last = chunk[kHeaderBytes - 1] != 0;
    const std::string_view body = chunk.substr(kHeaderBytes);
    if (term == 0 || term > raft::kMaxSaneIndex || meta.index == 0 ||
        meta.index > raft::kMaxSaneIndex || meta.term == 0 || meta.term > term)
        return refuse("chunk header out of range");
    if (body.size() > max_stream_bytes_) return refuse("stream over the size cap");
    if (seq == 0) {
        if (last) return refuse("stream without task chunks");
        Incoming fresh;
        fresh.term = term;
        fresh.meta = meta;
        fresh.next_seq = 1;
        fresh.bytes = body.size();
        fresh.records.meta = meta;
        fresh.records.store_meta_sealed = std::string(body);
        in_[from] = std::move(fresh);
        return std::nullopt;
    }
    auto it = in_.find(from);
    if (it == in_.end()) return std::nullopt;  // joined a stream midway: wait for its start
    Incoming& in = it->second;
    if (in.term != term || !(in.meta == meta) || in.next_seq != seq)
        return refuse("chunk " + std::to_string(seq) + " out of order");
    in.bytes += body.size();
    if (in.bytes > max_stream_bytes_) return refuse("stream over the size cap");
    if (!storage::split_pairs(body, in.records.tasks))
        return refuse("chunk " + std::to_string(seq) + " malformed");
    ++in.next_seq;
    if (!last) return std::nullopt;
    spdlog::info("received snapshot at index {} from peer {}: {} tasks", meta.index, from,
                 in.records.tasks.size());
    raft::Message m{.type = raft::MessageType::snapshot, .from = from, .to = self, .term = term};
    m.snapshot = raft::Snapshot{meta, {}};
    received_ = std::move(in.records);
    in_.erase(it);
    return m;
}

std::optional<storage::SnapshotInstall> SnapshotTransfer::take_received(
    const raft::SnapshotMeta& meta) {
    if (!accepted_ || !(accepted_->meta == meta)) return std::nullopt;
    auto out = std::move(accepted_);
    accepted_.reset();
    return out;
}

}  // namespace dueq::node
