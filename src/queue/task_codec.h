// The encodings of the store's records: a task, a deleted key (tombstone), the store-wide
// meta record, and an autonomous node's overlay record. Internal to src/queue; the
// formats are described in task_codec.cpp. Pure functions: they decode into plain values
// and leave it to the store (store_records.cpp) to put them in place.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "queue/store_impl.h"

namespace dueq::queue::detail {

// Limits for unpacking a task or tombstone record.
msgpack::unpack_limit task_limits();

struct DecodedTask {
    State state = State::ready;
    Millis time = 0, aux = 0;
    std::uint64_t hlc = 0, version = 0, attempts = 0;
    std::string_view payload;
    LeaseRec lease;
};
// False if `root` is not a task record.
bool decode_task(const msgpack::object& root, DecodedTask* d);
// A tombstone record, or nullopt if `root` is not one.
std::optional<Tombstone> decode_tombstone(const msgpack::object& root);
// `lease`: the task's lease when it is taken, else nullptr.
std::string encode_task(const Task& t, const LeaseRec* lease);
std::string encode_tombstone(const Tombstone& t);

struct DecodedQueue {
    std::string name;
    DeclaredSettings declared;
    std::int64_t late_credit = 0;
};
struct DecodedMeta {
    Millis now = 0;
    LeaseId next_lease = 0;
    std::vector<DecodedQueue> queues;
    DeclaredSettings defaults;
    std::string membership;
    std::uint32_t move_bucket_count = 0;  // 0: no move table
    std::map<shard::Bucket, shard::BucketState> moves;
};
std::optional<DecodedMeta> decode_meta(std::string_view encoded);
// While forked, the committed state's values: a fork's are never written as applied
// state (its lease ids, for one, are from the autonomous space).
std::string encode_meta(const StoreState& s);

}  // namespace dueq::queue::detail
