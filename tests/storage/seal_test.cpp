// Record sealing (storage/database.h): every stored value carries a CRC-32C of its key and body.
#include <catch2/catch.hpp>

#include <string>

#include "storage/database.h"

using dueq::storage::seal;
using dueq::storage::unseal;

TEST_CASE("seal then unseal returns the body unchanged") {
    for (const std::string& body : {std::string(), std::string("x"), std::string("hello, log"),
                                   std::string("\0\xff\x00 binary", 10), std::string(5000, 'q')}) {
        const std::string sealed = seal(body);
        CHECK(sealed.size() == body.size() + 4);
        auto back = unseal(sealed);
        REQUIRE(back);
        CHECK(*back == body);
    }
}

TEST_CASE("any single flipped byte of a sealed record is detected") {
    const std::string sealed = seal("the applied index and a task payload {\"a\":1}");
    for (std::size_t i = 0; i < sealed.size(); ++i) {
        for (unsigned char mask : {0x01, 0x80, 0xff}) {
            std::string bad = sealed;
            bad[i] = char(static_cast<unsigned char>(bad[i]) ^ mask);
            INFO("byte " << i << " xor " << int(mask));
            CHECK_FALSE(unseal(bad));
        }
    }
}

TEST_CASE("records too short to hold a checksum, or cut short, are rejected") {
    CHECK_FALSE(unseal(""));
    CHECK_FALSE(unseal("abc"));
    const std::string sealed = seal("some body");
    CHECK_FALSE(unseal(std::string_view(sealed).substr(0, sealed.size() - 1)));
    CHECK_FALSE(unseal(sealed + "!"));
}

TEST_CASE("a sealed value read back under another key is refused") {
    const std::string six = std::string(7, '\0') + '\x06', five = std::string(7, '\0') + '\x05';
    const std::string sealed = seal("entry six", six);
    CHECK(unseal(sealed, six) == "entry six");
    CHECK_FALSE(unseal(sealed, five));
    CHECK_FALSE(unseal(sealed));
}
