// net::TlsSession over memory buffers, with certificates made at test time by
// scripts/make-certs.sh: a handshake and data both ways, the names a verified certificate
// carries, and the refusals (another CA, no client certificate where one is required, an
// expired certificate, plaintext on a TLS port).
#include <catch2/catch.hpp>

#include <unistd.h>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "net/tls.h"

using namespace dueq::net;
namespace fs = std::filesystem;

namespace {

// Certificates for this test run: CA "a" with n1 and client1, CA "b" with n1 too, and an
// n1 of CA "a" that expired (signed under faketime, when it is installed).
struct Certs {
    fs::path dir = fs::temp_directory_path() / ("dueq-tls-test-" + std::to_string(::getpid()));
    bool expired = false;
    Certs() {
        fs::remove_all(dir);
        const std::string script = std::string(DUEQ_SOURCE_DIR) + "/scripts/make-certs.sh";
        const std::string quiet = " > /dev/null";
        REQUIRE(std::system(
                    (script + " " + (dir / "a").string() + " n1 client1" + quiet).c_str()) == 0);
        REQUIRE(std::system((script + " " + (dir / "b").string() + " n1" + quiet).c_str()) == 0);
        fs::create_directories(dir / "old");
        fs::copy(dir / "a" / "ca.pem", dir / "old" / "ca.pem");
        fs::copy(dir / "a" / "ca.key", dir / "old" / "ca.key");
        expired = std::system(("faketime -f -10d " + script + " " + (dir / "old").string() +
                               " n1 --days 1" + quiet + " 2>&1")
                                  .c_str()) == 0;
    }
    ~Certs() { fs::remove_all(dir); }
    TlsFiles files(const std::string& ca, const std::string& name) const {
        return {(dir / ca / "ca.pem").string(), (dir / ca / (name + ".pem")).string(),
                (dir / ca / (name + ".key")).string()};
    }
};

const Certs& certs() {
    static Certs c;
    return c;
}

std::shared_ptr<const TlsContext> context(TlsRole role, const TlsFiles& files, PeerCert peer) {
    std::string error;
    auto c = TlsContext::make(role, files, peer, error);
    INFO(error);
    REQUIRE(c);
    return c;
}

// Moves ciphertext between the two sessions until neither has anything to say.
void pump(TlsSession& a, TlsSession& b, std::string& a_got, std::string& b_got) {
    for (int round = 0; round < 20; ++round) {
        std::string wire;
        a.take_output(wire);
        b.feed(wire.data(), wire.size());
        std::string back;
        char buf[4096];
        long n;
        while ((n = b.read(buf, sizeof buf)) > 0)
            b_got.append(buf, std::size_t(n));
        b.take_output(back);
        a.feed(back.data(), back.size());
        while ((n = a.read(buf, sizeof buf)) > 0)
            a_got.append(buf, std::size_t(n));
        if (wire.empty() && back.empty() && !a.has_output()) return;
    }
}

}  // namespace

TEST_CASE("TLS sessions over memory: handshake, data both ways, the peer's names", "[tls]") {
    const auto server = context(TlsRole::server, certs().files("a", "n1"), PeerCert::required);
    const auto client = context(TlsRole::client, certs().files("a", "client1"), PeerCert::none);
    CHECK(server->not_after_ms() > 0);
    CHECK(server->subject().find("n1") != std::string::npos);
    TlsSession s(server), c(client);
    c.write("hello", 5);  // held until the handshake is done
    std::string c_got, s_got;
    pump(c, s, c_got, s_got);
    REQUIRE(c.established());
    REQUIRE(s.established());
    CHECK(s_got == "hello");
    const std::string big(100000, 'x');
    s.write(big.data(), big.size());
    pump(s, c, s_got, c_got);
    CHECK(c_got == big);
    auto names = c.peer_names();
    CHECK(std::find(names.begin(), names.end(), "n1") != names.end());
    names = s.peer_names();
    CHECK(std::find(names.begin(), names.end(), "client1") != names.end());
}

TEST_CASE("TLS refusals", "[tls]") {
    std::string c_got, s_got;
    SECTION("a server certificate from another CA") {
        TlsSession s(context(TlsRole::server, certs().files("b", "n1"), PeerCert::none));
        TlsSession c(context(TlsRole::client, certs().files("a", "client1"), PeerCert::none));
        c.start();
        pump(c, s, c_got, s_got);
        CHECK(c.failed());
        CHECK(c.error().find("certificate") != std::string::npos);
    }
    SECTION("a client certificate from another CA, where one is required") {
        TlsSession s(context(TlsRole::server, certs().files("a", "n1"), PeerCert::required));
        TlsSession c(context(TlsRole::client,
                             {certs().files("a", "n1").ca_file, certs().files("b", "n1").cert_file,
                              certs().files("b", "n1").key_file},
                             PeerCert::none));
        c.write("x", 1);
        pump(c, s, c_got, s_got);
        CHECK(s.failed());
        CHECK(s_got.empty());
    }
    SECTION("no client certificate, where one is required") {
        TlsSession s(context(TlsRole::server, certs().files("a", "n1"), PeerCert::required));
        TlsSession c(
            context(TlsRole::client, {certs().files("a", "n1").ca_file, "", ""}, PeerCert::none));
        c.write("x", 1);
        pump(c, s, c_got, s_got);
        CHECK(s.failed());
        CHECK(s_got.empty());
    }
    SECTION("an expired server certificate") {
        if (!certs().expired) {
            WARN("faketime is not installed: no expired certificate to test with");
            return;
        }
        TlsSession s(context(TlsRole::server, certs().files("old", "n1"), PeerCert::none));
        TlsSession c(context(TlsRole::client, certs().files("a", "client1"), PeerCert::none));
        c.start();
        pump(c, s, c_got, s_got);
        CHECK(c.failed());
        CHECK(c.error().find("expired") != std::string::npos);
    }
    SECTION("plaintext sent to a TLS server") {
        TlsSession s(context(TlsRole::server, certs().files("a", "n1"), PeerCert::none));
        const std::string plain = std::string("\x00\x00\x00\x40", 4) + std::string(64, 'p');
        CHECK_FALSE(looks_like_tls(static_cast<unsigned char>(plain[0])));
        s.feed(plain.data(), plain.size());
        char buf[64];
        CHECK(s.read(buf, sizeof buf) == -1);
        CHECK(s.failed());
    }
    SECTION("a missing or mismatched file is refused when the context is made") {
        std::string error;
        auto files = certs().files("a", "n1");
        files.key_file = certs().files("a", "client1").key_file;
        CHECK_FALSE(TlsContext::make(TlsRole::server, files, PeerCert::none, error));
        CHECK(error.find("does not match") != std::string::npos);
        files.cert_file = "/nonexistent.pem";
        CHECK_FALSE(TlsContext::make(TlsRole::server, files, PeerCert::none, error));
        CHECK(error.find("not a file") != std::string::npos);
    }
}
