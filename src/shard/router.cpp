#include "shard/router.h"

#include <spdlog/spdlog.h>

#include "client/forward.h"
#include "net/frame.h"
#include "shard/request_map.h"
#include "shard/sharded_client.h"
#include "wire/protocol.h"

namespace dueq::shard {

namespace asio = boost::asio;

namespace {

// The client addresses of `members`, but the one whose id is `skip`.
std::vector<std::string> seeds_of(const std::vector<ShardMember>& members,
                                  std::string_view skip = {}) {
    std::vector<std::string> seeds;
    for (const auto& m : members)
        if (skip.empty() || m.id != skip) seeds.push_back(m.client);
    return seeds;
}

}  // namespace

Router::Router(asio::io_context& io, ShardMap map, RouterOptions options)
    : io_(io), map_(std::move(map)), options_(std::move(options)) {
    clients_.resize(map_.shards.size());
}

Router::~Router() {
    *alive_ = false;
    if (discovery_timer_) discovery_timer_->cancel();
}

void Router::set_map(ShardMap next) {
    keep_learned_owners(map_, next);
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
    peers_.reset();  // the own shard may be listed anew: made again from the new map
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
    if (clients_[*i]) clients_[*i]->set_seeds(seeds_of(s.members));
    if (own_ && *own_ == *i && peers_) {
        if (auto seeds = peer_seeds(); !seeds.empty())
            peers_->set_seeds(std::move(seeds));
        else
            peers_.reset();
    }
    return true;
}

bool Router::learn_owner(Bucket b, std::string_view name, MoveGen gen) {
    const auto i = map_.find(name);
    if (!i || !map_.learn_owner(b, *i, gen)) return false;
    spdlog::info("bucket {} now belongs to shard '{}' (move generation {})", b, name, gen);
    return true;
}

void Router::start_discovery(std::optional<std::size_t> own, std::string self) {
    if (own_ != own || self_ != self) peers_.reset();
    own_ = own;
    self_ = std::move(self);
    if (!discovery_timer_) discovery_timer_ = std::make_unique<asio::steady_timer>(io_);
    discovery_timer_->expires_after(options_.discovery_every);
    discovery_timer_->async_wait([this, alive = std::weak_ptr<bool>(alive_)](auto ec) {
        if (ec || !alive.lock()) return;
        discover();
        start_discovery(own_, self_);
    });
}

void Router::discover() {
    const auto request = request_map(wire::op_name(wire::Op::shards), 0);
    auto learn = [this, request](client::Result<client::ResponseFrame> r) {
        if (!r.ok() || !r->ok) return;  // the next round asks again
        const auto answer = map_from_answer(*r->map);
        if (!answer) return;
        for (const auto& s : answer->shards)
            learn_members(s.name, s.members, s.membership_index);
        if (answer->bucket_count != map_.bucket_count) return;
        for (Bucket b = 0; b < answer->owner_gen.size(); ++b)
            if (answer->owner_gen[b] > map_.gen_of(b))
                learn_owner(b, answer->shards[answer->owner[b]].name, answer->owner_gen[b]);
    };
    for (std::size_t i = 0; i < map_.shards.size(); ++i) {
        client::Client* c = own_ && *own_ == i ? peers_client() : &client_for(i);
        if (c)
            call_on(*c, wire::op_name(wire::Op::shards), request->get(), learn,
                    std::chrono::milliseconds(0), options_.discovery_every);
    }
}

std::vector<std::string> Router::peer_seeds() const {
    if (!own_) return {};
    return seeds_of(map_.shards.at(*own_).members, self_);
}

client::Client* Router::peers_client() {
    if (!peers_) {
        auto seeds = peer_seeds();
        if (seeds.empty()) return nullptr;
        peers_ = make_client(std::move(seeds));
    }
    return peers_.get();
}

client::Client& Router::client_for(std::size_t shard) {
    auto& c = clients_.at(shard);
    if (!c) c = make_client(seeds_of(map_.shards[shard].members));
    return *c;
}

std::unique_ptr<client::Client> Router::make_client(std::vector<std::string> seeds) {
    client::ClientOptions o;
    o.seeds = std::move(seeds);
    o.call_timeout = options_.call_timeout;
    o.token = options_.token;
    o.tls = options_.tls;
    return std::make_unique<client::Client>(io_, std::move(o));
}

Router::Done Router::on_this_loop(Done done) {
    // The client runs on io_ too, so this runs on the router's thread, but possibly while
    // the router is being destroyed or is swapping its clients (a client completes its calls
    // as it closes): it touches nothing of the router but the io_context, and `done` runs
    // on a later turn of the loop.
    return [io = &io_, alive = std::weak_ptr<bool>(alive_),
            done = std::move(done)](client::Result<client::ResponseFrame> r) mutable {
        asio::post(*io, [alive, done = std::move(done), r = std::move(r)]() mutable {
            if (auto a = alive.lock(); a && *a) done(std::move(r));
        });
    };
}

void Router::call(std::size_t shard, std::string_view op, const msgpack::object& request, Done done,
                  std::chrono::milliseconds extra_wait,
                  std::optional<std::chrono::milliseconds> timeout) {
    call_on(client_for(shard), op, request, std::move(done), extra_wait, timeout);
}

void Router::call_on(client::Client& c, std::string_view op, const msgpack::object& request,
                     Done done, std::chrono::milliseconds extra_wait,
                     std::optional<std::chrono::milliseconds> timeout) {
    c.async_raw(op, request, on_this_loop(std::move(done)), {.timeout = timeout}, extra_wait,
                {{std::string(wire::field::forwarded), true}});
}

void Router::relay(std::size_t shard, std::string_view op, std::string_view body,
                   std::uint64_t reply_id, Relayed done) {
    relay_to(shard, std::string(op), std::make_shared<const std::string>(body), reply_id,
             std::move(done), true);
}

void Router::relay_to(std::size_t shard, std::string op, std::shared_ptr<const std::string> body,
                      std::uint64_t reply_id, Relayed done, bool may_follow) {
    auto answer = [this, alive = std::weak_ptr<bool>(alive_), shard, op, body, reply_id, may_follow,
                   name = map_.shards.at(shard).name,
                   done = std::move(done)](client::Result<client::ResponseFrame> r) mutable {
        if (!r.ok() && r.error().code == wire::Code::bad_request)  // the body never left
            return done(r.error().code,
                        net::error_frame(reply_id, r.error().code, r.error().message));
        if (!r.ok()) return done(r.error().code, no_answer_frame(reply_id, name, r.error()));
        // The shard let the bucket go (a move this router had not heard of): learn its
        // owner from the answer and send it there, once.
        if (!r->ok && r->error.code == wire::Code::wrong_shard && may_follow && alive.lock()) {
            if (auto next = follow_wrong_shard(*r->map); next && *next != shard)
                return relay_to(*next, op, body, reply_id, std::move(done), false);
        }
        // The shard's bytes go back as they came, under the client's id.
        auto frame =
            client::frame_with_id(r->body, reply_id, {}, client::BodyCheck::already_validated);
        if (!frame.ok())
            return done(wire::Code::internal,
                        net::error_frame(reply_id, wire::Code::internal, frame.error().message));
        done(r->ok ? wire::Code::ok : r->error.code, std::move(frame).value());
    };
    client_for(shard).async_forward(
        op, *body, on_this_loop(std::move(answer)), {}, std::chrono::milliseconds(0),
        {{std::string(wire::field::forwarded), true}}, client::BodyCheck::already_validated);
}

std::optional<std::size_t> Router::follow_wrong_shard(const msgpack::object& answer) {
    const auto* error = field(answer, wire::field::error);
    if (!error) return std::nullopt;
    const auto* bucket = field(*error, wire::field::bucket);
    const auto* gen = field(*error, wire::field::gen);
    const std::string owner = bytes_of(field(*error, wire::field::shard));
    if (!bucket || !gen || bucket->type != msgpack::type::POSITIVE_INTEGER ||
        gen->type != msgpack::type::POSITIVE_INTEGER || bucket->via.u64 >= map_.bucket_count)
        return std::nullopt;
    const auto b = Bucket(bucket->via.u64);
    learn_owner(b, owner, gen->via.u64);
    const auto i = map_.find(owner);
    // Only a bucket the answer's owner holds by a generation this router knows is followed:
    // two routers whose map files disagree must not send a request back and forth.
    if (!i || map_.owner[b] != *i) return std::nullopt;
    return *i;
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
