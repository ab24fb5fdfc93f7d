// Store: commands in (apply, apply_batch, advance), state out (drain_changes, encode_meta,
// for_each_task), and the fork of autonomous mode. What a command does is in
// store_commands.cpp, the state's own workings in store_state.cpp and store_records.cpp,
// reads in store_query.cpp.
#include <array>

#include "queue/command_codec.h"
#include "queue/store_impl.h"
#include "queue/task_codec.h"
#include "shard/bucket_hash.h"

namespace dueq::queue {

Store::Store(StoreLimits limits) : impl_(std::make_unique<Impl>(limits)) {}
Store::~Store() = default;

void Store::plant([[maybe_unused]] StoreDefect defect) {
#ifdef DUEQ_PLANTED_BUGS
    impl_->planted = defect;
#endif
}

Result Store::apply(const Command& cmd, Millis now) {
    now = detail::clamp_log_time(now);
    impl_->advance(now);
    // A log time behind an earlier one (it should not happen: the leader keeps its clock
    // monotonic) is taken as the latest time seen, so state never moves back in time.
    if (impl_->fork &&
        (std::holds_alternative<Declare>(cmd) || std::holds_alternative<Merge>(cmd))) {
        return Result::error(Code::no_quorum,
                             "this node is cut off from the majority; not applied");
    }
    return detail::apply_command(*impl_, cmd, std::max(now, impl_->now));
}

std::size_t Store::apply_batch(
    std::span<const LoggedCommand> batch,
    const std::function<bool(std::size_t i, Command& command, Result& result)>& done) {
    // A put or an ack of a random key waits on memory twice, for the task table's slot
    // and for the task (8% of a three-node put run's CPU): both are asked for some
    // commands ahead, so that they are in cache by the time the command is applied. Then,
    // once the task is in cache, its neighbours in its tree, which taking it out of the
    // tree reads and rewrites. A command ahead is only peeked at (its queue and key), and
    // each is decoded right before it applies: one command's strings live at a time. Each
    // step only asks: what `done` does between commands (drains, a rollback) at worst
    // makes a step ask for the wrong line.
    constexpr std::size_t kSlotAhead = 8, kTaskAhead = 4, kLinksAhead = 2;
    std::array<std::optional<std::uint64_t>, kSlotAhead> hashes;  // by index % kSlotAhead
    const detail::StoreState& s = *impl_;
    auto load_slot = [&](std::size_t i) {
        auto& hash = hashes[i % kSlotAhead];
        hash.reset();
        if (i >= batch.size()) return;
        if (auto name = peek_task_name(batch[i].encoded))
            if (const detail::Queue* q = s.find_queue(name->queue))
                hash = s.table.prefetch(q->id, name->key);
    };
    auto load_task = [&](std::size_t i) {
        if (i < batch.size() && hashes[i % kSlotAhead])
            s.table.prefetch_task(*hashes[i % kSlotAhead]);
    };
    auto load_links = [&](std::size_t i) {
        if (i < batch.size() && hashes[i % kSlotAhead])
            s.table.prefetch_links(*hashes[i % kSlotAhead]);
    };
    for (std::size_t i = 0; i < std::min(kSlotAhead, batch.size()); ++i)
        load_slot(i);
    for (std::size_t i = 0; i < batch.size(); ++i) {
        load_links(i + kLinksAhead);
        load_task(i + kTaskAhead);  // its slot was asked for kTaskAhead commands ago
        load_slot(i + kSlotAhead);  // takes command i's place, whose steps are all done
        auto cmd = decode_command(batch[i].encoded);
        if (!cmd) return i;
        Result r = apply(*cmd, batch[i].now);
        if (!done(i, *cmd, r)) return i + 1;
    }
    return batch.size();
}

void Store::advance(Millis now) {
    impl_->advance(detail::clamp_log_time(now));
}

// ---------------------------------------------------------------- autonomous mode

bool Store::fork(LeaseId lease_base) {
    return impl_->start_fork(lease_base);
}

bool Store::forked() const {
    return impl_->fork != nullptr;
}

std::optional<std::uint64_t> Store::tombstone_hlc(std::string_view queue,
                                                  std::string_view key) const {
    const detail::Queue* q = impl_->find_queue(queue);
    if (q == nullptr || impl_->table.find(q->id, key)) return std::nullopt;
    return impl_->deletion_hlc(q->id, key);
}

void Store::drain_fork(const std::function<void(std::string_view queue, std::string_view key,
                                                const OverlayRecord&)>& fn) {
    impl_->drain_fork(fn);
}

void Store::rollback() {
    impl_->rollback();
}

bool Store::load_overlay(std::string_view queue, std::string_view key, const OverlayRecord& r) {
    return impl_->load_overlay(queue, key, r);
}

// ---------------------------------------------------------------- persistence

void Store::drain_changes(
    const std::function<void(std::string_view queue, std::string_view key,
                             std::optional<std::string>&& encoded_task)>& fn) {
    impl_->drain_changes(fn);
}

const std::string& Store::membership() const {
    return impl_->membership;
}

const shard::BucketMoves& Store::bucket_moves() const {
    return impl_->moves;
}

std::uint32_t Store::move_bucket_count() const {
    return impl_->move_bucket_count;
}

LeaseId Store::next_lease_id() const {
    return impl_->next_lease;
}

bool Store::key_readable(std::string_view queue, std::string_view key) const {
    if (impl_->moves.empty()) return true;
    return impl_->moves.readable(shard::bucket_of(queue, key, impl_->move_bucket_count));
}

void Store::bucket_records(
    std::uint32_t bucket, std::uint32_t bucket_count,
    const std::function<void(std::string_view, std::string_view, std::string_view)>& fn) const {
    detail::for_each_bucket_record(*impl_, bucket, bucket_count, fn);
}

void Store::set_membership(std::string encoded) {
    impl_->membership = std::move(encoded);
}

std::string Store::encode_meta() const {
    return detail::encode_meta(*impl_);
}

void Store::for_each_task(const std::function<void(std::string_view queue, std::string_view key,
                                                   std::string_view encoded_task)>& fn) const {
    impl_->for_each_task(fn);
}

}  // namespace dueq::queue
