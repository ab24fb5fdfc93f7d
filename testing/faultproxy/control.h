// One control connection of the fault proxy: reads command lines, answers each with one
// reply line. Lines are handled one at a time and reading waits while a reply is being
// written, so a harness that never reads its replies cannot grow the proxy's memory.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <array>
#include <memory>
#include <string>

#include "faultproxy/fault_proxy.h"

namespace dueq::faultproxy {

class ControlConn : public std::enable_shared_from_this<ControlConn> {
  public:
    // Longer lines close the connection: no command comes near it, so it is garbage.
    static constexpr std::size_t kMaxLine = 4096;

    ControlConn(FaultProxy& proxy, boost::asio::ip::tcp::socket sock)
        : proxy_(proxy), sock_(std::move(sock)) {}
    void start() { process(); }
    void close();

  private:
    void process();  // answers the next complete line, or reads more
    void read_more();

    FaultProxy& proxy_;  // untouched once closed: the proxy closes us before it goes
    boost::asio::ip::tcp::socket sock_;
    std::array<char, 4096> buf_{};
    std::string in_, out_;
    bool closed_ = false;
};

}  // namespace dueq::faultproxy
