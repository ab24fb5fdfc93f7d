#include "node/move_steps.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "net/frame.h"
#include "net/peer_handshake.h"
#include "queue/command_codec.h"
#include "queue/store.h"
#include "shard/request_map.h"
#include "wire/limits.h"
#include "wire/protocol.h"

namespace dueq::node {

using shard::BucketPhase;
using shard::MoveStep;
using shard::NextMoveAction;

std::string move_step_mac(std::string_view secret, std::string_view destination,
                          std::string_view step) {
    // The destination's name is part of what is signed: a step for one shard is refused by
    // every other. The length prefix keeps (name, step) pairs from running together.
    std::string msg = "dueq move_step ";
    msg += std::to_string(destination.size());
    msg += ':';
    msg.append(destination);
    msg.append(step);
    const auto mac = net::hmac_sha256(secret, msg);
    return std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
}

std::string move_reply(std::uint64_t id, std::uint32_t count) {
    net::FrameBuilder f;
    f.begin_ok(id, 1);
    f.key(wire::field::count), f.pk().pack_uint32(count);
    return f.finish();
}

std::string move_step_reply(std::uint64_t id, shard::MoveOutcome outcome,
                            const shard::BucketState* state) {
    net::FrameBuilder f;
    f.begin_ok(id, state ? 3 : 1);
    f.key(wire::field::outcome), f.str(shard::to_string(outcome));
    if (state) {
        f.key(wire::field::phase), f.str(shard::to_string(state->phase));
        f.key(wire::field::gen), f.pk().pack_uint64(state->gen);
    }
    return f.finish();
}

std::optional<MoveStepAnswer> read_move_step_answer(const msgpack::object& answer) {
    const auto outcome =
        shard::outcome_from_string(shard::bytes_of(shard::field(answer, wire::field::outcome)));
    if (!outcome) return std::nullopt;
    MoveStepAnswer a{*outcome, std::nullopt};
    const auto phase =
        shard::phase_from_string(shard::bytes_of(shard::field(answer, wire::field::phase)));
    const auto* gen = shard::field(answer, wire::field::gen);
    if (phase && gen && gen->type == msgpack::type::POSITIVE_INTEGER)
        a.state = shard::BucketState{*phase, {}, gen->via.u64, 0};
    return a;
}

MoveDriver::MoveDriver(Io io, std::string own_shard)
    : io_(std::move(io)), own_(std::move(own_shard)) {}

void MoveDriver::stop_leading() {
    if (moving_.empty()) return;
    moving_.clear();
    ++epoch_;
}

MoveDriver::Moving* MoveDriver::still(shard::Bucket b, std::uint64_t epoch) {
    if (epoch != epoch_) return nullptr;
    auto it = moving_.find(b);
    return it == moving_.end() ? nullptr : &it->second;
}

std::optional<MoveDriver::Progress> MoveDriver::progress(shard::Bucket b) const {
    auto it = moving_.find(b);
    if (it == moving_.end() || it->second.chunks.empty()) return std::nullopt;
    return Progress{it->second.next_chunk, std::uint32_t(it->second.chunks.size()),
                    it->second.records};
}

void MoveDriver::tick(const queue::Store& store, std::int64_t now) {
    now_ = now;
    const auto& table = store.bucket_moves();
    // Buckets no longer moving (or moving in another generation) are forgotten.
    for (auto it = moving_.begin(); it != moving_.end();) {
        const shard::BucketState* st = table.find(it->first);
        const bool ours =
            st && (st->phase == BucketPhase::sending || st->phase == BucketPhase::sent ||
                   st->phase == BucketPhase::aborting);
        if (!ours || st->gen != it->second.progress.gen)
            it = moving_.erase(it);
        else
            ++it;
    }
    for (const auto& [b, st] : table.states()) {
        if (st.phase != BucketPhase::sending && st.phase != BucketPhase::sent &&
            st.phase != BucketPhase::aborting)
            continue;
        auto [it, fresh] = moving_.try_emplace(b);
        if (fresh) it->second.progress.gen = st.gen;
        Moving& m = it->second;
        if (m.busy || now < m.retry_at) continue;
        act(b, st, m, store, now);
    }
}

void MoveDriver::act(shard::Bucket b, const shard::BucketState& st, Moving& m,
                     const queue::Store& store, std::int64_t now) {
    const std::uint32_t count = store.move_bucket_count();
    switch (shard::next_move_action(st, m.progress)) {
        case NextMoveAction::none:
            return;
        case NextMoveAction::send_chunks:
            // Every chunk was sent and answered, yet the destination did not say it has them
            // all: start over, after a pause.
            if (m.progress.chunks_sent) {
                m.progress.chunks_sent = false;
                m.chunks.clear();
                m.retry_at = now + kRetryMs;
                return;
            }
            if (m.chunks.empty()) build_chunks(b, st, m, store);
            return send_next_chunk(b, st.peer);
        case NextMoveAction::propose_sent:
            return propose(b, MoveStep::sent, st.gen, count);
        case NextMoveAction::propose_abort:
            spdlog::warn("bucket {}: shard '{}' refused its move (generation {}); cancelling", b,
                         st.peer, st.gen);
            return propose(b, MoveStep::abort, st.gen, count);
        case NextMoveAction::send_activate:
            return send_step(b, st.peer, MoveStep::activate, st.gen, count);
        case NextMoveAction::propose_drop:
            return propose(b, MoveStep::drop, st.gen, count);
        case NextMoveAction::send_forget:
            return send_step(b, st.peer, MoveStep::forget, st.gen, count);
        case NextMoveAction::propose_abort_done:
            return propose(b, MoveStep::abort_done, st.gen, count);
    }
}

// The bucket's records as this leader's store holds them now: it applies no write of the
// bucket while sending, so they stay what they are until the copy is done.
void MoveDriver::build_chunks(shard::Bucket b, const shard::BucketState& st, Moving& m,
                              const queue::Store& store) {
    std::vector<queue::MoveBucket> parts(1);
    std::size_t bytes = 0;
    m.records = 0;
    store.bucket_records(
        b, store.move_bucket_count(),
        [&](std::string_view queue, std::string_view key, std::string_view record) {
            if (bytes >= limits::kMoveChunkBytes) {
                parts.emplace_back();
                bytes = 0;
            }
            parts.back().records.push_back(
                {std::string(queue), std::string(key), std::string(record)});
            bytes += queue.size() + key.size() + record.size();
            ++m.records;
        });
    m.chunks.clear();
    m.next_chunk = 0;
    for (std::uint32_t i = 0; i < parts.size(); ++i) {
        queue::MoveBucket& c = parts[i];
        c.step = {MoveStep::chunk, b, st.gen, own_, i, i + 1 == parts.size()};
        c.bucket_count = store.move_bucket_count();
        c.lease_floor = store.next_lease_id();
        m.chunks.push_back(std::move(c));
    }
}

void MoveDriver::send_next_chunk(shard::Bucket b, const std::string& to) {
    Moving& m = moving_.at(b);
    m.busy = true;
    // Stamped now, not when the copy was made: the destination pushes the chunk's lease ends
    // back by the time since the stamp, and a retry must not add the wait before it.
    queue::MoveBucket& chunk = m.chunks[m.next_chunk];
    chunk.sent_at = io_.now();
    io_.send(to, queue::encode_command(chunk),
             [this, alive = std::weak_ptr<bool>(alive_), b, to, epoch = epoch_,
              gen = m.progress.gen](std::optional<MoveStepAnswer> a) {
                 if (!alive.lock()) return;
                 Moving* m = still(b, epoch);
                 if (!m || m->progress.gen != gen) return;
                 m->busy = false;
                 if (!a || a->outcome == shard::MoveOutcome::out_of_sequence) {
                     // Start over from chunk 0: the destination drops what it had of this copy.
                     m->next_chunk = 0;
                     if (!a) m->retry_at = now_ + kRetryMs;
                     return;
                 }
                 shard::take_report(m->progress, shard::move_report(a->state ? &*a->state : nullptr,
                                                                    gen, a->outcome));
                 if (a->outcome == shard::MoveOutcome::refused) return;
                 if (++m->next_chunk < m->chunks.size()) return send_next_chunk(b, to);
                 m->progress.chunks_sent = true;
             });
}

void MoveDriver::propose(shard::Bucket b, MoveStep step, shard::MoveGen gen, std::uint32_t count) {
    Moving& m = moving_.at(b);
    m.busy = true;
    queue::MoveBucket c;
    c.step = {step, b, gen, {}, 0, false};
    c.bucket_count = count;
    io_.propose(std::move(c),
                [this, alive = std::weak_ptr<bool>(alive_), b, epoch = epoch_](bool applied) {
                    if (!alive.lock()) return;
                    Moving* m = still(b, epoch);
                    if (!m) return;
                    m->busy = false;
                    if (!applied) m->retry_at = now_ + kRetryMs;
                });
}

void MoveDriver::send_step(shard::Bucket b, const std::string& to, MoveStep step,
                           shard::MoveGen gen, std::uint32_t count) {
    Moving& m = moving_.at(b);
    m.busy = true;
    queue::MoveBucket c;
    c.step = {step, b, gen, own_, 0, false};
    c.bucket_count = count;
    io_.send(to, queue::encode_command(c),
             [this, alive = std::weak_ptr<bool>(alive_), b, epoch = epoch_,
              gen](std::optional<MoveStepAnswer> a) {
                 if (!alive.lock()) return;
                 Moving* m = still(b, epoch);
                 if (!m || m->progress.gen != gen) return;
                 m->busy = false;
                 if (!a) {
                     m->retry_at = now_ + kRetryMs;
                     return;
                 }
                 shard::take_report(m->progress, shard::move_report(a->state ? &*a->state : nullptr,
                                                                    gen, a->outcome));
             });
}

}  // namespace dueq::node
