// dueq over its client protocol (docs/protocol.md): length-prefixed msgpack maps, the
// client library's codec for encoding and decoding, any number of requests in flight.
#include <boost/asio/io_context.hpp>

#include <stdexcept>
#include <unordered_map>

#include "backends.h"
#include "client/codec.h"
#include "net/tls.h"

namespace dueq::bench {

namespace cl = dueq::client;

namespace {

// A msgpack bin holding the payload bytes: one msgpack value, as dueq wants it.
std::string as_bin(std::string_view bytes) {
    std::string p;
    const auto n = bytes.size();
    if (n < 256) {
        p = {char(0xc4), char(n)};
    } else if (n < 65536) {
        p = {char(0xc5), char(n >> 8), char(n)};
    } else {
        p = {char(0xc6), char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
    }
    p.append(bytes);
    return p;
}

class DueqConnection final : public Stream, public Connection {
  public:
    using Handler = std::function<void(const cl::ResponseFrame*, const std::string& error)>;

    DueqConnection(boost::asio::io_context& io, const std::string& address, int timeout_ms,
                   std::shared_ptr<const net::TlsContext> tls)
        : Stream(io, address, timeout_ms, std::move(tls)) {}

    // The first request of a connection to a node with an auth token; the answers that
    // follow are in order behind it.
    void hello(const std::string& token) {
        cl::HelloRequest r;
        r.token = token;
        call(r, [](const cl::ResponseFrame*, const std::string&) {});
    }

    void declare(const QueueSetup& q, OnReply done) override {
        cl::DeclareRequest r;
        r.queue = q.queue;
        r.lead_ms = q.lead_ms;
        r.ttr_ms = q.ttr_ms;
        r.late_share = 0.0;
        call(r, simple(std::move(done)));
    }
    void put(std::string_view queue, std::string_view key, std::string_view payload,
             std::int64_t time, OnReply done) override {
        cl::PutRequest r;
        r.queue = queue;
        r.key = key;
        r.payload = wrapped(payload);
        r.time = time;
        call(r, simple(std::move(done)));
    }
    void get(std::string_view queue, std::string_view key, OnReply done) override {
        cl::GetRequest r;
        r.queue = queue;
        r.key = key;
        call(r, simple(std::move(done)));
    }
    void take(std::string_view queue, std::int64_t ttr_ms, OnTake done) override {
        cl::TakeRequest r;
        r.queue = queue;
        r.ttr_ms = ttr_ms;
        call(r, [done = std::move(done)](const cl::ResponseFrame* f, const std::string& err) {
            if (!f) return done(Reply{false, err}, std::nullopt);
            if (!f->ok) return done(Reply{false, f->error.code_name}, std::nullopt);
            cl::TakeResponse t;
            if (auto st = cl::decode_result(*f->map, &t); !st.ok())
                return done(Reply{false, "bad take reply: " + st.error().message}, std::nullopt);
            if (t.tasks.empty()) return done(Reply{true, {}}, std::nullopt);
            auto& task = t.tasks.front();
            done(Reply{true, {}},
                 Taken{std::move(task.key), std::move(task.payload), task.lease, task.time});
        });
    }
    void ack(std::string_view queue, const Taken& task, std::string_view payload, std::int64_t time,
             OnReply done) override {
        cl::AckRequest r;
        r.queue = queue;
        r.key = task.key;
        r.lease = task.lease;
        r.payload = wrapped(payload);
        r.time = time;
        call(r, simple(std::move(done)));
    }
    // dueqd does not report its store's accounting over the wire (measure/queue-mem does).
    void store_bytes(std::function<void(Reply, std::int64_t)> done) override {
        done(Reply{false, "unsupported"}, 0);
    }
    // dueqd keeps its applied state in RocksDB all the time: there is nothing to force.
    void checkpoint(OnReply done) override { done(Reply{false, "unsupported"}); }
    void is_leader(std::function<void(Reply, bool)> done) override {
        call(cl::StatusRequest{},
             [done = std::move(done)](const cl::ResponseFrame* f, const std::string& err) {
                 if (!f) return done(Reply{false, err}, false);
                 if (!f->ok) return done(Reply{false, f->error.code_name}, false);
                 cl::StatusResponse s;
                 if (auto st = cl::decode_result(*f->map, &s); !st.ok())
                     return done(Reply{false, "bad status reply"}, false);
                 done(Reply{true, {}}, s.role == "leader" || s.role == "standalone");
             });
    }
    void close() override { shutdown(); }
    bool broken() const override { return stream_broken(); }
    std::size_t in_flight() const override { return pending_.size(); }

  private:
    static Handler simple(OnReply done) {
        return [done = std::move(done)](const cl::ResponseFrame* f, const std::string& err) {
            if (!f) return done(Reply{false, err});
            if (!f->ok) return done(Reply{false, f->error.code_name});
            done(Reply{true, {}});
        };
    }
    // Payloads repeat: wrap once per distinct (size, content) seen last.
    const std::string& wrapped(std::string_view payload) {
        if (payload != last_payload_) {
            last_payload_ = payload;
            last_wrapped_ = as_bin(payload);
        }
        return last_wrapped_;
    }

    template <class Req>
    void call(const Req& req, Handler handler) {
        if (broken()) return handler(nullptr, "connection broken");
        const std::uint64_t id = next_id_++;
        auto frame = cl::encode_request(req, id);
        if (!frame.ok()) return handler(nullptr, frame.error().to_string());
        pending_.emplace(id, std::move(handler));
        send(*frame);
    }

    std::size_t consume(const char* data, std::size_t size) override {
        std::size_t at = 0;
        while (size - at >= cl::kFrameHeaderBytes) {
            const auto len =
                cl::read_frame_length(reinterpret_cast<const unsigned char*>(data + at));
            if (size - at - cl::kFrameHeaderBytes < len) break;
            auto frame =
                cl::decode_response(std::string_view(data + at + cl::kFrameHeaderBytes, len));
            at += cl::kFrameHeaderBytes + len;
            if (!frame.ok()) {
                on_broken("undecodable reply: " + frame.error().to_string());
                shutdown();
                return at;
            }
            auto it = pending_.find(frame->id);
            if (it == pending_.end()) continue;  // id 0: an error not tied to a request
            auto handler = std::move(it->second);
            pending_.erase(it);
            handler(&*frame, {});
        }
        return at;
    }

    void on_broken(const std::string& why) override {
        auto pending = std::move(pending_);
        pending_.clear();
        for (auto& [id, handler] : pending)
            handler(nullptr, "connection: " + why);
    }

    std::uint64_t next_id_ = 1;
    std::unordered_map<std::uint64_t, Handler> pending_;
    std::string last_payload_, last_wrapped_;
};

}  // namespace

namespace {
// Set once by main, before any connection (set_dueq_credentials).
std::shared_ptr<const net::TlsContext> dueq_tls;
std::optional<std::string> dueq_token;
}  // namespace

std::string set_dueq_credentials(const client::Credentials& credentials) {
    client::ClientOptions o;
    if (auto err = credentials.apply(o); !err.empty()) return err;
    dueq_token = o.token;
    if (!o.tls.enabled) return "";
    std::string error;
    dueq_tls = net::TlsContext::make(net::TlsRole::client,
                                     {o.tls.ca_file, o.tls.cert_file, o.tls.key_file},
                                     net::PeerCert::none, error);
    return dueq_tls ? "" : "TLS: " + error;
}

std::shared_ptr<Connection> connect_dueq(boost::asio::io_context& io, const std::string& address,
                                         int timeout_ms) {
    auto c = std::make_shared<DueqConnection>(io, address, timeout_ms, dueq_tls);
    c->start_reading(c);
    if (dueq_token) c->hello(*dueq_token);
    return c;
}

}  // namespace dueq::bench
