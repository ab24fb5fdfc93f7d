#include "shard/shard_map.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "shard/bucket_moves.h"

namespace dueq::shard {
namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) {
    throw MapError(source + ": " + what);
}

void check_keys(const toml::table& t, const std::string& where,
                const std::set<std::string>& allowed, const std::string& source) {
    for (const auto& [k, v] : t)
        if (!allowed.count(std::string(k.str())))
            fail(source, "unknown key '" + std::string(k.str()) + "' in " + where);
}

std::string get_str(const toml::table& t, const char* key, const std::string& where,
                    const std::string& source) {
    auto n = t.get(key);
    if (!n || !n->is_string()) fail(source, where + ": '" + key + "' must be a string");
    return *n->value<std::string>();
}

bool valid_address(const std::string& a) {
    const auto colon = a.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 >= a.size()) return false;
    const std::string port = a.substr(colon + 1);
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) return false;
    const auto p = std::stoul(port);
    return p > 0 && p <= 65535;
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> parse_ranges(const toml::node& n,
                                                                  std::uint32_t count,
                                                                  const std::string& where,
                                                                  const std::string& source) {
    const std::string form = where + ": buckets must be a list of [first, last] pairs";
    if (!n.is_array()) fail(source, form);
    std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
    for (const auto& r : *n.as_array()) {
        const auto* pair = r.as_array();
        if (!pair || pair->size() != 2 || !(*pair)[0].is_integer() || !(*pair)[1].is_integer())
            fail(source, form);
        const auto lo = *(*pair)[0].value<std::int64_t>(), hi = *(*pair)[1].value<std::int64_t>();
        if (lo < 0 || hi < lo || hi >= std::int64_t(count))
            fail(source, where + ": bucket range [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "] is not within 0.." +
                             std::to_string(count - 1));
        out.emplace_back(std::uint32_t(lo), std::uint32_t(hi));
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

std::uint32_t ShardMap::bucket_of(std::string_view queue, std::string_view key) const {
    return shard::bucket_of(queue, key, bucket_count);
}

std::optional<std::size_t> ShardMap::find(std::string_view name) const {
    for (std::size_t i = 0; i < shards.size(); ++i)
        if (shards[i].name == name) return i;
    return std::nullopt;
}

std::uint32_t ShardMap::bucket_total(std::size_t i) const {
    std::uint32_t n = 0;
    for (const auto& [lo, hi] : shards[i].buckets)
        n += hi - lo + 1;
    return n;
}

bool ShardMap::learn_owner(Bucket b, std::size_t i, MoveGen gen) {
    if (b >= bucket_count || i >= shards.size() || gen <= gen_of(b)) return false;
    if (owner_gen.size() < bucket_count) owner_gen.resize(bucket_count, 0);
    owner_gen[b] = gen;
    if (owner[b] == i) return true;
    const std::size_t was = owner[b];
    owner[b] = std::uint16_t(i);
    // Only the two shards' ranges change; rebuilt from `owner`, which is the truth.
    for (std::size_t s : {was, i}) {
        auto& ranges = shards[s].buckets;
        ranges.clear();
        for (Bucket x = 0; x < bucket_count; ++x) {
            if (owner[x] != s) continue;
            if (!ranges.empty() && ranges.back().second + 1 == x)
                ranges.back().second = x;
            else
                ranges.emplace_back(x, x);
        }
    }
    return true;
}

ShardMap parse_shard_map(const std::string& text, const std::string& source) {
    toml::table root;
    try {
        root = toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        std::ostringstream msg;
        msg << e.description() << " (line " << e.source().begin.line << ")";
        fail(source, msg.str());
    }
    check_keys(root, "the shard map", {"version", "buckets", "shards"}, source);
    ShardMap map;
    auto version = root.get("version");
    if (!version || !version->is_integer() || *version->value<std::int64_t>() < 1)
        fail(source, "version must be an integer >= 1 (raise it with every change)");
    map.version = std::uint64_t(*version->value<std::int64_t>());
    auto buckets = root.get("buckets");
    if (!buckets || !buckets->is_integer() || *buckets->value<std::int64_t>() < 1 ||
        *buckets->value<std::int64_t>() > kMaxBuckets)
        fail(source, "buckets must be an integer in 1.." + std::to_string(kMaxBuckets));
    map.bucket_count = std::uint32_t(*buckets->value<std::int64_t>());
    auto shards = root.get("shards");
    if (!shards || !shards->is_array_of_tables() || shards->as_array()->empty())
        fail(source, "the map needs at least one [[shards]] table");
    std::set<std::string> names, ids, clients;
    map.owner.assign(map.bucket_count, 0xffff);
    for (const auto& s : *shards->as_array()) {
        const auto& st = *s.as_table();
        Shard shard;
        shard.name = get_str(st, "name", "[[shards]]", source);
        const std::string where = "shard '" + shard.name + "'";
        check_keys(st, where, {"name", "buckets", "members"}, source);
        if (shard.name.empty() || shard.name.size() > kMaxShardNameBytes)
            fail(source, "[[shards]] name must be 1..64 characters");
        if (!names.insert(shard.name).second) fail(source, where + " appears twice");
        auto members = st.get("members");
        if (!members || !members->is_array() || members->as_array()->empty())
            fail(source, where + ": members must be a non-empty list of {id, client}");
        for (const auto& m : *members->as_array()) {
            if (!m.is_table()) fail(source, where + ": each member is a table {id, client}");
            check_keys(*m.as_table(), where + " members", {"id", "client"}, source);
            ShardMember member{get_str(*m.as_table(), "id", where, source),
                               get_str(*m.as_table(), "client", where, source)};
            if (member.id.empty()) fail(source, where + ": a member has an empty id");
            if (!valid_address(member.client))
                fail(source, where + ": member '" + member.id + "' client '" + member.client +
                                 "' is not host:port");
            if (!ids.insert(member.id).second)
                fail(source, "member id '" + member.id + "' appears twice");
            if (!clients.insert(member.client).second)
                fail(source, "client address " + member.client + " appears twice");
            shard.members.push_back(std::move(member));
        }
        auto ranges = st.get("buckets");
        if (!ranges) fail(source, where + ": buckets is missing");
        shard.buckets = parse_ranges(*ranges, map.bucket_count, where, source);
        if (map.shards.size() >= 0xffff) fail(source, "too many shards");
        for (const auto& [lo, hi] : shard.buckets)
            for (std::uint32_t b = lo; b <= hi; ++b) {
                if (map.owner[b] != 0xffff)
                    fail(source, "bucket " + std::to_string(b) + " belongs to both shard '" +
                                     map.shards[map.owner[b]].name + "' and " + where);
                map.owner[b] = std::uint16_t(map.shards.size());
            }
        map.shards.push_back(std::move(shard));
    }
    for (std::uint32_t b = 0; b < map.bucket_count; ++b)
        if (map.owner[b] == 0xffff)
            fail(source, "bucket " + std::to_string(b) + " belongs to no shard");
    return map;
}

ShardMap load_shard_map_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw MapError("cannot read shard map '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_shard_map(ss.str(), path);
}

ShardMap single_shard_map(const std::string& name, std::vector<ShardMember> members) {
    ShardMap map;
    map.version = 0;
    map.bucket_count = 1;
    map.shards.push_back(Shard{name, std::move(members), {{0, 0}}});
    map.owner.assign(1, 0);
    return map;
}

std::string reload_refusal(const ShardMap& current, const ShardMap& next, const std::string& own) {
    if (next.version <= current.version)
        return "its version " + std::to_string(next.version) + " is not above the current " +
               std::to_string(current.version);
    if (next.bucket_count != current.bucket_count)
        return "it changes the bucket count from " + std::to_string(current.bucket_count) + " to " +
               std::to_string(next.bucket_count) + ", which would move every key";
    if (!own.empty() && !next.find(own))
        return "it has no shard named '" + own + "', the shard this node serves";
    for (std::uint32_t b = 0; b < next.bucket_count; ++b) {
        const auto& was = current.shards[current.owner[b]].name;
        const auto& now = next.shards[next.owner[b]].name;
        if (was == now || current.gen_of(b) > 0) continue;  // a moved bucket: the move decides
        return "it moves bucket " + std::to_string(b) + " from shard '" + was + "' to shard '" +
               now + "'; only `dueqctl shard move` moves a bucket (with its tasks)";
    }
    for (const auto& s : current.shards)
        if (!next.find(s.name)) return "it drops shard '" + s.name + "'";
    return "";
}

void keep_learned_owners(const ShardMap& current, ShardMap& next) {
    for (Bucket b = 0; b < current.bucket_count && b < next.bucket_count; ++b) {
        if (current.gen_of(b) == 0) continue;
        if (auto i = next.find(current.shards[current.owner[b]].name))
            next.learn_owner(b, *i, current.gen_of(b));
    }
}

std::optional<ShardMap> load_for_reload(const std::string& path, const ShardMap& current,
                                        const std::string& own, std::string& why) {
    try {
        auto next = load_shard_map_file(path);
        why = reload_refusal(current, next, own);
        if (why.empty()) return next;
    } catch (const MapError& e) {
        why = e.what();
    }
    return std::nullopt;
}

}  // namespace dueq::shard
