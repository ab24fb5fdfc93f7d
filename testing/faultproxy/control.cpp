// The control port: connection handling and the command grammar (see main.cpp's --help).
#include "faultproxy/control.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <optional>
#include <sstream>
#include <vector>

#include "faultproxy/link.h"

namespace dueq::faultproxy {

namespace asio = boost::asio;

// ---- ControlConn ----

void ControlConn::close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ec;
    sock_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    sock_.close(ec);
}

void ControlConn::process() {
    while (!closed_) {
        const auto nl = in_.find('\n');
        if (nl == std::string::npos) {
            if (in_.size() > kMaxLine) {
                spdlog::warn("control: line longer than {} bytes; closing", kMaxLine);
                close();
                return;
            }
            read_more();
            return;
        }
        std::string line = in_.substr(0, nl);
        in_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.size() > kMaxLine) {
            spdlog::warn("control: line longer than {} bytes; closing", kMaxLine);
            close();
            return;
        }
        // Blank lines are not commands and get no reply (keeps a sloppy harness in step).
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        out_ = proxy_.execute(line) + "\n";
        asio::async_write(sock_, asio::buffer(out_),
                          [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                              if (self->closed_) return;
                              if (ec) return self->close();
                              self->process();
                          });
        return;
    }
}

void ControlConn::read_more() {
    sock_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](
                                                  boost::system::error_code ec, std::size_t n) {
        if (self->closed_) return;
        if (ec) return self->close();  // EOF included: a half line left over means nothing
        self->in_.append(self->buf_.data(), n);
        self->process();
    });
}

// ---- commands ----

namespace {

std::vector<std::string> split(std::string_view line) {
    std::vector<std::string> words;
    std::istringstream in{std::string(line)};
    for (std::string w; in >> w;)
        words.push_back(w);
    return words;
}

std::optional<std::uint64_t> number(const std::string& s, std::uint64_t max) {
    std::uint64_t v = 0;
    const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || err != std::errc() || end != s.data() + s.size() || v > max)
        return std::nullopt;
    return v;
}

constexpr std::uint64_t kMaxDelayMs = 3600 * 1000;
constexpr std::uint64_t kMaxRate = 1ull << 40;

// MODE [ARGS]: "pass" | "blackhole" | any of "delay MIN MAX" and "rate N", each at most once.
std::optional<DirMode> parse_mode(const std::vector<std::string>& w, std::size_t i,
                                  std::string& err) {
    DirMode m;
    if (i >= w.size()) {
        err = "missing mode (pass, blackhole, delay MIN MAX, rate N)";
        return std::nullopt;
    }
    if (w[i] == "pass" || w[i] == "blackhole") {
        m.blackhole = w[i] == "blackhole";
        if (i + 1 != w.size()) err = "'" + w[i] + "' takes no arguments";
        return err.empty() ? std::optional(m) : std::nullopt;
    }
    while (i < w.size()) {
        if (w[i] == "delay" && !m.delay) {
            const auto lo = i + 1 < w.size() ? number(w[i + 1], kMaxDelayMs) : std::nullopt;
            const auto hi = i + 2 < w.size() ? number(w[i + 2], kMaxDelayMs) : std::nullopt;
            if (!lo || !hi || *lo > *hi) {
                err = "delay needs MIN_MS MAX_MS with 0 <= MIN <= MAX <= 3600000";
                return std::nullopt;
            }
            m.delay = true;
            m.delay_min_ms = std::uint32_t(*lo);
            m.delay_max_ms = std::uint32_t(*hi);
            i += 3;
        } else if (w[i] == "rate" && !m.rate) {
            const auto r = i + 1 < w.size() ? number(w[i + 1], kMaxRate) : std::nullopt;
            if (!r || *r == 0) {
                err = "rate needs BYTES_PER_SEC >= 1";
                return std::nullopt;
            }
            m.rate = *r;
            i += 2;
        } else {
            err = "unexpected '" + w[i] + "' in mode";
            return std::nullopt;
        }
    }
    return m;
}

}  // namespace

std::string FaultProxy::execute(std::string_view line) {
    const auto w = split(line);
    if (w.empty()) return "error empty command";
    const std::string& cmd = w[0];
    auto arity = [&](std::size_t n) { return w.size() == n + 1; };

    if (cmd == "ping" && arity(0)) return "ok pong";
    if (cmd == "status" && arity(0)) return "ok " + status_json();
    if (cmd == "heal" && arity(0)) {
        spdlog::info("control: heal");
        for (auto& l : links_) {
            l->rejecting = false;
            l->set_mode(kUp, DirMode{});
            l->set_mode(kDown, DirMode{});
        }
        return "ok";
    }
    const bool link_cmd = cmd == "reject" || cmd == "accept" || cmd == "drop";
    if (link_cmd && arity(1)) {
        const auto links = select(w[1]);
        if (links.empty()) return "error unknown link '" + w[1] + "'";
        spdlog::info("control: {}", line);
        std::size_t closed = 0;
        for (auto* l : links) {
            if (cmd != "accept") closed += l->close_all();
            if (cmd != "drop") l->rejecting = cmd == "reject";
        }
        return cmd == "drop" ? "ok dropped " + std::to_string(closed) : "ok";
    }
    if (cmd == "set" && w.size() >= 4) {
        const auto links = select(w[1]);
        if (links.empty()) return "error unknown link '" + w[1] + "'";
        const std::string& dir = w[2];
        if (dir != "up" && dir != "down" && dir != "both")
            return "error direction must be up, down or both";
        std::string err;
        const auto mode = parse_mode(w, 3, err);
        if (!mode) return "error " + err;
        spdlog::info("control: {}", line);
        for (auto* l : links) {
            if (dir != "down") l->set_mode(kUp, *mode);
            if (dir != "up") l->set_mode(kDown, *mode);
        }
        return "ok";
    }
    if (cmd == "ping" || cmd == "status" || cmd == "heal" || link_cmd || cmd == "set")
        return "error wrong arguments for '" + cmd + "'";
    return "error unknown command '" + cmd.substr(0, 64) + "'";
}

std::string FaultProxy::status_json() const {
    nlohmann::ordered_json links = nlohmann::ordered_json::object();
    for (const auto& l : links_) {
        boost::system::error_code ec;
        links[l->name] = {
            {"port", l->acceptor.local_endpoint(ec).port()},
            {"target", l->target.address().to_string() + ":" + std::to_string(l->target.port())},
            {"up", l->modes[kUp].describe()},
            {"down", l->modes[kDown].describe()},
            {"accept", !l->rejecting},
            {"connections", l->sessions.size()},
            {"bytes_up", l->bytes[kUp]},
            {"bytes_down", l->bytes[kDown]},
            {"accepted", l->accepted},
            {"rejected", l->rejected},
            {"connect_failures", l->connect_failures},
        };
    }
    return nlohmann::ordered_json{{"links", links}}.dump();
}

}  // namespace dueq::faultproxy
