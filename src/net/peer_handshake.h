// The handshake of a peer connection. Four frames, before any Raft message:
//
//   dialer   -> acceptor  hello (cluster, who is who, whose data, a fresh nonce)
//   acceptor -> dialer    hello (the same, with its own nonce)
//   dialer   -> acceptor  proof: HMAC-SHA256(secret, "dialer" | both hellos)
//   acceptor -> dialer    proof: HMAC-SHA256(secret, "acceptor" | both hellos)
//
// Each side proves it holds the cluster's secret over a transcript that contains the
// other side's fresh nonce, so a recorded handshake cannot be replayed, and the two roles
// are labelled, so one side's proof is no use as the other's. The acceptor proves itself
// only after the dialer has, so a stranger who dials gets nothing to work on. The
// acceptor's proof also says "this connection is the one I keep" (see peer_mesh.h for
// duplicate connections): it is not sent on a connection it drops.
//
// What this does not do: protect frames after the handshake. Someone who can rewrite
// packets between two members can still inject; TLS is the answer to that.
//
// Fixed binary layouts rather than msgpack, so hostile bytes meet a handful of length
// checks and nothing else. Pure: no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dueq::net {

inline constexpr std::uint32_t kPeerHelloMagic = 0x4451504d;  // "DQPM"
inline constexpr std::uint32_t kPeerProofMagic = 0x44515041;  // "DQPA"
inline constexpr std::uint16_t kPeerProtocolVersion = 3;
// A handshake frame longer than this closes the connection before anything is allocated.
inline constexpr std::size_t kMaxPeerHelloBytes = 4096;
inline constexpr std::size_t kMaxClusterIdBytes = 255;

using Nonce = std::array<unsigned char, 16>;
using Proof = std::array<unsigned char, 32>;

struct PeerHello {
    std::string cluster_id;
    std::uint64_t fingerprint = 0;  // hash of the cluster's identity
    std::uint64_t sender = 0;       // node id of the side that sends this hello
    std::uint64_t target = 0;       // node id the sender believes it is talking to
    // Random per PeerMesh instance: a new value from the same sender id means the peer
    // restarted, so any older connection from it is stale.
    std::uint64_t incarnation = 0;
    Nonce nonce{};  // fresh per handshake (random_nonce)
    // The sender's data dir: random, made at its first start and kept with its data. A
    // member whose data dir was wiped comes back with another one (node/members.h).
    std::uint64_t data_id = 0;
    // The data id the sender's cluster knows the target by (0: none known yet).
    std::uint64_t target_data_id = 0;
};

// Payload layout (big-endian): magic u32, version u16, cluster id length u16, fingerprint
// u64, sender u64, target u64, incarnation u64, data id u64, target data id u64, nonce (16
// bytes), then the cluster id's bytes. The frame's length prefix is not included. cluster_id must be at most
// kMaxClusterIdBytes.
std::string encode_hello(const PeerHello& hello);

struct DecodedHello {
    std::optional<PeerHello> hello;  // empty when the bytes are not a valid hello
    std::string error;               // why not, for the log
};
DecodedHello decode_hello(std::string_view payload);

// 16 bytes from OpenSSL's CSPRNG.
Nonce random_nonce();

// What the side in `role` proves: HMAC-SHA256 keyed with the cluster secret over the
// role's label and both hello payloads, exactly as they were sent.
enum class HandshakeRole { dialer, acceptor };
Proof handshake_proof(std::string_view secret, HandshakeRole role, std::string_view dialer_hello,
                      std::string_view acceptor_hello);
// Proof frame payload: magic u32, then the 32 bytes.
std::string encode_proof(const Proof& proof);
std::optional<Proof> decode_proof(std::string_view payload);
// Compares in constant time: how much of a forged proof matched must not show in timing.
bool same_proof(const Proof& a, const Proof& b);
// Whether a secret someone presented (a client's token) equals ours, in time that does
// not depend on where they differ (nor on their lengths: both are hashed first).
bool same_secret(std::string_view presented, std::string_view ours);
// HMAC-SHA256 of `message` keyed with `key` (the handshake's proofs, a bucket move's steps).
std::array<unsigned char, 32> hmac_sha256(std::string_view key, std::string_view message);

}  // namespace dueq::net
