#include "net/peer_handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>
#include <string>

namespace dueq::net {

namespace {

constexpr std::size_t kNonceAt = 4 + 2 + 2 + 6 * 8;
constexpr std::size_t kFixedBytes = kNonceAt + sizeof(Nonce);

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
    put_be(out, hello.data_id, 8);
    put_be(out, hello.target_data_id, 8);
    out.append(reinterpret_cast<const char*>(hello.nonce.data()), hello.nonce.size());
    out.append(hello.cluster_id);
    return out;
}

DecodedHello decode_hello(std::string_view payload) {
    DecodedHello r;
    if (payload.size() < 6) {
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
    if (payload.size() < kFixedBytes) {
        r.error = "handshake of " + std::to_string(payload.size()) + " bytes is too short";
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
    h.data_id = get_be(payload, 40, 8);
    h.target_data_id = get_be(payload, 48, 8);
    for (std::size_t i = 0; i < h.nonce.size(); ++i)
        h.nonce[i] = static_cast<unsigned char>(payload[kNonceAt + i]);
    h.cluster_id.assign(payload.substr(kFixedBytes));
    r.hello = std::move(h);
    return r;
}

Nonce random_nonce() {
    Nonce n;
    if (RAND_bytes(n.data(), int(n.size())) != 1)
        throw std::runtime_error("OpenSSL RAND_bytes failed: no randomness for a handshake");
    return n;
}

Proof handshake_proof(std::string_view secret, HandshakeRole role, std::string_view dialer_hello,
                      std::string_view acceptor_hello) {
    // Length-prefixed parts: no two different transcripts give the same bytes.
    std::string msg = role == HandshakeRole::dialer ? "dueq peer dialer" : "dueq peer acceptor";
    put_be(msg, dialer_hello.size(), 4);
    msg.append(dialer_hello);
    put_be(msg, acceptor_hello.size(), 4);
    msg.append(acceptor_hello);
    return hmac_sha256(secret, msg);
}

std::array<unsigned char, 32> hmac_sha256(std::string_view secret, std::string_view message) {
    std::array<unsigned char, 32> out{};
    unsigned int len = 0;
    // An empty key is still a key to HMAC; OpenSSL wants a non-null pointer for it.
    static const unsigned char kNoKey = 0;
    const void* key = secret.empty() ? static_cast<const void*>(&kNoKey) : secret.data();
    if (!HMAC(EVP_sha256(), key, int(secret.size()),
              reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(),
              &len) ||
        len != out.size())
        throw std::runtime_error("OpenSSL HMAC-SHA256 failed");
    return out;
}

std::string encode_proof(const Proof& proof) {
    std::string out;
    put_be(out, kPeerProofMagic, 4);
    out.append(reinterpret_cast<const char*>(proof.data()), proof.size());
    return out;
}

std::optional<Proof> decode_proof(std::string_view payload) {
    Proof p;
    if (payload.size() != 4 + p.size() || get_be(payload, 0, 4) != kPeerProofMagic)
        return std::nullopt;
    for (std::size_t i = 0; i < p.size(); ++i)
        p[i] = static_cast<unsigned char>(payload[4 + i]);
    return p;
}

bool same_proof(const Proof& a, const Proof& b) {
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool same_secret(std::string_view presented, std::string_view ours) {
    Proof a{}, b{};
    if (!EVP_Digest(presented.data(), presented.size(), a.data(), nullptr, EVP_sha256(), nullptr) ||
        !EVP_Digest(ours.data(), ours.size(), b.data(), nullptr, EVP_sha256(), nullptr))
        return false;
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace dueq::net
