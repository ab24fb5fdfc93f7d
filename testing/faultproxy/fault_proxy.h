// A fault-injecting TCP proxy for chaos tests. Each directed peer link of a test cluster
// ("n1-n2": the connections n1 dials to n2) gets its own listener here; a harness steers
// every direction of every link at run time (pass, blackhole, delay, rate, reject, drop)
// over a line-based control port. See testing/faultproxy/README.md for the grammar.
#pragma once

// Before Asio, in its own block: Boost 1.74's awaitable.hpp needs std::exchange in C++20.
#include <utility>

#include <boost/asio.hpp>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace dueq::faultproxy {

struct Link;
class ControlConn;

struct LinkSpec {
    std::string name;
    boost::asio::ip::tcp::endpoint listen, target;
};

// "NAME=LISTEN@TARGET", e.g. "n1-n2=127.0.0.1:0@127.0.0.1:7802". Throws
// std::invalid_argument with a readable message.
LinkSpec parse_link_spec(const std::string& text);
// "HOST:PORT" or "[V6]:PORT" with a literal address (tests bind loopback only).
boost::asio::ip::tcp::endpoint parse_endpoint(const std::string& text);

class FaultProxy {
  public:
    // Binds the control port and every link listener now (throws boost::system::system_error
    // or std::invalid_argument), so the ports are known before the io_context runs.
    FaultProxy(boost::asio::io_context& io, boost::asio::ip::tcp::endpoint control,
               const std::vector<LinkSpec>& links, std::uint64_t seed);
    ~FaultProxy();
    FaultProxy(const FaultProxy&) = delete;
    FaultProxy& operator=(const FaultProxy&) = delete;

    void start();  // begins accepting; call once
    // Closes every listener and connection. Call on the io_context's thread; afterwards the
    // io_context runs out of work and run() returns.
    void stop();

    std::uint16_t control_port() const;
    std::uint16_t link_port(const std::string& name) const;  // 0 for an unknown link
    std::vector<std::string> link_names() const;

    // Runs one control command; returns its reply line without the newline. On the
    // io_context's thread only.
    std::string execute(std::string_view line);

  private:
    friend class ControlConn;
    void accept_control();
    std::string status_json() const;
    // The links a LINK argument names ("*" = all); empty when the name is unknown.
    std::vector<Link*> select(std::string_view name) const;

    boost::asio::io_context& io_;
    boost::asio::ip::tcp::acceptor control_;
    std::mt19937_64 rng_;
    std::vector<std::shared_ptr<Link>> links_;
    std::vector<std::weak_ptr<ControlConn>> controls_;
    // Shared with the control port's handlers, which may run after stop() (as aborted
    // operations) and must then leave *this alone.
    std::shared_ptr<bool> stopped_ = std::make_shared<bool>(false);
};

}  // namespace dueq::faultproxy
