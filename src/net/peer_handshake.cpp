#include "net/peer_handshake.h"

#include <string>

namespace dueq::net {

namespace {

constexpr std::size_t kFixedBytes = 4 + 2 + 2 + 4 * 8;

void put_be(std::string& out, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i)
        out.push_back(char((v >> (8 * i)) & 0xff));
}

std::uint64_t get_be(std::string_view in, std::size_t pos, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
        v = (v << 8) | static_cast<unsigned char>(in[pos + std::size_t(i)]);
    return v;
}

}  // namespace

std::string encode_hello(const PeerHello& hello) {
    std::string out;
    out.reserve(kFixedBytes + hello.cluster_id.size());
    put_be(out, kPeerHelloMagic, 4);
    put_be(out, kPeerProtocolVersion, 2);
    put_be(out, hello.cluster_id.size(), 2);
    put_be(out, hello.fingerprint, 8);
    put_be(out, hello.sender, 8);
    put_be(out, hello.target, 8);
    put_be(out, hello.incarnation, 8);
    out.append(hello.cluster_id);
    return out;
}

DecodedHello decode_hello(std::string_view payload) {
    DecodedHello r;
    if (payload.size() < kFixedBytes) {
        r.error = "handshake of " + std::to_string(payload.size()) + " bytes is too short";
        return r;
    }
    if (get_be(payload, 0, 4) != kPeerHelloMagic) {
        r.error = "not a dueq peer handshake (bad magic)";
        return r;
    }
    if (const auto version = get_be(payload, 4, 2); version != kPeerProtocolVersion) {
        r.error = "peer protocol version " + std::to_string(version) + ", ours is " +
                  std::to_string(kPeerProtocolVersion);
        return r;
    }
    const std::size_t id_len = get_be(payload, 6, 2);
    if (id_len > kMaxClusterIdBytes || payload.size() != kFixedBytes + id_len) {
        r.error = "handshake of " + std::to_string(payload.size()) +
                  " bytes does not match its cluster id length " + std::to_string(id_len);
        return r;
    }
    PeerHello h;
    h.fingerprint = get_be(payload, 8, 8);
    h.sender = get_be(payload, 16, 8);
    h.target = get_be(payload, 24, 8);
    h.incarnation = get_be(payload, 32, 8);
    h.cluster_id.assign(payload.substr(kFixedBytes));
    r.hello = std::move(h);
    return r;
}

}  // namespace dueq::net
