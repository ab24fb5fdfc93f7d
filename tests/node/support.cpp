#include "node/support.h"

#include <spdlog/spdlog.h>
#include <catch2/catch.hpp>

#include <future>
#include <random>

namespace dueq::test {

namespace asio = boost::asio;
using asio::ip::tcp;

std::filesystem::path fresh_dir(const std::string& name) {
    std::random_device rd;
    auto dir =
        std::filesystem::temp_directory_path() / ("dueq-test-" + name + "-" + std::to_string(rd()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

std::int64_t wall_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

node::Config TestNode::config_for(const std::string& name) {
    node::Config c = node::parse_config(node::default_config_text(), "built-in");
    c.client_listen = "127.0.0.1:0";
    c.data_dir = fresh_dir(name).string();
    c.session_grace_ms = 200;
    return c;
}

TestNode::TestNode(node::Config config, rocksdb::Env* storage_env) : io_(1) {
    spdlog::set_level(spdlog::level::warn);  // one node per test case: keep the output readable
    node_ = std::make_unique<node::Node>(io_, std::move(config));
    node_->set_storage_env(storage_env);
    auto err = node_->start();
    if (err) FAIL("node failed to start: " << *err);
    port_ = node_->client_port();
    thread_ = std::thread([this] {
        auto guard = asio::make_work_guard(io_);
        io_.run();
    });
}

void TestNode::stop() {
    if (!thread_.joinable()) return;
    std::promise<void> done;
    asio::post(io_, [&] {
        node_->stop();
        done.set_value();
    });
    done.get_future().wait();
    io_.stop();
    thread_.join();
}

TestNode::~TestNode() {
    stop();
}

const msgpack::object* Response::find(const std::string& key) const {
    const auto& r = root();
    if (r.type != msgpack::type::MAP) return nullptr;
    for (std::uint32_t i = 0; i < r.via.map.size; ++i) {
        const auto& kv = r.via.map.ptr[i];
        if (kv.key.type == msgpack::type::STR && kv.key.as<std::string>() == key) return &kv.val;
    }
    return nullptr;
}
bool Response::ok() const {
    auto o = find("ok");
    return o && o->type == msgpack::type::BOOLEAN && o->via.boolean;
}
std::uint64_t Response::id() const {
    return find("id") ? find("id")->as<std::uint64_t>() : ~0ull;
}
std::string Response::error_code() const {
    auto e = find("error");
    if (!e) return "";
    for (std::uint32_t i = 0; i < e->via.map.size; ++i)
        if (e->via.map.ptr[i].key.as<std::string>() == "code")
            return e->via.map.ptr[i].val.as<std::string>();
    return "";
}
std::uint64_t Response::u(const std::string& key) const {
    auto o = find(key);
    REQUIRE(o);
    return o->as<std::uint64_t>();
}
std::int64_t Response::i(const std::string& key) const {
    auto o = find(key);
    REQUIRE(o);
    return o->as<std::int64_t>();
}

RawClient::RawClient(std::uint16_t port) : socket_(io_) {
    socket_.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port));
    socket_.set_option(tcp::no_delay(true));
}

void RawClient::send_raw(const std::string& bytes) {
    asio::write(socket_, asio::buffer(bytes));
}

namespace {
std::string with_length(const std::string& body) {
    const auto n = std::uint32_t(body.size());
    return std::string{char(n >> 24), char(n >> 16), char(n >> 8), char(n)} + body;
}
}  // namespace

void RawClient::send_frame(const std::string& body) {
    send_raw(with_length(body));
}

std::string RawClient::frame(const std::string& op, std::uint64_t id,
                             const std::map<std::string, msgpack::object>& fields) {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> pk(b);
    pk.pack_map(std::uint32_t(2 + fields.size()));
    pk.pack(std::string("op"));
    pk.pack(op);
    pk.pack(std::string("id"));
    pk.pack(id);
    for (const auto& [k, v] : fields) {
        pk.pack(k);
        pk.pack(v);
    }
    return with_length(std::string(b.data(), b.size()));
}

void RawClient::send(const std::string& op, std::uint64_t id,
                     const std::map<std::string, msgpack::object>& fields) {
    send_raw(frame(op, id, fields));
}

bool RawClient::read_exact(char* buf, std::size_t n, std::chrono::milliseconds timeout) {
    std::size_t got = 0;
    bool failed = false;
    std::function<void()> step = [&] {
        socket_.async_read_some(asio::buffer(buf + got, n - got),
                                [&](boost::system::error_code ec, std::size_t k) {
                                    if (ec) {
                                        failed = true;
                                        return;
                                    }
                                    got += k;
                                    if (got < n) step();
                                });
    };
    step();
    last_closed_ = false;
    io_.restart();
    io_.run_for(timeout);
    if (got < n && !failed) {
        socket_.cancel();
        io_.restart();
        io_.run();
        return false;
    }
    last_closed_ = failed;
    return !failed && got == n;
}

std::optional<Response> RawClient::read(std::chrono::milliseconds timeout) {
    char h[4];
    if (!read_exact(h, 4, timeout)) return std::nullopt;
    const auto* p = reinterpret_cast<unsigned char*>(h);
    const std::size_t n = (std::size_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    std::string body(n, '\0');
    if (!read_exact(body.data(), n, timeout)) return std::nullopt;
    return Response{msgpack::unpack(body.data(), body.size())};
}

Response RawClient::call(const std::string& op, std::uint64_t id,
                         const std::map<std::string, msgpack::object>& fields) {
    send(op, id, fields);
    auto r = read();
    REQUIRE(r);
    REQUIRE(r->id() == id);
    return std::move(*r);
}

bool RawClient::closed_by_peer(std::chrono::milliseconds timeout) {
    // Reads past any queued responses; a closed socket fails the read, a silent one
    // times out.
    while (read(timeout)) {
    }
    return last_closed_;
}

void RawClient::close() {
    boost::system::error_code ec;
    socket_.close(ec);
}

}  // namespace dueq::test
