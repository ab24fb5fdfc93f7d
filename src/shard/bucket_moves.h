// Moving a bucket between two live shards (docs/sharding.md, "Moving buckets"): the states
// each shard keeps for the buckets it sends or receives, the steps that change them, and
// what the source's leader does next.
//
// Every step is a command in one shard's Raft log, applied in log order by every replica
// of that shard, so a crash or a leader change on either side finds the move where its log
// left it. One owner at a time comes from the order of three facts in two logs:
//   1. the destination commits every chunk (`received`) before the source logs `sent`;
//   2. the destination logs `activate` (and serves) only after the source logged `sent`
//      (and stopped serving): the source asks for it only then, and `abort` is refused
//      once `sent` is in the source's log, so no copy is ever activated after an abort;
//   3. the source drops its copy (`drop`) only after the destination confirmed `activate`.
// Between `begin` and `sent` the source serves reads only: writes and takes of the bucket
// are refused (retry), so the copy it sends cannot go stale.
//
// Generations fence stale messages: each move of a bucket has a larger one than the last
// move of that bucket the sending shard knows (its state's generation, 0 for a bucket the
// map file gave it), and a step of another generation is refused.
//
// Pure state, no I/O: the node applies the commands and sends the messages; tests drive
// it directly (tests/shard/move_model_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dueq::shard {

using Bucket = std::uint32_t;
using MoveGen = std::uint64_t;

inline constexpr std::size_t kMaxShardNameBytes = 64;  // as the shard map allows

enum class BucketPhase : std::uint8_t {
    active,     // this shard serves it (a bucket the map file gives it has no entry at all)
    sending,    // source: reads only, while its tasks are copied to `peer`
    aborting,   // source: serves again; `peer` must still be told to drop its copy
    sent,       // source: serves nothing; its tasks stay until `peer` serves the bucket
    gone,       // source: its tasks are dropped; `peer` owns the bucket (for routing)
    receiving,  // destination: chunks arriving from `peer`; serves nothing
    received,   // destination: every chunk is in; serves nothing until activated
    dropped,    // destination: an aborted copy, thrown away; its generation is refused
};
const char* to_string(BucketPhase p);  // as the `shards` and `move_step` answers say it
std::optional<BucketPhase> phase_from_string(std::string_view word);

struct BucketState {
    BucketPhase phase = BucketPhase::active;
    std::string peer;  // the other shard of the move (none for active)
    MoveGen gen = 0;
    std::uint32_t next_chunk = 0;  // receiving: the chunk expected next
    bool operator==(const BucketState&) const = default;
};

// The steps, one log command each. The source logs begin, sent, drop, abort and
// abort_done; the destination logs chunk, activate and forget.
enum class MoveStep : std::uint8_t {
    begin,       // source: active -> sending{to, gen}
    sent,        // source: sending -> sent, once the destination confirmed the last chunk
    drop,        // source: sent -> gone (and its tasks of the bucket are deleted)
    abort,       // source: sending -> aborting (cancelled, or the destination refused)
    abort_done,  // source: aborting -> active, once the destination confirmed forget
    chunk,       // destination: a chunk of tasks; chunk 0 starts over, `last` -> received
    activate,    // destination: received -> active (serves from here)
    forget,      // destination: receiving | received -> dropped (its tasks deleted)
};
const char* to_string(MoveStep s);

struct MoveCommand {
    MoveStep step = MoveStep::begin;
    Bucket bucket = 0;
    MoveGen gen = 0;
    std::string peer;         // begin: the destination; chunk: the source
    std::uint32_t chunk = 0;  // chunk: its number, from 0
    bool last = false;        // chunk: the bucket's last one
};

// What applying a command did. `refused` changes nothing (a stale generation, a step out of
// order: the move cannot go on); `repeated` is a step already applied (a retry after a lost
// answer), also no change; `out_of_sequence` is a chunk after a gap (an earlier one was
// lost), no change either: the source sends the chunks again from 0.
enum class MoveOutcome : std::uint8_t { applied, repeated, refused, out_of_sequence };
const char* to_string(MoveOutcome o);  // as the `move_step` answer says it
std::optional<MoveOutcome> outcome_from_string(std::string_view word);

