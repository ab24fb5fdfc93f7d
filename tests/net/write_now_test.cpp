#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include <string>
#include <thread>
#include <vector>

#include "net/write_now.h"

using namespace dueq::net;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

struct SocketPair {
    asio::io_context io;
    tcp::socket writer{io}, reader{io};
    SocketPair() {
        tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        writer.connect(acceptor.local_endpoint());
        acceptor.accept(reader);
        writer.non_blocking(true);
        // A small send buffer, so that a few hundred kilobytes fill it.
        writer.set_option(asio::socket_base::send_buffer_size(16 * 1024));
    }
    // Everything the writer has sent so far, reading until `n` bytes have come.
    std::string read(std::size_t n) {
        std::string got(n, '\0');
        asio::read(reader, asio::buffer(got));
        return got;
    }
};

// Pieces of known content: piece i is `size` copies of the letter 'a' + i % 26.
std::vector<std::string> pieces(std::size_t count, std::size_t size) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < count; ++i)
        out.emplace_back(size, char('a' + i % 26));
    return out;
}

std::string joined(const std::vector<std::string>& parts) {
    std::string all;
    for (const auto& p : parts)
        all += p;
    return all;
}

std::vector<asio::const_buffer> buffers_of(const std::vector<std::string>& parts) {
    std::vector<asio::const_buffer> bufs;
    for (const auto& p : parts)
        bufs.emplace_back(asio::buffer(p));
    return bufs;
}

std::string rest_of(const std::vector<asio::const_buffer>& bufs) {
    std::string rest;
    for (const auto& b : bufs)
        rest.append(static_cast<const char*>(b.data()), b.size());
    return rest;
}

// write_now on `bufs`, which must succeed.
void write_ok(SocketPair& s, std::vector<asio::const_buffer>& bufs) {
    boost::system::error_code ec;
    REQUIRE(write_now(s.writer, bufs, ec));
    CHECK_FALSE(ec);
}

}  // namespace

TEST_CASE("write_now sends more than 64 buffers whole when they fit") {
    SocketPair s;
    auto parts = pieces(150, 7);  // Asio passes at most 64 buffers to one sendmsg
    parts.insert(parts.begin() + 70, std::string());  // an empty one in the middle
    parts.emplace_back();                             // and one at the end
    auto bufs = buffers_of(parts);
    write_ok(s, bufs);
    CHECK(bufs.empty());
    const auto all = joined(parts);
    CHECK(s.read(all.size()) == all);
}

TEST_CASE("write_now leaves exactly the unsent tail when the socket buffer fills") {
    SocketPair s;
    const auto parts = pieces(100, 10'000);  // 1 MB: more than the socket takes at once
    auto bufs = buffers_of(parts);
    write_ok(s, bufs);
    REQUIRE_FALSE(bufs.empty());
    const auto all = joined(parts);
    const auto rest = rest_of(bufs);
    REQUIRE(rest.size() < all.size());
    const std::size_t sent = all.size() - rest.size();
    CHECK(all.substr(sent) == rest);  // the tail, cut mid-buffer or not

    // Again, on a socket that is full or nearly so: it takes a piece of the rest at most,
    // from its front, and reports no error.
    write_ok(s, bufs);
    const auto rest2 = rest_of(bufs);
    CHECK(rest2.size() <= rest.size());
    CHECK(rest.substr(rest.size() - rest2.size()) == rest2);

    // What was reported sent arrives, and the rest, written after it, follows it: the
    // receiver sees the whole stream in order, with no byte lost or repeated.
    std::string got;
    std::thread reader([&] { got = s.read(all.size()); });
    s.writer.non_blocking(false);
    asio::write(s.writer, bufs);
    reader.join();
    CHECK(got.size() == all.size());
    CHECK(got == all);
}

TEST_CASE("write_now reports a closed peer as an error") {
    SocketPair s;
    s.reader.close();
    const auto parts = pieces(10, 100'000);
    boost::system::error_code ec;
    bool ok = true;
    // The first write may still be taken by the kernel; the reset arrives by the next ones.
    for (int i = 0; i < 50 && ok; ++i) {
        auto bufs = buffers_of(parts);
        ok = write_now(s.writer, bufs, ec);
    }
    CHECK_FALSE(ok);
    CHECK(ec);
}
