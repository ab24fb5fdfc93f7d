// Tarantool over its binary protocol (IPROTO), the equivalent queue being the Lua in
// peers/tarantool/queue.lua. Only what the benchmark needs: the greeting (read and
// ignored: the guest user needs no auth), and CALL requests matched to their responses
// by sync, any number in flight.
//
// Framing (Tarantool's "Binary protocol" documentation): each packet is a msgpack uint
// length, then two msgpack maps, header and body. A CALL's header is
// {REQUEST_TYPE: CALL, SYNC: n}, its body {FUNCTION_NAME: str, TUPLE: [args]}; the reply
// header holds the status (0 ok, 0x8000 | errcode on error) and the sync, the body
// {DATA: [return values]} or {ERROR_24: message}.
#include <boost/asio/io_context.hpp>

#include <stdexcept>
#include <unordered_map>

#include "backends.h"

namespace dueq::bench {

namespace {

constexpr std::uint8_t kRequestType = 0x00, kSync = 0x01;
constexpr std::uint8_t kTuple = 0x21, kFunctionName = 0x22;
constexpr std::uint8_t kData = 0x30, kError24 = 0x31;
constexpr std::uint8_t kCall = 0x0a;
constexpr std::size_t kGreetingBytes = 128;

using Packer = msgpack::packer<StringSink>;

// Reads a msgpack uint at data[0..size); returns bytes used, 0 if incomplete, -1 if not
// a uint.
long read_uint(const unsigned char* p, std::size_t size, std::uint64_t* out) {
    if (size < 1) return 0;
    const unsigned char tag = p[0];
    auto be = [&](int n) -> long {
        if (size < std::size_t(n + 1)) return 0;
        std::uint64_t v = 0;
        for (int i = 1; i <= n; ++i)
            v = (v << 8) | p[i];
        *out = v;
        return n + 1;
    };
    if (tag <= 0x7f) {
        *out = tag;
        return 1;
    }
    switch (tag) {
        case 0xcc:
            return be(1);
        case 0xcd:
            return be(2);
        case 0xce:
            return be(4);
        case 0xcf:
            return be(8);
        default:
            return -1;
    }
}

std::int64_t as_int(const msgpack::object& o) {
    if (o.type == msgpack::type::POSITIVE_INTEGER) return std::int64_t(o.via.u64);
    if (o.type == msgpack::type::NEGATIVE_INTEGER) return o.via.i64;
    if (o.type == msgpack::type::FLOAT64 || o.type == msgpack::type::FLOAT32)
        return std::int64_t(o.via.f64);
    throw std::runtime_error("expected an integer");
}

std::string as_bytes(const msgpack::object& o) {
    if (o.type == msgpack::type::STR) return std::string(o.via.str.ptr, o.via.str.size);
    if (o.type == msgpack::type::BIN) return std::string(o.via.bin.ptr, o.via.bin.size);
    throw std::runtime_error("expected a string");
}

const msgpack::object* find_key(const msgpack::object& map, std::uint64_t key) {
    if (map.type != msgpack::type::MAP) return nullptr;
    for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
        const auto& kv = map.via.map.ptr[i];
        if (kv.key.type == msgpack::type::POSITIVE_INTEGER && kv.key.via.u64 == key) return &kv.val;
    }
    return nullptr;
}

class TarantoolConnection final : public Stream, public Connection {
  public:
    // `body` is the reply's body map (null on a transport error or an error reply).
    using Handler = std::function<void(Reply, const msgpack::object* data)>;

    TarantoolConnection(boost::asio::io_context& io, const std::string& address, int timeout_ms)
        : Stream(io, address, timeout_ms) {
        const auto greeting = read_exactly(kGreetingBytes);
        if (greeting.rfind("Tarantool", 0) != 0)
            throw std::runtime_error(address + " is not a Tarantool binary port");
    }

