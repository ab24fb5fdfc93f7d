// Sends requests to the leaders of shards (docs/sharding.md): what a node does with a
// request for a key of another shard, and what dueq-proxy does with every request.
//
// One client::Client per shard, made on first use, whose seeds are that shard's members:
// it finds the leader by following not_leader redirects, reconnects after a failure and
// pipelines everything on one connection. So a router holds one connection per shard it
// has talked to, whatever the number of its own clients: a node's connections grow
// linearly with the number of shards, not with the number of clients.
//
// Threads: call from the io_context's thread; every callback runs there too.
#pragma once

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "shard/request_map.h"
#include "shard/shard_map.h"

namespace dueq::shard {

struct RouterOptions {
    std::optional<std::string> token;  // said in hello when the shards require one
    std::chrono::milliseconds call_timeout{10'000};
    // How often to ask every other shard for the map it knows (start_discovery).
    std::chrono::milliseconds discovery_every{2'000};
    client::ClientTls tls;  // how the shards' client listeners are reached
};

class Router {
  public:
    Router(boost::asio::io_context& io, ShardMap map, RouterOptions options);
    ~Router();

    const ShardMap& map() const { return map_; }
    // Swaps in a new map (already checked by the caller). A shard's members learned from a
    // later membership than the new map lists are kept. Clients of shards whose members
    // changed are replaced; calls in flight on them complete with `unavailable`.
    void set_map(ShardMap next);

    // Shard `name`'s members as of its committed membership at `membership_index`: taken
    // when that index is past the one the map holds. The shard's client keeps its
    // connection and dials the new members from then on. Returns whether it was taken.
    bool learn_members(const std::string& name, std::vector<ShardMember> members,
                       std::uint64_t membership_index);
    // Bucket b belongs to shard `name` since the move of generation `gen` (this node's own
    // move table, or another router's answer): ShardMap::learn_owner. Returns whether it
    // changed anything.
    bool learn_owner(Bucket b, std::string_view name, MoveGen gen);
    // Every `discovery_every`, asks each shard for the map it routes by and learns the
    // members of every shard in the answer (a shard's nodes know their own membership;
    // others pass on what they learned), and the owners of moved buckets with their
    // generations. So members added to a shard are reached, and a shard whose map-file
    // members were all replaced is still found, without editing the map file.
    // A node passes its own shard `own` and its member id `self`: its own shard is asked
    // through its other members, so that a node that joined or restarted after every member
    // the file lists for another shard was replaced learns where that shard is now from its
    // peers, who followed the change. A proxy passes neither.
    void start_discovery(std::optional<std::size_t> own, std::string self = "");

    using Done = std::function<void(client::Result<client::ResponseFrame>)>;
    // Sends `request` (a client's request map) to shard `shard`, marked as forwarded.
    // `extra_wait`: a blocking take's timeout_ms, added to the deadline.
    // `timeout`: this call's deadline instead of the router's call_timeout.
    void call(std::size_t shard, std::string_view op, const msgpack::object& request, Done done,
              std::chrono::milliseconds extra_wait = std::chrono::milliseconds(0),
              std::optional<std::chrono::milliseconds> timeout = std::nullopt);
    // A client's request (the frame body it sent, already checked by decode_request) sent on
    // to shard `shard` with call(); `done` gets the answer as a frame for that client, under
    // its own `reply_id`, and the answer's code: the shard's, or timeout / unavailable when
    // no answer came (no_answer_frame), or bad_request when the body does not unpack.
    // `body` must have passed wire::validate (net::decode_request walks every frame).
    using Relayed = std::function<void(wire::Code code, std::string frame)>;
    void relay(std::size_t shard, std::string_view op, std::string_view body,
               std::uint64_t reply_id, Relayed done);

    // Where shard `shard`'s leader was last seen (the address its client is connected to),
    // else its first member's address.
    std::string leader_hint(std::size_t shard) const;
    // The address shard `shard`'s client is connected to ("" when none): after one call,
    // that shard's leader, since the client follows not_leader there.
    std::string known_leader(std::size_t shard) const;
  private:
    client::Client& client_for(std::size_t shard);
    // A client on io_ with the router's options, dialing `seeds`.
    std::unique_ptr<client::Client> make_client(std::vector<std::string> seeds);
    // A client of the own shard's other members (start_discovery), or null when it has none.
    client::Client* peers_client();
    void call_on(client::Client& c, std::string_view op, const msgpack::object& request,
                 Done done, std::chrono::milliseconds extra_wait,
                 std::optional<std::chrono::milliseconds> timeout);
    // The own shard's members but this node, as seeds.
    std::vector<std::string> peer_seeds() const;
    // relay(), to shard `shard`; `may_follow`: a wrong_shard answer naming a moved bucket's
    // new owner is learned and the request sent there (once).
    void relay_to(std::size_t shard, std::string op, std::shared_ptr<const std::string> body,
                  std::uint64_t reply_id, Relayed done, bool may_follow);
    // `done` wrapped to run on a later turn of io_, and never once the router is gone.
    Done on_this_loop(Done done);
    // From a wrong_shard answer: the shard its bucket belongs to (learned), or nullopt.
    std::optional<std::size_t> follow_wrong_shard(const msgpack::object& answer);
    void discover();

    std::optional<std::size_t> own_;
    std::string self_;                        // this node's member id in its own shard
    std::unique_ptr<client::Client> peers_;  // peers_client(); null until used
    std::unique_ptr<boost::asio::steady_timer> discovery_timer_;

    boost::asio::io_context& io_;
    ShardMap map_;
    RouterOptions options_;
    std::vector<std::unique_ptr<client::Client>> clients_;  // by shard index; null until used
    // The clients run on io_ (no thread between a request and its answer); their callbacks
    // are posted to a later turn, and once the router is gone they must not run.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The error frame for a call that got no answer from shard `name`.
std::string no_answer_frame(std::uint64_t reply_id, const std::string& name,
                            const client::Error& error);

}  // namespace dueq::shard
