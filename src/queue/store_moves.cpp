// A bucket's move between shards as the task store applies it (docs/sharding.md, "Moving
// buckets"): the step goes to the shard's move table (shard::BucketMoves), and the store
// does what the table says with the bucket's tasks: deletes them (the source's drop, the
// destination's forget or a copy starting over) or adds a chunk of them, whole: lease,
// attempts, version and hlc as the source held them, tombstones included.
#include "queue/msgpack_fields.h"
#include "queue/store_impl.h"
#include "queue/task_codec.h"
#include "shard/bucket_hash.h"

namespace dueq::queue {

namespace {

// Every task and tombstone of the bucket goes, each recorded as a change so that storage
// deletes its record.
void clear_bucket(detail::StoreState& s, std::uint32_t bucket, std::uint32_t count) {
    std::vector<std::pair<detail::Queue*, std::string>> tasks;
    s.visit_tasks([&](const detail::Queue& q, const detail::Task& t) {
        if (shard::bucket_of(q.name, t.key(), count) == bucket)
            tasks.emplace_back(s.queues[q.id], std::string(t.key()));
    });
    for (auto& [q, key] : tasks) {
        s.remove_task(*q, s.table.find(q->id, key), true);
        s.update_calendar(*q);
    }
    std::vector<std::pair<std::uint16_t, std::string>> tombs;
    for (const auto& [qk, tomb] : s.tombstones)
        if (shard::bucket_of(s.queues[qk.first]->name, qk.second, count) == bucket)
            tombs.push_back(qk);
    for (auto& [queue_id, key] : tombs) {
        s.clear_tombstone(queue_id, key);
        s.changes.emplace_back(queue_id, std::move(key));
    }
}

// Whether every record of a chunk is of its bucket and decodes: checked before the step
// applies, so that a bad chunk changes nothing.
std::optional<Result> check_records(const MoveBucket& c) {
    for (const MovedRecord& r : c.records) {
        if (r.queue.empty() || r.queue.size() > detail::kMaxKeyBytes || r.key.empty() ||
            r.key.size() > detail::kMaxKeyBytes)
            return Result::error(Code::bad_request, "a moved record has no valid queue and key");
        if (shard::bucket_of(r.queue, r.key, c.bucket_count) != c.step.bucket)
            return Result::error(Code::bad_request, "a moved record is not of bucket " +
                                                        std::to_string(c.step.bucket));
        auto oh = detail::unpack_whole(r.record, detail::task_limits());
        detail::DecodedTask d;
        if (!oh || (!detail::decode_task(oh->get(), &d) && !detail::decode_tombstone(oh->get())) ||
            d.payload.size() > detail::kMaxPayloadBytes)
            return Result::error(Code::bad_request, "a moved record does not decode");
    }
    return std::nullopt;
}

Result add_records(detail::StoreState& s, const MoveBucket& c, Millis now) {
    // A lease's end is a time of the source's clock. Read by this shard's clock, which may be
    // ahead, it would end early and a second worker could take the task while the first
    // still holds it; pushed back by how far `now` is past the send, it ends no earlier in
    // real time than the source would have ended it.
    const Millis lease_shift = c.sent_at > 0 && now > c.sent_at ? now - c.sent_at : 0;
    std::vector<detail::Queue*> touched;
    for (const MovedRecord& r : c.records) {
        if (!s.load_task(r.queue, r.key, r.record))
            return Result::error(Code::internal, "a moved record does not decode");
        detail::Queue* q = s.find_queue(r.queue);
        if (detail::Task* t = s.table.find(q->id, r.key)) {
            if (lease_shift > 0 && t->state() == detail::State::taken) {
                s.unlink(*q, t);
                t->aux = std::min(detail::sat_add(t->aux, lease_shift), detail::kMaxStoredTime);
                s.link(*q, t);
            }
            s.mark_changed(t);
        } else
            s.changes.emplace_back(q->id, r.key);  // a tombstone
        if (std::find(touched.begin(), touched.end(), q) == touched.end()) touched.push_back(q);
    }
    // A lease, delay or retention that ended before now ends now, as here it would have.
    for (detail::Queue* q : touched) {
        s.expire(*q, now);
        s.update_calendar(*q);
    }
    return Result{};
}

}  // namespace

Result detail::apply_move(StoreState& s, const MoveBucket& c, Millis now) {
    if (c.bucket_count == 0 || c.bucket_count > shard::kMaxBuckets ||
        c.step.bucket >= c.bucket_count)
        return Result::error(Code::bad_request, "a move names bucket " +
                                                    std::to_string(c.step.bucket) + " of " +
                                                    std::to_string(c.bucket_count));
    if (s.move_bucket_count != 0 && s.move_bucket_count != c.bucket_count)
        return Result::error(Code::bad_request, "a move of another bucket count (" +
                                                    std::to_string(c.bucket_count) + ", not " +
                                                    std::to_string(s.move_bucket_count) + ")");
    if (s.fork) return Result::error(Code::bad_request, "no bucket moves in autonomous mode");
    if (c.step.step != shard::MoveStep::chunk && !c.records.empty())
        return Result::error(Code::bad_request, "only a chunk carries records");
    if (auto bad = check_records(c)) return *bad;
    const shard::MoveApplied a = s.moves.apply(c.step);
    Result r;
    r.move = a.outcome;
    if (a.outcome == shard::MoveOutcome::refused ||
        a.outcome == shard::MoveOutcome::out_of_sequence) {
        r.code = Code::bad_request;
        r.message = a.why;
        return r;
    }
    s.move_bucket_count = c.bucket_count;
    if (a.data != shard::BucketData::keep) clear_bucket(s, c.step.bucket, c.bucket_count);
    if (a.outcome == shard::MoveOutcome::applied && c.step.step == shard::MoveStep::chunk) {
        Result added = add_records(s, c, now);
        if (!added.ok()) return added;
        s.next_lease = std::max(s.next_lease, c.lease_floor);
    }
    return r;
}

// Only the bucket's tasks are encoded: the filter runs on the keys first.
void detail::for_each_bucket_record(
    const StoreState& s, std::uint32_t bucket, std::uint32_t count,
    const std::function<void(std::string_view, std::string_view, std::string_view)>& fn) {
    s.visit_tasks([&](const Queue& q, const Task& t) {
        if (shard::bucket_of(q.name, t.key(), count) == bucket)
            fn(q.name, t.key(), s.encode_task(t));
    });
    for (const auto& [qk, tomb] : s.tombstones) {
        const std::string& queue = s.queues[qk.first]->name;
        if (shard::bucket_of(queue, qk.second, count) == bucket &&
            s.table.find(qk.first, qk.second) == nullptr)
            fn(queue, qk.second, encode_tombstone(tomb));
    }
}

}  // namespace dueq::queue