    void declare(const QueueSetup& q, OnReply done) override {
        call("dueq_declare", simple(std::move(done)), [&](Packer& pk) {
            pk.pack_array(3);
            pack_str(pk, q.queue);
            pk.pack_int64(q.lead_ms);
            pk.pack_int64(q.ttr_ms);
        });
    }
    void put(std::string_view queue, std::string_view key, std::string_view payload,
             std::int64_t time, OnReply done) override {
        call("dueq_put", simple(std::move(done)), [&](Packer& pk) {
            pk.pack_array(4);
            pack_str(pk, queue);
            pack_str(pk, key);
            pack_str(pk, payload);
            pk.pack_int64(time);
        });
    }
    void get(std::string_view queue, std::string_view key, OnReply done) override {
        call(
            "dueq_get",
            [done = std::move(done)](Reply r, const msgpack::object* data) {
                // A missing task comes back as nil: not_found, as dueq says it.
                if (r.ok &&
                    (!data || data->type != msgpack::type::ARRAY || data->via.array.size == 0 ||
                     data->via.array.ptr[0].type == msgpack::type::NIL))
                    r = Reply{false, "not_found"};
                done(std::move(r));
            },
            [&](Packer& pk) {
                pk.pack_array(2);
                pack_str(pk, queue);
                pack_str(pk, key);
            });
    }
    void take(std::string_view queue, std::int64_t ttr_ms, OnTake done) override {
        call(
            "dueq_take",
            [done = std::move(done)](Reply r, const msgpack::object* data) {
                if (!r.ok) return done(std::move(r), std::nullopt);
                try {
                    // DATA = [result]; result is nil or [key, payload, time, lease].
                    if (!data || data->type != msgpack::type::ARRAY || data->via.array.size == 0)
                        return done(Reply{true, {}}, std::nullopt);
                    const auto& t = data->via.array.ptr[0];
                    if (t.type == msgpack::type::NIL) return done(Reply{true, {}}, std::nullopt);
                    if (t.type != msgpack::type::ARRAY || t.via.array.size < 4)
                        return done(Reply{false, "bad take reply"}, std::nullopt);
                    const auto* f = t.via.array.ptr;
                    done(Reply{true, {}}, Taken{as_bytes(f[0]), as_bytes(f[1]),
                                                std::uint64_t(as_int(f[3])), as_int(f[2])});
                } catch (const std::exception& e) {
                    done(Reply{false, std::string("bad take reply: ") + e.what()}, std::nullopt);
                }
            },
            [&](Packer& pk) {
                pk.pack_array(2);
                pack_str(pk, queue);
                pk.pack_int64(ttr_ms);
            });
    }
    void ack(std::string_view queue, const Taken& task, std::string_view payload, std::int64_t time,
             OnReply done) override {
        call("dueq_ack", simple(std::move(done)), [&](Packer& pk) {
            pk.pack_array(5);
            pack_str(pk, queue);
            pack_str(pk, task.key);
            pk.pack_uint64(task.lease);
            pack_str(pk, payload);
            pk.pack_int64(time);
        });
    }
    void checkpoint(OnReply done) override {
        call("dueq_checkpoint", simple(std::move(done)), [](Packer& pk) { pk.pack_array(0); });
    }
    void is_leader(std::function<void(Reply, bool)> done) override {
        call(
            "dueq_ping",
            [done = std::move(done)](Reply r, const msgpack::object*) { done(r, r.ok); },
            [](Packer& pk) { pk.pack_array(0); });
    }
    // memtx tuple bytes plus index bytes (box.slab.info().items_used + box.info.memory().index).
    void store_bytes(std::function<void(Reply, std::int64_t)> done) override {
        call(
            "dueq_store_bytes",
            [done = std::move(done)](Reply r, const msgpack::object* data) {
                std::int64_t bytes = 0;
                try {
                    if (r.ok && data && data->type == msgpack::type::ARRAY && data->via.array.size)
                        bytes = as_int(data->via.array.ptr[0]);
                } catch (const std::exception& e) {
                    r = Reply{false, e.what()};
                }
                done(std::move(r), bytes);
            },
            [](Packer& pk) { pk.pack_array(0); });
    }
    void close() override { shutdown(); }
    bool broken() const override { return stream_broken(); }
    std::size_t in_flight() const override { return pending_.size(); }

