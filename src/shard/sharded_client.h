// A client that routes by itself (docs/sharding.md): it fetches the shard map from any
// node or proxy (the `shards` op), then sends each keyed request straight to the members
// of the key's shard, through one client::Client per shard (which finds that shard's
// leader by following not_leader). No hop through another shard's node or a proxy.
//
// take asks the shards in turn for what is due now, starting from a different shard each
// call so that none starves; when none has anything and timeout_ms > 0 it asks again every
// `take_poll` until the timeout. A blocking take across shards without polling is what
// dueq-proxy offers.
//
// Threads: the blocking methods may be called from any thread but a client callback.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "shard/shard_map.h"

namespace dueq::shard {

// The answer to the `shards` op as a ShardMap; nullopt when it does not hold a whole one.
std::optional<ShardMap> map_from_answer(const msgpack::object& answer);

struct ShardedClientOptions {
    client::ClientOptions client;  // seeds: nodes or proxies to fetch the map from
    std::chrono::milliseconds take_poll{50};
};

class ShardedClient {
  public:
    explicit ShardedClient(ShardedClientOptions options);
    ~ShardedClient();

    // Fetches the map from the first seed that answers; the shard clients follow it.
    // Called by the first request; again whenever the caller wants a fresh map.
    client::Status refresh_map();
    // The map in use (fetched first if need be); nullopt when no seed gave one.
    std::optional<ShardMap> map();

    client::Result<client::PutResponse> put(const client::PutRequest& r);
    client::Result<client::GetResponse> get(const client::GetRequest& r);
    client::Result<client::DeleteResponse> del(const client::DeleteRequest& r);
    client::Result<client::TouchResponse> touch(const client::TouchRequest& r);
    client::Result<client::AckResponse> ack(const client::AckRequest& r);
    client::Result<client::ReleaseResponse> release(const client::ReleaseRequest& r);
    client::Result<client::BuryResponse> bury(const client::BuryRequest& r);
    client::Result<client::TakeResponse> take(const client::TakeRequest& r);

    // The client of the shard that serves (queue, key); null when there is no map.
    // Shared: a map refresh on one thread must not destroy a client another is calling.
    std::shared_ptr<client::Client> client_for(std::string_view queue, std::string_view key);

  private:
    template <class Req>
    auto keyed(const Req& r) -> client::Result<client::ResponseOfT<Req>>;

    ShardedClientOptions options_;
    std::mutex mu_;  // guards map_ and clients_
    std::optional<ShardMap> map_;
    std::vector<std::shared_ptr<client::Client>> clients_;
    std::atomic<std::size_t> rotation_{0};
};

}  // namespace dueq::shard
