// etcd 3.4 through its HTTP/JSON gateway (/v3/kv/put, /v3/kv/range,
// /v3/maintenance/status) on keep-alive connections. HTTP/1.1 answers in request order,
// so requests may be pipelined and replies are matched first in, first out. Responses
// are parsed with Boost.Beast. etcd is a key-value store, not a queue: only put and get
// are meaningful; take and ack answer "unsupported".
#include <boost/asio/io_context.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <deque>
#include <optional>

#include "backends.h"

namespace dueq::bench {

namespace http = boost::beast::http;

namespace {

std::string base64(std::string_view in) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const std::uint32_t v =
            (std::uint8_t(in[i]) << 16) | (std::uint8_t(in[i + 1]) << 8) | std::uint8_t(in[i + 2]);
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += kAlphabet[v & 63];
    }
    if (i < in.size()) {
        std::uint32_t v = std::uint8_t(in[i]) << 16;
        if (i + 1 < in.size()) v |= std::uint8_t(in[i + 1]) << 8;
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

class EtcdConnection final : public Stream, public Connection {
  public:
    using Handler = std::function<void(Reply, const std::string& body)>;

    EtcdConnection(boost::asio::io_context& io, const std::string& address, int timeout_ms)
        : Stream(io, address, timeout_ms), host_(address) {
        reset_parser();
    }

    void declare(const QueueSetup&, OnReply done) override { done(Reply{true, {}}); }
    void put(std::string_view queue, std::string_view key, std::string_view payload, std::int64_t,
             OnReply done) override {
        std::string body = "{\"key\":\"";
        body += base64(std::string(queue) + "/" + std::string(key));
        body += "\",\"value\":\"";
        body += base64(payload);
        body += "\"}";
        post("/v3/kv/put", body, simple(std::move(done)));
    }
    void get(std::string_view queue, std::string_view key, OnReply done) override {
        std::string body =
            "{\"key\":\"" + base64(std::string(queue) + "/" + std::string(key)) + "\"}";
        post("/v3/kv/range", body, simple(std::move(done)));
    }
    void take(std::string_view, std::int64_t, OnTake done) override {
        done(Reply{false, "unsupported"}, std::nullopt);
    }
    void ack(std::string_view, const Taken&, std::string_view, std::int64_t,
             OnReply done) override {
        done(Reply{false, "unsupported"});
    }
    void store_bytes(std::function<void(Reply, std::int64_t)> done) override {
        done(Reply{false, "unsupported"}, 0);
    }
    void checkpoint(OnReply done) override { done(Reply{false, "unsupported"}); }
    void is_leader(std::function<void(Reply, bool)> done) override {
        post("/v3/maintenance/status", "{}",
             [done = std::move(done)](Reply r, const std::string& body) {
                 if (!r.ok) return done(std::move(r), false);
                 try {
                     const auto j = nlohmann::json::parse(body);
                     const auto member = j.at("header").at("member_id").get<std::string>();
                     done(Reply{true, {}}, member == j.at("leader").get<std::string>());
                 } catch (const std::exception& e) {
                     done(Reply{false, std::string("bad status reply: ") + e.what()}, false);
                 }
             });
    }
    void close() override { shutdown(); }
    bool broken() const override { return stream_broken(); }
    std::size_t in_flight() const override { return pending_.size(); }

  private:
    static Handler simple(OnReply done) {
        return [done = std::move(done)](Reply r, const std::string&) { done(std::move(r)); };
    }

    void post(std::string_view target, const std::string& body, Handler handler) {
        if (broken()) return handler(Reply{false, "connection broken"}, {});
        std::string req;
        req.reserve(body.size() + 160);
        req += "POST ";
        req += target;
        req += " HTTP/1.1\r\nHost: ";
        req += host_;
        req += "\r\nContent-Type: application/json\r\nContent-Length: ";
        req += std::to_string(body.size());
        req += "\r\n\r\n";
        req += body;
        pending_.push_back(std::move(handler));
        send(req);
    }

    void reset_parser() {
        parser_.emplace();
        parser_->eager(true);
        parser_->body_limit(64 * 1024 * 1024);
    }

    std::size_t consume(const char* data, std::size_t size) override {
        std::size_t at = 0;
        while (at < size) {
            boost::system::error_code ec;
            const auto n = parser_->put(boost::asio::buffer(data + at, size - at), ec);
            at += n;
            if (ec == http::error::need_more) break;
            if (ec) {
                on_broken("bad HTTP reply: " + ec.message());
                shutdown();
                return size;
            }
            if (!parser_->is_done()) {
                if (n == 0) break;
                continue;
            }
            auto res = parser_->release();
            reset_parser();
            if (pending_.empty()) continue;
            auto handler = std::move(pending_.front());
            pending_.pop_front();
            const auto& body = res.body();
            if (res.result() != http::status::ok) {
                handler(Reply{false, "http " + std::to_string(res.result_int()) + ": " +
                                         body.substr(0, 200)},
                        body);
            } else {
                handler(Reply{true, {}}, body);
            }
            if (broken()) return size;
        }
        return at;
    }

    void on_broken(const std::string& why) override {
        auto pending = std::move(pending_);
        pending_.clear();
        for (auto& handler : pending)
            handler(Reply{false, "connection: " + why}, {});
    }

    std::string host_;
    std::optional<http::response_parser<http::string_body>> parser_;
    std::deque<Handler> pending_;
};

}  // namespace

std::shared_ptr<Connection> connect_etcd(boost::asio::io_context& io, const std::string& address,
                                         int timeout_ms) {
    auto c = std::make_shared<EtcdConnection>(io, address, timeout_ms);
    c->start_reading(c);
    return c;
}

}  // namespace dueq::bench
