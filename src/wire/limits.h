// Every limit of dueq in one place: what a log record can hold, the `[limits]` a node's
// config may set (default and accepted range), and the fixed limits of the protocol.
// docs/config.md and docs/protocol.md state each of them once; tests/node/limits_test.cpp
// reads both pages and compares them with this header. Header-only, so that the client
// library needs nothing of the server's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dueq::limits {

// ---- What a log record can hold: apply decodes nothing larger, so nothing larger may be
// proposed (the shell answers too_large instead). The store's own records (tasks,
// tombstones, overlay records) have the same ceilings.
inline constexpr std::size_t kRecordKeyBytes = 0xFFFF;                          // keys, queue names
inline constexpr std::size_t kRecordPayloadBytes = (std::size_t{1} << 27) - 1;  // 128 MiB - 1
// A task record beyond its payload (key, fields), as a Merge or an overlay record holds it.
inline constexpr std::size_t kRecordTaskBytes = kRecordKeyBytes + 4096;

// ---- `[limits]` of a node's config: default, and the range the parser accepts.
struct Range {
    std::uint64_t dflt, min, max;
};
inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
inline constexpr Range kMaxFrameBytes{16 * kMiB, 1024, std::uint64_t{1} << 30};
inline constexpr Range kMaxKeyBytes{1024, 1, kRecordKeyBytes};
// A larger value in a config file is lowered to the record ceiling, with a warning at
// start (older versions accepted up to 1 GiB and wrote entries they could not read back).
inline constexpr Range kMaxPayloadBytes{1 * kMiB, 1, kRecordPayloadBytes};
inline constexpr std::uint64_t kMaxPayloadBytesAccepted = std::uint64_t{1} << 30;
inline constexpr Range kMaxTakeCount{1000, 1, 1'000'000};
inline constexpr Range kMaxWaitingTakes{100'000, 1, 100'000'000};
inline constexpr Range kMaxConnections{10'000, 1, 10'000'000};
inline constexpr Range kMaxConnectionsPerAddress{1'000, 1, 10'000'000};
inline constexpr Range kMaxInFlight{1'024, 1, 1'000'000};
inline constexpr Range kFrameTimeoutMs{10'000, 10, 3'600'000};
inline constexpr Range kIdleTimeoutMs{600'000, 10, 86'400'000};
// The store budget: a leader refuses writes that would take its tasks past it
// (`store_full`). Its ceiling stays a GiB under the 16 GiB range the task records live in
// (queue/task_region.h), so no replica reaches that wall. Left unset, a node uses the
// default or half its machine's RAM, whichever is less.
inline constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
inline constexpr Range kMaxStoreBytes{8 * kGiB, 1 * kMiB, 15 * kGiB};
// The table docs/config.md gives, by config key.
struct ConfigLimit {
    std::string_view key;
    Range range;
};
inline constexpr std::array<ConfigLimit, 11> kConfigLimits{{
    {"max_frame_bytes", kMaxFrameBytes},
    {"max_key_bytes", kMaxKeyBytes},
    {"max_payload_bytes", kMaxPayloadBytes},
    {"max_take_count", kMaxTakeCount},
    {"max_waiting_takes", kMaxWaitingTakes},
    {"max_connections", kMaxConnections},
    {"max_connections_per_address", kMaxConnectionsPerAddress},
    {"max_in_flight", kMaxInFlight},
    {"frame_timeout_ms", kFrameTimeoutMs},
    {"idle_timeout_ms", kIdleTimeoutMs},
    {"max_store_bytes", kMaxStoreBytes},
}};
// The range of a key of kConfigLimits; a key not there is a compile error where the call
// is a constant expression, and std::out_of_range otherwise.
constexpr const Range& config_limit(std::string_view key) {
    for (const auto& l : kConfigLimits)
        if (l.key == key) return l.range;
    throw std::out_of_range("no [limits] key " + std::string(key));
}
// A frame must hold the largest payload and key with this much room for the rest.
inline constexpr std::size_t kFrameOverheadBytes = 1024;

// ---- Fixed limits of the protocol (docs/protocol.md §7).
inline constexpr std::size_t kMaxQueueNameBytes = 256;
inline constexpr std::int64_t kMaxTakeTimeoutMs = 86'400'000;  // one day
inline constexpr std::uint32_t kMaxKickCount = 100'000;
// Tasks in one page of `list` (and its default); a page costs the node O(log n + count).
inline constexpr std::uint32_t kMaxListCount = 1'000;
inline constexpr std::uint32_t kDefaultListCount = 100;
// Backups a node streams at once (`backup`): each holds a RocksDB snapshot, which keeps
// compaction from dropping what was overwritten since, so a stream that stops asking for
// chunks this long is dropped. A chunk holds about kBackupChunkBytes of records (more if
// one record is larger).
inline constexpr std::size_t kMaxBackups = 2;
inline constexpr std::int64_t kBackupIdleMs = 60'000;
inline constexpr std::size_t kBackupChunkBytes = 1 << 20;
// Reads with consistency "leader" waiting for the leader to confirm it still leads; past
// this many a read is answered `unavailable` (docs/protocol.md).
inline constexpr std::size_t kMaxPendingLeaderReads = 100'000;
inline constexpr int kMaxDepth = 32;  // msgpack nesting in a request
// Buckets in a shard map (docs/sharding.md): a `move`'s `bucket` is below it.
inline constexpr std::uint32_t kMaxBuckets = 65536;
// Buckets one `move` request starts at once: each is read-only until it has moved, so an
// operator's tool moves a few at a time (dueqctl shard move).
inline constexpr std::uint32_t kMaxMoveBuckets = 64;
// A move's chunk holds about this much of a bucket's records (more if one record is larger).
inline constexpr std::size_t kMoveChunkBytes = 1 << 20;

static_assert(kMaxKeyBytes.max <= kRecordKeyBytes, "a configured key must fit a log record");
static_assert(kMaxPayloadBytes.max <= kRecordPayloadBytes,
              "a configured payload must fit a log record");
static_assert(kMaxQueueNameBytes <= kRecordKeyBytes, "a queue name must fit a log record");
static_assert(kMaxFrameBytes.dflt >=
                  kMaxPayloadBytes.dflt + kMaxKeyBytes.dflt + kFrameOverheadBytes,
              "the default frame must hold the default payload and key");
static_assert(kMaxFrameBytes.max >= kMaxPayloadBytes.max + kMaxKeyBytes.max + kFrameOverheadBytes,
              "the largest frame must hold the largest payload and key");
template <typename T>
constexpr bool in_range(const Range& r, T v) {
    return std::uint64_t(v) >= r.min && std::uint64_t(v) <= r.max;
}
static_assert(in_range(kMaxFrameBytes, kMaxFrameBytes.dflt) &&
                  in_range(kMaxKeyBytes, kMaxKeyBytes.dflt) &&
                  in_range(kMaxPayloadBytes, kMaxPayloadBytes.dflt) &&
                  in_range(kMaxTakeCount, kMaxTakeCount.dflt) &&
                  in_range(kMaxWaitingTakes, kMaxWaitingTakes.dflt) &&
                  in_range(kMaxConnections, kMaxConnections.dflt) &&
                  in_range(kMaxConnectionsPerAddress, kMaxConnectionsPerAddress.dflt) &&
                  in_range(kMaxInFlight, kMaxInFlight.dflt) &&
                  in_range(kFrameTimeoutMs, kFrameTimeoutMs.dflt) &&
                  in_range(kIdleTimeoutMs, kIdleTimeoutMs.dflt) &&
                  in_range(kMaxStoreBytes, kMaxStoreBytes.dflt),
              "every default is in its range");

}  // namespace dueq::limits
