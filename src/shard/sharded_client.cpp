#include "shard/sharded_client.h"

#include <span>
#include <stdexcept>
#include <thread>

#include "shard/request_map.h"
#include "wire/protocol.h"

namespace dueq::shard {

using client::Code;
using client::Error;

namespace {

// The value of a field the answer must hold; throws when it is absent.
const msgpack::object& required(const msgpack::object& map, std::string_view name) {
    const auto* v = field(map, name);
    if (!v) throw std::runtime_error("missing field");
    return *v;
}

const msgpack::object_array& array_of(const msgpack::object& o) {
    if (o.type != msgpack::type::ARRAY) throw std::runtime_error("not an array");
    return o.via.array;
}

// One entry of `shards`; its buckets are marked as its own (index i) in map.owner.
Shard shard_from_answer(const msgpack::object& s, std::uint16_t i, ShardMap& map) {
    Shard out;
    out.name = bytes_of(&required(s, wire::field::name));
    out.membership_index = required(s, wire::field::membership_index).as<std::uint64_t>();
    for (const auto& m : std::span(array_of(required(s, wire::field::members)).ptr,
                                   array_of(required(s, wire::field::members)).size))
        out.members.push_back(
            {bytes_of(&required(m, wire::field::id)), bytes_of(&required(m, wire::field::client))});
    const auto& ranges = array_of(required(s, wire::field::buckets));
    for (const auto& r : std::span(ranges.ptr, ranges.size)) {
        const auto& pair = array_of(r);
        if (pair.size != 2) throw std::runtime_error("a bucket range is not [first, last]");
        const auto lo = pair.ptr[0].as<std::uint32_t>(), hi = pair.ptr[1].as<std::uint32_t>();
        if (hi < lo || hi >= map.bucket_count) throw std::runtime_error("bucket out of range");
        out.buckets.emplace_back(lo, hi);
        for (auto b = lo; b <= hi; ++b)
            map.owner[b] = i;
    }
    // [[bucket, generation], ...]: the buckets moves gave it (absent from older nodes).
    if (const auto* moved = field(s, wire::field::moved)) {
        const auto& list = array_of(*moved);
        for (const auto& m : std::span(list.ptr, list.size)) {
            const auto& pair = array_of(m);
            if (pair.size != 2) throw std::runtime_error("a moved bucket is not [bucket, gen]");
            const auto b = pair.ptr[0].as<std::uint32_t>();
            if (b >= map.bucket_count || map.owner[b] != i)
                throw std::runtime_error("a moved bucket outside the shard's ranges");
            if (map.owner_gen.size() < map.bucket_count) map.owner_gen.resize(map.bucket_count);
            map.owner_gen[b] = pair.ptr[1].as<std::uint64_t>();
        }
    }
    return out;
}

}  // namespace

std::optional<ShardMap> map_from_answer(const msgpack::object& answer) {
    try {
        // Routing hashes keys the way the map's owner does; any other hash routes wrong.
        if (bytes_of(&required(answer, wire::field::hash)) != wire::word::fnv1a64)
            return std::nullopt;
        ShardMap map;
        map.version = required(answer, wire::field::version).as<std::uint64_t>();
        map.bucket_count = required(answer, wire::field::buckets).as<std::uint32_t>();
        if (map.bucket_count == 0 || map.bucket_count > kMaxBuckets) return std::nullopt;
        map.owner.assign(map.bucket_count, 0xffff);
        const auto& shards = array_of(required(answer, wire::field::shards));
        if (shards.size == 0 || shards.size >= 0xffff) return std::nullopt;
        for (std::uint32_t i = 0; i < shards.size; ++i) {
            map.shards.push_back(shard_from_answer(shards.ptr[i], std::uint16_t(i), map));
            if (map.shards.back().members.empty()) return std::nullopt;
        }
        for (auto o : map.owner)
            if (o == 0xffff) return std::nullopt;
        return map;
    } catch (const std::exception&) {  // a field absent or of the wrong type
        return std::nullopt;
    }
}

ShardedClient::ShardedClient(ShardedClientOptions options) : options_(std::move(options)) {}
ShardedClient::~ShardedClient() = default;

client::Status ShardedClient::refresh_map() {
    std::string why = "no seed given";
    for (const auto& seed : options_.client.seeds) {
        auto o = options_.client;
        o.seeds = {seed};
        o.max_redirects = 0;
        client::Client c(o);
        auto r = c.call_raw(wire::op_name(wire::Op::shards),
                            request_map(wire::op_name(wire::Op::shards), 0)->get());
        if (!r.ok() || !r->ok) {
            why = seed + ": " + (r.ok() ? r->error.to_string() : r.error().to_string());
            continue;
        }
        auto map = map_from_answer(*r->map);
        if (!map) {
            why = seed + ": the shards answer holds no usable map";
            continue;
        }
        std::lock_guard lock(mu_);
        std::vector<std::shared_ptr<client::Client>> clients;
        for (const auto& s : map->shards) {
            auto co = options_.client;
            co.seeds.clear();
            for (const auto& m : s.members)
                co.seeds.push_back(m.client);
            clients.push_back(std::make_shared<client::Client>(std::move(co)));
        }
        clients_ = std::move(clients);
        map_ = std::move(map);
        return client::Empty{};
    }
    return Error(Code::unavailable, "no shard map: " + why);
}

std::optional<ShardMap> ShardedClient::map() {
    {
        std::lock_guard lock(mu_);
        if (map_) return map_;
    }
    if (!refresh_map().ok()) return std::nullopt;
    std::lock_guard lock(mu_);
    return map_;
}

std::shared_ptr<client::Client> ShardedClient::client_for(std::string_view queue,
                                                          std::string_view key) {
    if (!map()) return nullptr;
    std::lock_guard lock(mu_);
    return clients_[map_->shard_of(queue, key)];
}

template <class Req>
auto ShardedClient::keyed(const Req& r) -> client::Result<client::ResponseOfT<Req>> {
    auto c = client_for(r.queue, r.key);
    if (!c) return Error(Code::unavailable, "no shard map from the seeds");
    auto answer = c->call(r);
    // The map changed under us (a node answers wrong_shard only to a forwarded or
    // redirect request, so this is rare), or no member the map lists for the shard could
    // be reached, which is what a shard whose members were replaced looks like (the map
    // the seeds give now lists its new members): fetch it again and retry once. Retrying
    // an `unavailable` is safe only when the request never left.
    const bool stale = !answer.ok() && (answer.error().code == Code::wrong_shard ||
                                        (answer.error().code == Code::unavailable &&
                                         !answer.error().maybe_applied));
    if (stale && refresh_map().ok())
        if ((c = client_for(r.queue, r.key))) answer = c->call(r);
    return answer;
}

client::Result<client::PutResponse> ShardedClient::put(const client::PutRequest& r) {
    return keyed(r);
}
client::Result<client::GetResponse> ShardedClient::get(const client::GetRequest& r) {
    return keyed(r);
}
client::Result<client::DeleteResponse> ShardedClient::del(const client::DeleteRequest& r) {
    return keyed(r);
}
client::Result<client::TouchResponse> ShardedClient::touch(const client::TouchRequest& r) {
    return keyed(r);
}
client::Result<client::AckResponse> ShardedClient::ack(const client::AckRequest& r) {
    return keyed(r);
}
client::Result<client::ReleaseResponse> ShardedClient::release(const client::ReleaseRequest& r) {
    return keyed(r);
}
client::Result<client::BuryResponse> ShardedClient::bury(const client::BuryRequest& r) {
    return keyed(r);
}

client::Result<client::TakeResponse> ShardedClient::take(const client::TakeRequest& r) {
    if (!map()) return Error(Code::unavailable, "no shard map from the seeds");
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(r.timeout_ms.value_or(0));
    const std::uint32_t want = r.count.value_or(1);
    client::TakeRequest now = r;
    now.timeout_ms = 0;
    for (;;) {
        std::vector<std::shared_ptr<client::Client>> clients;
        {
            std::lock_guard lock(mu_);
            clients = clients_;
        }
        client::TakeResponse got;
        std::optional<Error> first_error;
        bool any_ok = false;
        const std::size_t first = rotation_++;
        for (std::size_t i = 0; i < clients.size() && got.tasks.size() < want; ++i) {
            now.count = std::uint32_t(want - got.tasks.size());
            auto answer = clients[(first + i) % clients.size()]->take(now);
            if (!answer.ok()) {
                if (!first_error) first_error = answer.error();
                continue;
            }
            any_ok = true;
            for (auto& t : answer->tasks)
                got.tasks.push_back(std::move(t));
        }
        if (!got.tasks.empty()) return got;
        if (!any_ok && first_error) return *first_error;
        if (std::chrono::steady_clock::now() + options_.take_poll >= deadline) return got;
        std::this_thread::sleep_for(options_.take_poll);
    }
}

}  // namespace dueq::shard