  private:
    static Handler simple(OnReply done) {
        return [done = std::move(done)](Reply r, const msgpack::object*) { done(std::move(r)); };
    }
    static void pack_str(Packer& pk, std::string_view s) {
        pk.pack_str(std::uint32_t(s.size()));
        pk.pack_str_body(s.data(), std::uint32_t(s.size()));
    }

    template <class Args>
    void call(std::string_view function, Handler handler, Args&& pack_args) {
        if (broken()) return handler(Reply{false, "connection broken"}, nullptr);
        const std::uint64_t sync = next_sync_++;
        StringSink out;
        out.bytes.assign("\xce\0\0\0\0", 5);
        Packer pk(out);
        pk.pack_map(2);
        pk.pack_uint8(kRequestType);
        pk.pack_uint8(kCall);
        pk.pack_uint8(kSync);
        pk.pack_uint64(sync);
        pk.pack_map(2);
        pk.pack_uint8(kFunctionName);
        pack_str(pk, function);
        pk.pack_uint8(kTuple);
        pack_args(pk);
        const std::uint32_t len = std::uint32_t(out.bytes.size() - 5);
        for (int i = 0; i < 4; ++i)
            out.bytes[std::size_t(1 + i)] = char(len >> (8 * (3 - i)));
        pending_.emplace(sync, std::move(handler));
        send(out.bytes);
    }

    std::size_t consume(const char* data, std::size_t size) override {
        std::size_t at = 0;
        const auto* bytes = reinterpret_cast<const unsigned char*>(data);
        while (at < size) {
            std::uint64_t len = 0;
            const long head = read_uint(bytes + at, size - at, &len);
            if (head < 0) {
                shutdown();
                return size;
            }
            if (head == 0 || size - at - std::size_t(head) < len) break;
            const char* packet = data + at + head;
            at += std::size_t(head) + len;
            dispatch(packet, std::size_t(len));
            if (broken()) return at;
        }
        return at;
    }

    void dispatch(const char* packet, std::size_t len) {
        try {
            std::size_t off = 0;
            auto header = msgpack::unpack(packet, len, off);
            const auto* sync = find_key(header.get(), kSync);
            const auto* code = find_key(header.get(), kRequestType);
            if (!sync || !code) throw std::runtime_error("reply without sync or status");
            auto it = pending_.find(std::uint64_t(as_int(*sync)));
            if (it == pending_.end()) return;
            auto handler = std::move(it->second);
            pending_.erase(it);
            msgpack::object_handle body;
            if (off < len) body = msgpack::unpack(packet, len, off);
            if (as_int(*code) != 0) {
                std::string message = "tarantool error";
                if (body.get().type == msgpack::type::MAP)
                    if (const auto* m = find_key(body.get(), kError24)) message = as_bytes(*m);
                // The Lua raises errors named like dueq's codes ("lease_mismatch: ...").
                return handler(Reply{false, message}, nullptr);
            }
            const msgpack::object* out = nullptr;
            if (body.get().type == msgpack::type::MAP) out = find_key(body.get(), kData);
            handler(Reply{true, {}}, out);
        } catch (const std::exception& e) {
            on_broken(std::string("undecodable reply: ") + e.what());
            shutdown();
        }
    }

    void on_broken(const std::string& why) override {
        auto pending = std::move(pending_);
        pending_.clear();
        for (auto& [sync, handler] : pending)
            handler(Reply{false, "connection: " + why}, nullptr);
    }

    std::uint64_t next_sync_ = 1;
    std::unordered_map<std::uint64_t, Handler> pending_;
};

}  // namespace

std::shared_ptr<Connection> connect_tarantool(boost::asio::io_context& io,
                                              const std::string& address, int timeout_ms) {
    auto c = std::make_shared<TarantoolConnection>(io, address, timeout_ms);
    c->start_reading(c);
    return c;
}

}  // namespace dueq::bench
