// TLS for dueq's links (docs/security.md): the node's client listener and peer mesh, the
// proxy, and the client library all take their certificates from a TlsContext.
//
// The node's connections read with non-blocking read_some on readiness and write batches of
// frames (net::Connection, net::PeerLink), so TLS runs over memory buffers, not over the
// socket: TlsSession takes the ciphertext a read got and gives back the plaintext, takes
// plaintext frames and gives back the ciphertext to write. The socket code stays as it is.
//
// TLS 1.3 only; no session tickets (connections are long-lived).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct ssl_ctx_st;
struct ssl_st;
struct bio_st;

namespace dueq::net {

// Where the certificates are; PEM files.
struct TlsFiles {
    std::string ca_file;    // the CA that signs the other side's certificate
    std::string cert_file;  // this side's certificate (chain)
    std::string key_file;   // this side's private key
    bool operator==(const TlsFiles&) const = default;
};

enum class TlsRole { server, client };

// Whether a server asks for the client's certificate. A client always verifies the
// server's certificate against ca_file.
enum class PeerCert { none, optional, required };

// One SSL_CTX with its files loaded. Immutable once made: a reload makes a new one, and
// sessions keep the context they started with.
class TlsContext {
  public:
    // nullptr with `error` set when a file is missing or does not load, or the key does
    // not match the certificate. A server needs cert and key; a client needs ca_file and,
    // for a server that asks for one, cert and key.
    static std::shared_ptr<const TlsContext> make(TlsRole role, const TlsFiles& files,
                                                  PeerCert peer_cert, std::string& error);
    ~TlsContext();
    TlsContext(const TlsContext&) = delete;
    TlsContext& operator=(const TlsContext&) = delete;

    ssl_ctx_st* native() const { return ctx_; }
    TlsRole role() const { return role_; }
    const TlsFiles& files() const { return files_; }
    PeerCert peer_cert() const { return peer_cert_; }
    // This side's certificate's notAfter, in ms since the epoch; 0 without a certificate.
    std::int64_t not_after_ms() const { return not_after_ms_; }
    // Its subject, for logs ("CN=n1").
    const std::string& subject() const { return subject_; }

  private:
    TlsContext() = default;
    ssl_ctx_st* ctx_ = nullptr;
    TlsRole role_ = TlsRole::server;
    TlsFiles files_;
    PeerCert peer_cert_ = PeerCert::none;
    std::int64_t not_after_ms_ = 0;
    std::string subject_;
};

// One connection's TLS state over memory buffers.
class TlsSession {
  public:
    explicit TlsSession(std::shared_ptr<const TlsContext> ctx);
    ~TlsSession();
    TlsSession(const TlsSession&) = delete;
    TlsSession& operator=(const TlsSession&) = delete;

    // Ciphertext the socket delivered.
    void feed(const char* data, std::size_t n);
    // Plaintext into `out` (at most `room` bytes), running the handshake first: > 0 bytes,
    // 0 when more ciphertext is needed, -1 when the session failed (error()) or the other
    // side closed it.
    long read(char* out, std::size_t room);
    // Plaintext to send; sealed into records by take_output (after the handshake). A
    // client's first call also starts the handshake.
    void write(const char* data, std::size_t n);
    // Starts a client's handshake (its first flight goes to the output).
    void start();
    // Ciphertext waiting to be written to the socket, appended to `out`.
    bool has_output() const;
    void take_output(std::string& out);

    bool established() const { return established_; }
    bool failed() const { return failed_; }
    const std::string& error() const { return error_; }
    // The names in the other side's verified certificate: its DNS subject alternative
    // names and its common name. Empty before the handshake or without a certificate.
    std::vector<std::string> peer_names() const;

  private:
    bool handshake();
    void fail(const std::string& what);
    void flush_pending();
    void seal(const char* data, std::size_t n);
    static constexpr std::size_t kSealAtOnceBytes = 16 * 1024;  // a full record

    std::shared_ptr<const TlsContext> ctx_;
    ssl_st* ssl_ = nullptr;
    bio_st* in_ = nullptr;   // ciphertext from the socket (owned by ssl_)
    bio_st* out_ = nullptr;  // appends to sealed_ (owned by ssl_)
    std::string pending_;    // plaintext written and not sealed yet (take_output seals it)
    std::string sealed_;     // ciphertext for the socket
    bool established_ = false, failed_ = false;
    std::string error_;
};

// A TLS record's first byte is 22 (handshake): anything else on a TLS port is plaintext.
inline bool looks_like_tls(unsigned char first_byte) {
    return first_byte == 22;
}

}  // namespace dueq::net
