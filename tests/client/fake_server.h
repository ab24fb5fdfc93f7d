// A scriptable stand-in for a dueq node: listens on 127.0.0.1 (ephemeral port), reads
// frames, and hands each request, as JSON, to the test's handler on the server's own
// thread. The handler answers at once by returning a response, or keeps the connection
// and answers later with send(), in any order.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <utility>  // before asio: Boost 1.74 uses std::exchange without it

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

namespace dueq::client::testing {

using Json = nlohmann::json;

inline std::string frame_bytes(const std::string& body) {
    std::string out(4, '\0');
    const auto n = static_cast<uint32_t>(body.size());
    out[0] = static_cast<char>(n >> 24);
    out[1] = static_cast<char>(n >> 16);
    out[2] = static_cast<char>(n >> 8);
    out[3] = static_cast<char>(n);
    return out + body;
}

inline std::string json_frame(const Json& j) {
    auto bytes = Json::to_msgpack(j);
    return frame_bytes(std::string(bytes.begin(), bytes.end()));
}

inline Json ok_reply(const Json& request, Json fields = Json::object()) {
    fields["id"] = request["id"];
    fields["ok"] = true;
    return fields;
}

inline Json error_reply(const Json& request, const std::string& code, const std::string& leader = "") {
    Json err = {{"code", code}, {"message", "fake " + code}};
    if (!leader.empty()) err["leader"] = leader;
    return {{"id", request["id"]}, {"ok", false}, {"error", err}};
}

class FakeServer {
public:
    struct Conn {
        explicit Conn(boost::asio::io_context& io) : socket(io) {}
        boost::asio::ip::tcp::socket socket;
        unsigned char header[4] = {};
        std::string body;
        std::deque<std::string> out;
        bool writing = false;
    };
    using ConnPtr = std::shared_ptr<Conn>;
    using Handler = std::function<std::optional<Json>(const ConnPtr&, const Json& request)>;

    explicit FakeServer(Handler handler)
        : handler_(std::move(handler)),
          acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
        accept();
        thread_ = std::thread([this] { io_.run(); });
    }
    ~FakeServer() {
        boost::asio::post(io_, [this] {
            acceptor_.close();
            for (auto& c : conns_) c->socket.close();
        });
        io_.stop();
        thread_.join();
    }

    std::string address() const {
        return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
    }
    int accepted() const { return accepted_.load(); }
    // Every request seen so far, in arrival order (a copy; thread-safe).
    std::vector<Json> requests() const {
        std::lock_guard<std::mutex> lock(mu_);
        return requests_;
    }

    // Thread-safe: may be called from the test or from the handler.
    void send(const ConnPtr& c, const Json& response) { send_raw(c, json_frame(response)); }
    void send_raw(const ConnPtr& c, std::string bytes) {
        boost::asio::post(io_, [this, c, bytes = std::move(bytes)]() mutable {
            c->out.push_back(std::move(bytes));
            write(c);
        });
    }
    void close(const ConnPtr& c) {
        boost::asio::post(io_, [this, c] {
            c->socket.close();
            conns_.erase(c);
        });
    }
    void close_all() {
        boost::asio::post(io_, [this] {
            for (auto& c : conns_) c->socket.close();
            conns_.clear();
        });
    }

private:
    void accept() {
        auto c = std::make_shared<Conn>(io_);
        acceptor_.async_accept(c->socket, [this, c](const boost::system::error_code& ec) {
            if (ec) return;
            ++accepted_;
            conns_.insert(c);
            read_header(c);
            accept();
        });
    }
    void read_header(const ConnPtr& c) {
        boost::asio::async_read(c->socket, boost::asio::buffer(c->header),
                                [this, c](const boost::system::error_code& ec, std::size_t) {
                                    if (ec) return;
                                    const uint32_t n = (uint32_t{c->header[0]} << 24) |
                                                       (uint32_t{c->header[1]} << 16) |
                                                       (uint32_t{c->header[2]} << 8) | c->header[3];
                                    c->body.resize(n);
                                    read_body(c);
                                });
    }
    void read_body(const ConnPtr& c) {
        boost::asio::async_read(c->socket, boost::asio::buffer(c->body),
                                [this, c](const boost::system::error_code& ec, std::size_t) {
                                    if (ec) return;
                                    Json req = Json::from_msgpack(c->body, true, false);
                                    {
                                        std::lock_guard<std::mutex> lock(mu_);
                                        requests_.push_back(req);
                                    }
                                    if (auto resp = handler_(c, req)) send(c, *resp);
                                    read_header(c);
                                });
    }
    void write(const ConnPtr& c) {
        if (c->writing || c->out.empty()) return;
        c->writing = true;
        boost::asio::async_write(c->socket, boost::asio::buffer(c->out.front()),
                                 [this, c](const boost::system::error_code& ec, std::size_t) {
                                     c->writing = false;
                                     if (ec) return;
                                     c->out.pop_front();
                                     write(c);
                                 });
    }

    Handler handler_;
    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    std::thread thread_;
    std::set<ConnPtr> conns_;  // owned by the server thread
    std::atomic<int> accepted_{0};
    mutable std::mutex mu_;  // guards requests_
    std::vector<Json> requests_;
};

// Answers hello with session 1 and ping/status with ok; the common base of handlers.
inline std::optional<Json> basic_reply(const Json& req) {
    const std::string op = req.value("op", "");
    if (op == "hello") return ok_reply(req, {{"session", 1}, {"node_id", "n1"}, {"protocol", 1}});
    if (op == "ping") return ok_reply(req);
    return std::nullopt;
}

}  // namespace dueq::client::testing
