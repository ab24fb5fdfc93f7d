#include "shard/router.h"

#include <spdlog/spdlog.h>

#include "net/frame.h"
#include "shard/request_map.h"
#include "shard/sharded_client.h"
#include "wire/protocol.h"

namespace dueq::shard {

namespace asio = boost::asio;

Router::Router(asio::io_context& io, ShardMap map, RouterOptions options)
    : io_(io), map_(std::move(map)), options_(std::move(options)) {
    clients_.resize(map_.shards.size());
}

Router::~Router() {
    *alive_ = false;
    if (discovery_timer_) discovery_timer_->cancel();
}

void Router::set_map(ShardMap next) {
    std::vector<std::unique_ptr<client::Client>> kept(next.shards.size());
    for (std::size_t i = 0; i < next.shards.size(); ++i) {
        const auto was = map_.find(next.shards[i].name);
        if (!was) continue;
        const Shard& old = map_.shards[*was];
        if (old.membership_index > next.shards[i].membership_index) {
            next.shards[i].members = old.members;
            next.shards[i].membership_index = old.membership_index;
        }
        if (clients_[*was] && old.members == next.shards[i].members)
            kept[i] = std::move(clients_[*was]);
    }
    clients_ = std::move(kept);  // the others are destroyed: their calls end `unavailable`
    map_ = std::move(next);
}

bool Router::learn_members(const std::string& name, std::vector<ShardMember> members,
                           std::uint64_t membership_index) {
    const auto i = map_.find(name);
    if (!i || members.empty() || membership_index <= map_.shards[*i].membership_index)
        return false;
    Shard& s = map_.shards[*i];
    s.membership_index = membership_index;
    if (s.members == members) return true;
    std::string list;
    for (const auto& m : members)
        list += (list.empty() ? "" : ", ") + m.id + " at " + m.client;
    spdlog::info("shard '{}' members now {} (its membership at index {})", name, list,
                 membership_index);
    s.members = std::move(members);
    if (clients_[*i]) {
        std::vector<std::string> seeds;
        for (const auto& m : s.members)
            seeds.push_back(m.client);
        clients_[*i]->set_seeds(std::move(seeds));
    }
    return true;
}

void Router::start_discovery(std::optional<std::size_t> own) {
    own_ = own;
    if (!discovery_timer_) discovery_timer_ = std::make_unique<asio::steady_timer>(io_);
    discovery_timer_->expires_after(options_.discovery_every);
    discovery_timer_->async_wait([this, alive = std::weak_ptr<bool>(alive_)](auto ec) {
        if (ec || !alive.lock()) return;
        discover();
        start_discovery(own_);
    });
}

void Router::discover() {
    const auto request = request_map(wire::op_name(wire::Op::shards), 0);
    for (std::size_t i = 0; i < map_.shards.size(); ++i) {
        if (own_ && *own_ == i) continue;
        call(
            i, wire::op_name(wire::Op::shards), request->get(),
            [this, request](client::Result<client::ResponseFrame> r) {
                if (!r.ok() || !r->ok) return;  // the next round asks again
                const auto answer = map_from_answer(*r->map);
                if (!answer) return;
                for (const auto& s : answer->shards)
                    learn_members(s.name, s.members, s.membership_index);
            },
            std::chrono::milliseconds(0), options_.discovery_every);
    }
}

client::Client& Router::client_for(std::size_t shard) {
    auto& c = clients_.at(shard);
    if (!c) {
        client::ClientOptions o;
        o.seeds.clear();
        for (const auto& m : map_.shards[shard].members)
            o.seeds.push_back(m.client);
        o.call_timeout = options_.call_timeout;
        o.token = options_.token;
        o.tls = options_.tls;
        c = std::make_unique<client::Client>(std::move(o));
    }
    return *c;
}

void Router::call(std::size_t shard, std::string_view op, const msgpack::object& request, Done done,
                  std::chrono::milliseconds extra_wait,
                  std::optional<std::chrono::milliseconds> timeout) {
    std::weak_ptr<bool> alive = alive_;
    // Runs on the client's thread, possibly while the router is being destroyed (a client
    // completes its calls as it closes): it touches nothing of the router but the io_context.
    auto on_answer = [io = &io_, alive,
                      done = std::move(done)](client::Result<client::ResponseFrame> r) mutable {
        asio::post(*io, [alive, done = std::move(done), r = std::move(r)]() mutable {
            if (auto a = alive.lock(); a && *a) done(std::move(r));
        });
    };
    client_for(shard).async_raw(op, request, std::move(on_answer), {.timeout = timeout}, extra_wait,
                                {{std::string(wire::field::forwarded), true}});
}

void Router::relay(std::size_t shard, std::string_view op, std::string_view body,
                   std::uint64_t reply_id, Relayed done) {
    auto request = client::unpack_request(body);
    if (!request.ok())
        return done(wire::Code::bad_request,
                    net::error_frame(reply_id, wire::Code::bad_request, request.error().message));
    // The handle owns the unpacked request until the client has copied it into its frame.
    const auto handle = *request;
    call(shard, op, handle->get(),
         [reply_id, name = map_.shards.at(shard).name,
          done = std::move(done)](client::Result<client::ResponseFrame> r) {
             if (!r.ok()) return done(r.error().code, no_answer_frame(reply_id, name, r.error()));
             done(r->ok ? wire::Code::ok : r->error.code, client::repack_with_id(*r->map, reply_id));
         });
}

std::string Router::known_leader(std::size_t shard) const {
    return shard < clients_.size() && clients_[shard] ? clients_[shard]->current_address() : "";
}

std::string Router::leader_hint(std::size_t shard) const {
    auto at = known_leader(shard);
    return at.empty() ? map_.shards.at(shard).members.front().client : at;
}

std::string no_answer_frame(std::uint64_t reply_id, const std::string& name,
                            const client::Error& error) {
    // Relayed, a failure reads as what it is: not applied only if the request never left.
    const auto code = error.code == wire::Code::unavailable && !error.maybe_applied
                          ? wire::Code::unavailable
                          : wire::Code::timeout;
    return net::error_frame(reply_id, code, "shard '" + name + "': " + error.message);
}

}  // namespace dueq::shard
