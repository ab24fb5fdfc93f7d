// The node's part in moving buckets between shards (docs/sharding.md, "Moving buckets"):
// the source leader's driver, which follows shard::next_move_action for every bucket its
// shard sends, has sent or is aborting, and the authentication of the steps it sends.
//
// A step goes to the destination shard's leader as a `move_step` request: the encoded
// MoveBucket command and an HMAC-SHA256 of it keyed with the deployment's secret
// ([shard] secret_file) and bound to the destination's name, so that only a node of this
// deployment can make one, and a step meant for one shard is refused by another. The
// destination proposes it as it came and answers, once it is applied, with the outcome and
// its state of the bucket; replays are harmless: a step of another generation, or one
// already applied, changes nothing.
//
// Not thread-safe: the node's event loop owns it. Reads no clock of its own: time comes in
// with tick and through Io::now.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "queue/command.h"
#include "shard/bucket_moves.h"

namespace dueq::queue {
class Store;
}

namespace dueq::node {

// The `mac` of a `move_step` carrying `step` to shard `destination`.
std::string move_step_mac(std::string_view secret, std::string_view destination,
                          std::string_view step);

// What the destination answered a step with.
struct MoveStepAnswer {
    shard::MoveOutcome outcome = shard::MoveOutcome::refused;
    std::optional<shard::BucketState> state;  // its entry for the bucket after the step
};

// The answers: to move and move_cancel, {count}; to move_step, {outcome, phase?, gen?}
// (phase and gen: the destination's entry for the bucket after the step, when it has one).
std::string move_reply(std::uint64_t id, std::uint32_t count);
std::string move_step_reply(std::uint64_t id, shard::MoveOutcome outcome,
                            const shard::BucketState* state);
// A move_step answer as the source reads it; nullopt when it is not one.
std::optional<MoveStepAnswer> read_move_step_answer(const msgpack::object& answer);

class MoveDriver {
  public:
    struct Io {
        // Proposes `c` on this shard; `done(true)` once it is applied without error.
        std::function<void(queue::MoveBucket c, std::function<void(bool applied)> done)> propose;
        // Sends `step` (an encoded MoveBucket) to shard `to`; `done` gets the answer, or
        // nullopt when none came (or it was an error: not applied, or unknown).
        std::function<void(const std::string& to, std::string step,
                           std::function<void(std::optional<MoveStepAnswer>)> done)>
            send;
        // This node's clock: a chunk is stamped with it as it is sent (MoveBucket::sent_at).
        std::function<std::int64_t()> now;
    };
    MoveDriver(Io io, std::string own_shard);

    // As leader: starts what each bucket needs next, at most one request or proposal in
    // flight per bucket. `store` is this shard's (its move table and the bucket's records).
    void tick(const queue::Store& store, std::int64_t now);
    // No longer leader: what this leader knew beyond the log is dropped; answers to its
    // requests still on their way are ignored. A new leader starts from its log.
    void stop_leading();

    // For the shards answer and dueqctl: chunks sent of the bucket's current copy.
    struct Progress {
        std::uint32_t chunks_done = 0, chunks = 0;
        std::uint64_t records = 0;
    };
    std::optional<Progress> progress(shard::Bucket b) const;

    static constexpr std::int64_t kRetryMs = 500;  // after a step got no answer

  private:
    struct Moving {
        shard::MoveProgress progress;
        bool busy = false;                // a request or proposal in flight
        std::int64_t retry_at = 0;        // not before this (after a failure)
        std::vector<queue::MoveBucket> chunks;  // the copy being sent, encoded as each goes
        std::uint32_t next_chunk = 0;
        std::uint64_t records = 0;
    };
    void act(shard::Bucket b, const shard::BucketState& st, Moving& m, const queue::Store& store,
             std::int64_t now);
    void build_chunks(shard::Bucket b, const shard::BucketState& st, Moving& m,
                      const queue::Store& store);
    void send_next_chunk(shard::Bucket b, const std::string& to);
    void propose(shard::Bucket b, shard::MoveStep step, shard::MoveGen gen, std::uint32_t count);
    void send_step(shard::Bucket b, const std::string& to, shard::MoveStep step, shard::MoveGen gen,
                   std::uint32_t count);
    // The Moving of bucket b if it still belongs to this leadership, else null.
    Moving* still(shard::Bucket b, std::uint64_t epoch);

    Io io_;
    std::string own_;
    std::map<shard::Bucket, Moving> moving_;
    std::uint64_t epoch_ = 0;  // grows with stop_leading: older answers are dropped
    std::int64_t now_ = 0;     // the last tick's time (answers arrive between ticks)
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  public:
    ~MoveDriver() { *alive_ = false; }
};

}  // namespace dueq::node
