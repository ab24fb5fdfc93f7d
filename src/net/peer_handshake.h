// The handshake of a peer connection: the first frame each way, saying which cluster and
// membership the sender belongs to, who it is, and whom it believes it is talking to.
// A fixed binary layout rather than msgpack, so hostile bytes meet a handful of length
// checks and nothing else. Pure: no I/O, no allocation beyond the returned strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dueq::net {

inline constexpr std::uint32_t kPeerHelloMagic = 0x4451504d;  // "DQPM"
inline constexpr std::uint16_t kPeerProtocolVersion = 1;
// A hello frame longer than this closes the connection before anything is allocated.
inline constexpr std::size_t kMaxPeerHelloBytes = 4096;
inline constexpr std::size_t kMaxClusterIdBytes = 255;

struct PeerHello {
    std::string cluster_id;
    std::uint64_t fingerprint = 0;  // hash of the membership list
    std::uint64_t sender = 0;       // node id of the side that sends this hello
    std::uint64_t target = 0;       // node id the sender believes it is talking to
    // Random per PeerMesh instance: a new value from the same sender id means the peer
    // restarted, so any older connection from it is stale.
    std::uint64_t incarnation = 0;
};

// Payload layout (big-endian): magic u32, version u16, cluster id length u16, fingerprint
// u64, sender u64, target u64, incarnation u64, then the cluster id's bytes. The frame's
// length prefix is not included. cluster_id must be at most kMaxClusterIdBytes.
std::string encode_hello(const PeerHello& hello);

struct DecodedHello {
    std::optional<PeerHello> hello;  // empty when the bytes are not a valid hello
    std::string error;               // why not, for the log
};
DecodedHello decode_hello(std::string_view payload);

}  // namespace dueq::net
