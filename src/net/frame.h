// Outgoing frames: a 4-byte big-endian length, then one msgpack map, packed with
// msgpack-c. Responses are built in place, so a payload stored as encoded msgpack is
// copied into the frame verbatim, never decoded and re-encoded.
#pragma once

#include <msgpack.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "net/utf8.h"
#include "queue/command.h"

namespace dueq::net {

// What msgpack-c's packer writes into: the frame's own string, so finish() hands it over
// without a copy.
struct FrameBuffer {
    std::string bytes;
    void write(const char* data, std::size_t n) { bytes.append(data, n); }
};

class FrameBuilder {
  public:
    // Most answers fit in 64 bytes: one allocation, not the string's growth through it.
    // An answer that carries a task asks for room for its key and payload as well.
    explicit FrameBuilder(std::size_t reserve = 64) : pk_(buf_) {
        buf_.bytes.reserve(reserve);
        buf_.bytes.assign(4, '\0');
    }

    msgpack::packer<FrameBuffer>& pk() { return pk_; }
    void key(std::string_view k) {
        pk_.pack_str(std::uint32_t(k.size())), pk_.pack_str_body(k.data(), std::uint32_t(k.size()));
    }
    void str(std::string_view s) { key(s); }
    // A task key: str when it is valid UTF-8, bin otherwise (utf8.h says why).
    void key_bytes(std::string_view k) {
        if (valid_utf8(k)) return str(k);
        pk_.pack_bin(std::uint32_t(k.size())), pk_.pack_bin_body(k.data(), std::uint32_t(k.size()));
    }
    void raw(std::string_view encoded) { buf_.write(encoded.data(), encoded.size()); }
    // Starts {"id": id, "ok": true, ...}: `extra` more fields must follow.
    void begin_ok(std::uint64_t id, std::uint32_t extra);
    // Patches the length prefix and hands the bytes over.
    std::string finish();

  private:
    FrameBuffer buf_;
    msgpack::packer<FrameBuffer> pk_;
};

// The answer to hello (docs/protocol.md), from a node or a proxy.
std::string hello_frame(std::uint64_t id, std::uint64_t session, const std::string& node_id,
                        const std::string& leader, const std::string& mode);

// {"id": id, "ok": false, "error": {"code", "message", "leader"?}}
std::string error_frame(std::uint64_t id, queue::Code code, std::string_view message,
                        const std::optional<std::string>& leader = std::nullopt);
// wrong_shard, naming the shard that owns the key's bucket: {"code", "message", "leader",
// "shard", "bucket", "gen"} (gen: of the move that gave it the bucket, 0 for the map file),
// so that a router learns the owner from the answer (docs/sharding.md).
std::string wrong_shard_frame(std::uint64_t id, std::string_view message, const std::string& leader,
                              std::string_view shard, std::uint32_t bucket, std::uint64_t gen);

}  // namespace dueq::net
