// Shards (docs/sharding.md): the map this node routes by, the `shards` op, and requests
// for keys that belong to another shard, forwarded to its leader or redirected.
#include <spdlog/spdlog.h>

#include "net/frame.h"
#include "node/node.h"
#include "shard/shards_reply.h"

namespace dueq::node {

using queue::Code;

namespace {

// This Raft group's members as a shard map lists them.
std::vector<shard::ShardMember> group_members(const Config& c) {
    if (c.members.empty()) return {{c.node_id, c.client_advertise}};
    std::vector<shard::ShardMember> group;
    for (const auto& m : c.members) group.push_back({m.id, m.client});
    return group;
}

// Why `map` cannot be this node's map: its shard must exist and list exactly this Raft
// group's members, so that clients that route by the map reach the group that has the keys.
std::string own_shard_mismatch(const shard::ShardMap& map, const Config& c) {
    const auto own = map.find(c.shard_name);
    if (!own) return "the shard map has no shard named '" + c.shard_name + "' ([shard] name)";
    if (map.shards[*own].members != group_members(c))
        return "shard '" + c.shard_name +
               "' in the shard map must list this group's members ([cluster] members: id and "
               "client), in the same order";
    return "";
}

}  // namespace

std::optional<std::string> Node::start_sharding() {
    shard::ShardMap map;
    std::string own = config_.shard_name;
    if (config_.shard_map_file.empty()) {
        own = config_.cluster_id;
        map = shard::single_shard_map(own, group_members(config_));
    } else {
        try {
            map = shard::load_shard_map_file(config_.shard_map_file);
        } catch (const std::exception& e) {
            return std::string("shard map: ") + e.what();
        }
        if (auto why = own_shard_mismatch(map, config_); !why.empty())
            return config_.shard_map_file + ": " + why;
        spdlog::info("shard '{}' of {} (shard map version {}, {} of {} buckets)", own,
                     map.shards.size(), map.version, map.bucket_total(*map.find(own)),
                     map.bucket_count);
    }
    own_shard_ = *map.find(own);
    shard::RouterOptions options;
    if (!config_.auth_token.empty()) options.token = config_.auth_token;
    // The other shard answers a write within its proposal timeout (3 s by default); a
    // little more covers the hop, and stays within a client's usual 5 s.
    options.call_timeout = std::chrono::milliseconds(config_.raft.proposal_timeout_ms + 500);
    router_ = std::make_unique<shard::Router>(io_, std::move(map), std::move(options));
    return std::nullopt;
}

std::string Node::reload_shard_map() {
    if (!router_) return "the node is not serving";
    const auto& current = router_->map();
    std::string why = "this node has no [shard] map_file";
    std::optional<shard::ShardMap> next;
    if (!config_.shard_map_file.empty()) {
        next = shard::load_for_reload(config_.shard_map_file, current, config_.shard_name, why);
        if (next) why = own_shard_mismatch(*next, config_);
    }
    if (!why.empty()) {
        spdlog::warn("shard map reload refused: {}; still routing by version {}", why,
                     current.version);
        return why;
    }
    spdlog::info("shard map version {} in use (was {}): {} shards", next->version,
                 current.version, next->shards.size());
    own_shard_ = *next->find(config_.shard_name);
    router_->set_map(std::move(*next));
    return "";
}

bool Node::route_elsewhere(const ConnPtr& conn, const net::Request& req, std::string_view frame,
                           RequestMeter::Clock::time_point started) {
    const auto& map = router_->map();
    if (map.shards.size() == 1 || raft_bug_ == raft::PlantedBug::shard_serves_every_key)
        return false;
    const auto target = net::request_key(req);
    if (!target) return false;
    const std::size_t shard = map.shard_of(target->first, target->second);
    if (shard == own_shard_) return false;
    const auto slot = RequestMeter::slot(req.op);
    if (req.redirect || req.forwarded) {
        // A forwarded request is never forwarded again: two nodes whose maps disagree
        // (one reloaded, one not yet) must not pass it back and forth.
        const std::string why =
            "this key's bucket " + std::to_string(map.bucket_of(target->first, target->second)) +
            " belongs to shard '" + map.shards[shard].name + "' (shard map version " +
            std::to_string(map.version) + ")" +
            (req.forwarded ? "; a forwarded request is not forwarded again" : "");
        conn->send(net::error_frame(req.id, Code::wrong_shard, why, router_->leader_hint(shard)));
        metrics_.requests.record(slot, Code::wrong_shard, started);
        return true;
    }
    std::weak_ptr<net::Connection> weak = conn;
    router_->relay(shard, net::to_string(req.op), frame, req.id,
                   [this, weak, slot, started](Code code, std::string answer) {
                       metrics_.requests.record(slot, code, started);
                       if (auto c = weak.lock(); c && c->open()) c->send(std::move(answer));
                   });
    return true;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::GetShards&) {
    const auto& map = router_->map();
    std::vector<std::string> leaders(map.shards.size());
    for (std::size_t i = 0; i < leaders.size(); ++i)
        leaders[i] = i == own_shard_ ? leader_client_address() : router_->known_leader(i);
    conn->send(shard::shards_reply(id, map, map.shards[own_shard_].name, leaders));
    return Code::ok;
}

}  // namespace dueq::node
