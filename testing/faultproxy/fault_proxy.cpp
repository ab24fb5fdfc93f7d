#include "faultproxy/fault_proxy.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <set>
#include <stdexcept>

#include "faultproxy/control.h"
#include "faultproxy/link.h"

namespace dueq::faultproxy {

namespace asio = boost::asio;
using asio::ip::tcp;

tcp::endpoint parse_endpoint(const std::string& text) {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
        throw std::invalid_argument("address '" + text + "' is not HOST:PORT");
    std::string host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    const std::string port_text = text.substr(colon + 1);
    unsigned port = 0;
    const auto [end, err] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || err != std::errc() || end != port_text.data() + port_text.size() ||
        port > 65535)
        throw std::invalid_argument("address '" + text + "' has a bad port");
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
    if (ec) throw std::invalid_argument("address '" + text + "' is not a literal IP address");
    return {addr, static_cast<unsigned short>(port)};
}

LinkSpec parse_link_spec(const std::string& text) {
    const auto eq = text.find('=');
    const auto at = text.find('@', eq == std::string::npos ? 0 : eq);
    if (eq == std::string::npos || at == std::string::npos)
        throw std::invalid_argument("link '" + text + "' is not NAME=LISTEN@TARGET");
    LinkSpec spec;
    spec.name = text.substr(0, eq);
    // Names travel in control lines and JSON keys: keep them to plain characters.
    const bool plain = !spec.name.empty() && spec.name.size() <= 64 &&
                       spec.name.find_first_not_of(
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") ==
                           std::string::npos;
    if (!plain)
        throw std::invalid_argument("link name '" + spec.name +
                                    "' must be 1-64 characters of [A-Za-z0-9_.-]");
    spec.listen = parse_endpoint(text.substr(eq + 1, at - eq - 1));
    spec.target = parse_endpoint(text.substr(at + 1));
    return spec;
}

FaultProxy::FaultProxy(asio::io_context& io, tcp::endpoint control,
                       const std::vector<LinkSpec>& links, std::uint64_t seed)
    : io_(io), control_(io, control), rng_(seed) {
    std::set<std::string> seen;
    for (const auto& l : links) {
        if (!seen.insert(l.name).second)
            throw std::invalid_argument("link '" + l.name + "' is given twice");
        links_.push_back(std::make_shared<Link>(io, l.name, l.listen, l.target, rng_));
    }
}

FaultProxy::~FaultProxy() {
    stop();
}

void FaultProxy::start() {
    accept_control();
    for (auto& l : links_)
        l->start_accepting();
}

void FaultProxy::stop() {
    if (*stopped_) return;
    *stopped_ = true;
    boost::system::error_code ec;
    control_.close(ec);
    for (auto& weak : controls_)
        if (auto c = weak.lock()) c->close();
    controls_.clear();
    for (auto& l : links_)
        l->stop();
}

std::uint16_t FaultProxy::control_port() const {
    boost::system::error_code ec;
    return control_.local_endpoint(ec).port();
}

std::uint16_t FaultProxy::link_port(const std::string& name) const {
    for (const auto& l : links_) {
        boost::system::error_code ec;
        if (l->name == name) return l->acceptor.local_endpoint(ec).port();
    }
    return 0;
}

std::vector<std::string> FaultProxy::link_names() const {
    std::vector<std::string> names;
    for (const auto& l : links_)
        names.push_back(l->name);
    return names;
}

std::vector<Link*> FaultProxy::select(std::string_view name) const {
    std::vector<Link*> out;
    for (const auto& l : links_)
        if (name == "*" || l->name == name) out.push_back(l.get());
    return out;
}

void FaultProxy::accept_control() {
    control_.async_accept([this, stopped = stopped_](boost::system::error_code ec,
                                                     tcp::socket sock) {
        if (*stopped) return;
        if (ec) {
            // Per-connection failures (EMFILE, aborted handshakes) must not end the control
            // port: a harness that cannot heal its links would wreck every later run.
            spdlog::warn("control: accept failed: {}", ec.message());
            auto retry = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(100));
            retry->async_wait([this, retry, stopped](boost::system::error_code e) {
                if (!e && !*stopped) accept_control();
            });
            return;
        }
        // Forget the control connections that have gone away, so the list stays short.
        std::erase_if(controls_, [](const auto& w) { return w.expired(); });
        auto conn = std::make_shared<ControlConn>(*this, std::move(sock));
        controls_.push_back(conn);
        conn->start();
        accept_control();
    });
}

}  // namespace dueq::faultproxy