// What the store must do with the bucket's tasks after a command applied.
enum class BucketData : std::uint8_t {
    keep,
    clear,        // delete every task of the bucket (chunk 0 starting over, drop, forget)
    clear_first,  // chunk 0: delete what an earlier attempt left, then add the chunk's tasks
};

struct MoveApplied {
    MoveOutcome outcome = MoveOutcome::refused;
    BucketData data = BucketData::keep;
    std::string why;  // refused: what was wrong
};

// Test-only defects of the move protocol that tests/shard/move_model_test.cpp must catch;
// they act only in builds with DUEQ_PLANTED_BUGS.
enum class MoveDefect : std::uint8_t {
    none,
    serve_before_sent,    // the destination is asked to serve once it has every chunk, before
                          // the source logs sent
    drop_before_commit,   // the source logs sent, then drops its copy, once it has sent every
                          // chunk, without waiting for the destination to commit them
    write_while_sending,  // the source keeps applying writes of the bucket while it copies
};

// One shard's move states (replicated: every replica applies the same commands).
class BucketMoves {
  public:
    MoveApplied apply(const MoveCommand& c);

    // A bucket without an entry is served as the map file says.
    const BucketState* find(Bucket b) const;
    // Whether this shard may apply a write or a take of bucket b (with no entry: yes; the
    // map decided). Checked again where the command applies, so that a write proposed
    // before `begin` and applied after it is refused like one proposed after.
    bool writable(Bucket b) const;
    // Whether this shard may answer reads of bucket b.
    bool readable(Bucket b) const;
    // Whether a take must skip tasks of bucket b: every entry but active and aborting.
    bool hidden(Bucket b) const { return !writable(b); }
    // The generation the next move of b from this shard must carry.
    MoveGen next_gen(Bucket b) const;
    bool empty() const { return states_.empty(); }
    // Whether some bucket's tasks are in this store but hidden from takes (sending, sent,
    // receiving, received): when not, a take need not look at buckets at all.
    bool hides_tasks() const { return hiding_ > 0; }
    // Grows with every applied step and reset: a reader of the table (the node's router)
    // looks again only when it changed.
    std::uint64_t changes() const { return changes_; }
    const std::map<Bucket, BucketState>& states() const { return states_; }
    // Restores a snapshot's table.
    void reset(std::map<Bucket, BucketState> states);
    void plant(MoveDefect defect);

  private:
    MoveApplied source_step(const MoveCommand& c);
    MoveApplied destination_step(const MoveCommand& c);
    void count_hiding();
    std::map<Bucket, BucketState> states_;
    std::size_t hiding_ = 0;
    std::uint64_t changes_ = 0;
    MoveDefect planted_ = MoveDefect::none;
};

// What the source's leader knows of the move of one bucket beyond its log: what it sent,
// and what the destination last answered. Kept in memory; a new leader starts empty.
struct MoveProgress {
    MoveGen gen = 0;
    bool chunks_sent = false;  // this leader sent every chunk of `gen` (not yet confirmed)
    bool received = false;     // the destination committed every chunk of `gen`
    bool activated = false;    // the destination committed activate of `gen`
    bool forgotten = false;    // the destination committed forget of `gen`
    bool refused = false;      // the destination refused a step of `gen`: it cannot go on
};

// What the destination answers a step of generation `gen` with, from its state of the
// bucket after applying it (`st`: null for none) and what applying it did.
MoveProgress move_report(const BucketState* st, MoveGen gen, MoveOutcome outcome);
// The source's leader takes the destination's answer `r` into `p` (both of one generation;
// an answer of another is stale and changes nothing).
void take_report(MoveProgress& p, const MoveProgress& r);

// What the source's leader does next for one bucket, from its committed state and its
// progress in that generation.
enum class NextMoveAction : std::uint8_t {
    none,                // nothing: not moving, or gone
    send_chunks,         // sending: (re)send every chunk from 0
    propose_sent,        // sending, and the destination committed them all
    propose_abort,       // sending, and the destination refused
    send_activate,       // sent: ask the destination to serve
    propose_drop,        // sent, and the destination activated
    send_forget,         // aborting: ask the destination to drop its copy
    propose_abort_done,  // aborting, and the destination forgot
};
const char* to_string(NextMoveAction a);
NextMoveAction next_move_action(const BucketState& source, const MoveProgress& progress,
                                MoveDefect defect = MoveDefect::none);

}  // namespace dueq::shard
