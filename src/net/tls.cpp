#include "net/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <filesystem>

namespace dueq::net {

namespace {

// The reason for the newest error on OpenSSL's queue (then cleared), or `fallback`.
std::string openssl_error(const std::string& fallback) {
    unsigned long e = 0, last = 0;
    while ((e = ERR_get_error()) != 0)
        last = e;
    if (last == 0) return fallback;
    char buf[256];
    ERR_error_string_n(last, buf, sizeof buf);
    return buf;
}

// Empties this thread's error queue (see TlsSession::handshake); looking first is cheaper
// than clearing an empty queue on every read.
void clear_errors() {
    if (ERR_peek_error() != 0) ERR_clear_error();
}

std::int64_t expiry_ms(X509* cert) {
    std::tm tm{};
    if (!cert || ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return 0;
    return std::int64_t(timegm(&tm)) * 1000;
}

std::string subject_of(X509* cert) {
    if (!cert) return "";
    char buf[256];
    X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof buf);
    return buf;
}

// The output BIO appends the records OpenSSL seals to the session's `sealed_` string, so
// take_output can hand them over without the copies a memory BIO would make.
int sealed_write(BIO* b, const char* data, int n) {
    static_cast<std::string*>(BIO_get_data(b))->append(data, std::size_t(n));
    return n;
}

long sealed_ctrl(BIO*, int cmd, long, void*) {
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

const BIO_METHOD* sealed_method() {
    static const BIO_METHOD* method = [] {
        BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "dueq sealed");
        BIO_meth_set_write(m, sealed_write);
        BIO_meth_set_ctrl(m, sealed_ctrl);
        BIO_meth_set_create(m, [](BIO* b) { return BIO_set_init(b, 1), 1; });
        return m;
    }();
    return method;
}

std::string need_file(const std::string& what, const std::string& path) {
    if (path.empty()) return what + " is not set";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return what + " " + path + " is not a file";
    return "";
}

}  // namespace

std::shared_ptr<const TlsContext> TlsContext::make(TlsRole role, const TlsFiles& files,
                                                   PeerCert peer_cert, std::string& error) {
    const bool own_cert = role == TlsRole::server || !files.cert_file.empty();
    if (own_cert) {
        if (error = need_file("the certificate file", files.cert_file); !error.empty())
            return nullptr;
        if (error = need_file("the key file", files.key_file); !error.empty()) return nullptr;
    }
    const bool verify = role == TlsRole::client || peer_cert != PeerCert::none;
    if (verify)
        if (error = need_file("the CA file", files.ca_file); !error.empty()) return nullptr;

    std::shared_ptr<TlsContext> c(new TlsContext());
    c->role_ = role;
    c->files_ = files;
    c->peer_cert_ = peer_cert;
    c->ctx_ = SSL_CTX_new(role == TlsRole::server ? TLS_server_method() : TLS_client_method());
    if (!c->ctx_) {
        error = openssl_error("SSL_CTX_new failed");
        return nullptr;
    }
    SSL_CTX_set_min_proto_version(c->ctx_, TLS1_3_VERSION);
    // AES-128-GCM first: the frames are small, and it costs less per record than AES-256
    // on CPUs with AES instructions, with a margin that is ample for tokens.
    SSL_CTX_set_ciphersuites(c->ctx_,
                             "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                             "TLS_CHACHA20_POLY1305_SHA256");
    SSL_CTX_set_num_tickets(c->ctx_, 0);
    SSL_CTX_set_session_cache_mode(c->ctx_, SSL_SESS_CACHE_OFF);
    if (own_cert) {
        if (SSL_CTX_use_certificate_chain_file(c->ctx_, files.cert_file.c_str()) != 1) {
            error = "certificate " + files.cert_file + ": " + openssl_error("does not load");
            return nullptr;
        }
        if (SSL_CTX_use_PrivateKey_file(c->ctx_, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
            error = "key " + files.key_file + " does not load or does not match certificate " +
                    files.cert_file + ": " + openssl_error("unknown reason");
            return nullptr;
        }
        if (SSL_CTX_check_private_key(c->ctx_) != 1) {
            error = "key " + files.key_file + " does not match certificate " + files.cert_file;
            return nullptr;
        }
        X509* cert = SSL_CTX_get0_certificate(c->ctx_);
        c->not_after_ms_ = expiry_ms(cert);
        c->subject_ = subject_of(cert);
    }
    if (verify) {
        if (SSL_CTX_load_verify_locations(c->ctx_, files.ca_file.c_str(), nullptr) != 1) {
            error = "CA file " + files.ca_file + ": " + openssl_error("does not load");
            return nullptr;
        }
        int mode = SSL_VERIFY_PEER;
        if (role == TlsRole::server && peer_cert == PeerCert::required)
            mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        SSL_CTX_set_verify(c->ctx_, mode, nullptr);
    }
    error.clear();
    return c;
}

TlsContext::~TlsContext() {
    if (ctx_) SSL_CTX_free(ctx_);
}

TlsSession::TlsSession(std::shared_ptr<const TlsContext> ctx) : ctx_(std::move(ctx)) {
    ssl_ = SSL_new(ctx_->native());
    in_ = BIO_new(BIO_s_mem());
    out_ = BIO_new(sealed_method());
    if (!ssl_ || !in_ || !out_) {
        if (in_) BIO_free(in_);
        if (out_) BIO_free(out_);
        in_ = out_ = nullptr;
        fail(openssl_error("cannot make a TLS session"));
        return;
    }
    // An empty memory BIO reads as "retry later", not as end of file.
    BIO_set_mem_eof_return(in_, -1);
    BIO_set_data(out_, &sealed_);
    SSL_set_bio(ssl_, in_, out_);
    if (ctx_->role() == TlsRole::server)
        SSL_set_accept_state(ssl_);
    else
        SSL_set_connect_state(ssl_);
}

TlsSession::~TlsSession() {
    if (ssl_) SSL_free(ssl_);  // frees both BIOs
}

void TlsSession::fail(const std::string& what) {
    if (failed_) return;
    failed_ = true;
    error_ = what;
    pending_.clear();
}

void TlsSession::feed(const char* data, std::size_t n) {
    if (failed_ || n == 0) return;
    if (BIO_write(in_, data, int(n)) != int(n)) fail("TLS input buffer refused bytes");
}

void TlsSession::start() {
    if (!failed_ && !established_) handshake();
}

// OpenSSL's error queue is per thread and SSL_get_error reads it: whatever another session
// left there would make this one's "want more input" look like a failure. So every call
// starts with an empty queue, and every failure empties it.
bool TlsSession::handshake() {
    clear_errors();
    const int r = SSL_do_handshake(ssl_);
    if (r == 1) {
        established_ = true;
        flush_pending();
        return true;
    }
    const int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return false;
    const long verify = SSL_get_verify_result(ssl_);
    const std::string reason = openssl_error("the other side is not speaking TLS");
    fail(verify != X509_V_OK
             ? std::string("certificate refused: ") + X509_verify_cert_error_string(verify)
             : "TLS handshake failed: " + reason);
    return false;
}

void TlsSession::flush_pending() {
    if (!established_ || pending_.empty()) return;
    seal(pending_.data(), pending_.size());
    pending_.clear();
}

void TlsSession::seal(const char* data, std::size_t n) {
    // The output BIO takes everything: SSL_write completes whole.
    while (n > 0 && !failed_) {
        clear_errors();
        const int r = SSL_write(ssl_, data, int(std::min<std::size_t>(n, 1u << 30)));
        if (r <= 0) return fail(openssl_error("write failed"));
        data += r;
        n -= std::size_t(r);
    }
}

long TlsSession::read(char* out, std::size_t room) {
    if (failed_) return -1;
    if (!established_ && !handshake()) return failed_ ? -1 : 0;
    if (room == 0) return 0;
    // Nothing buffered anywhere: SSL_read would only say so, at a tenth of a record's cost.
    if (BIO_ctrl_pending(in_) == 0 && SSL_has_pending(ssl_) == 0) return 0;
    clear_errors();
    const int r = SSL_read(ssl_, out, int(std::min<std::size_t>(room, 1u << 30)));
    if (r > 0) return r;
    const int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    fail(e == SSL_ERROR_ZERO_RETURN ? "the other side closed the TLS session"
                                    : openssl_error("read failed"));
    return -1;
}

// Writes are gathered and sealed when the output is taken, so that a flight of small
// frames (and a peer frame's 4-byte length prefix) becomes one record, not one each. A
// large write with nothing gathered before it is sealed at once, without the copy.
void TlsSession::write(const char* data, std::size_t n) {
    if (failed_ || n == 0) return;
    if (established_ && pending_.empty() && n >= kSealAtOnceBytes) return seal(data, n);
    pending_.append(data, n);
    if (!established_ && ctx_->role() == TlsRole::client) handshake();
}

bool TlsSession::has_output() const {
    return !sealed_.empty() || (established_ && !pending_.empty());
}

void TlsSession::take_output(std::string& out) {
    flush_pending();
    if (out.empty())
        out.swap(sealed_);
    else
        out += sealed_;
    sealed_.clear();
}

std::vector<std::string> TlsSession::peer_names() const {
    std::vector<std::string> names;
    if (!established_) return names;
    X509* cert = SSL_get0_peer_certificate(ssl_);
    if (!cert || SSL_get_verify_result(ssl_) != X509_V_OK) return names;
    auto* sans =
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans); ++i) {
        const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans, i);
        if (n->type != GEN_DNS) continue;
        const auto* s = n->d.dNSName;
        names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                           std::size_t(ASN1_STRING_length(s)));
    }
    if (sans) GENERAL_NAMES_free(sans);
    char cn[256];
    const int len =
        X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    if (len > 0) names.emplace_back(cn, std::size_t(len));
    return names;
}

}  // namespace dueq::net
