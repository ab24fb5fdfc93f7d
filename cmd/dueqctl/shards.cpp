// `dueqctl shards`: the shard map a node or proxy routes by, with each shard's leader.
#include "shards.h"

#include <iostream>

#include "command_util.h"
#include "shard/request_map.h"

namespace dueq::dueqctl {

std::optional<Json> fetch_shard_map(Context& ctx, std::string* why) {
    for (const auto& address : ctx.addrs) {
        client::ClientOptions opts = ctx.client_options({address});
        opts.max_redirects = 0;
        client::Client c(std::move(opts));
        auto r = c.call_raw("shards", shard::request_map("shards", 0)->get());
        if (!r.ok()) {
            *why = address + ": " + r.error().to_string();
            continue;
        }
        if (!r->ok) {
            *why = address + ": " + r->error.to_string();
            continue;
        }
        msgpack::sbuffer buf;
        msgpack::pack(buf, *r->map);
        Json map = payload_json(std::string(buf.data(), buf.size()));
        map.erase("id");
        map.erase("ok");
        return map;
    }
    return std::nullopt;
}

namespace {

std::string ranges_text(const Json& ranges) {
    std::string out;
    for (const auto& r : ranges) {
        if (!r.is_array() || r.size() != 2) continue;
        if (!out.empty()) out += ",";
        out += r[0].dump() + "-" + r[1].dump();
    }
    return out;
}

int run_shards(Context& ctx) {
    std::string why;
    auto map = fetch_shard_map(ctx, &why);
    if (!map) {
        std::cerr << "dueqctl: no shard map: " << why << '\n';
        return 1;
    }
    if (ctx.json) {
        print_json(*map);
        return 0;
    }
    std::cout << "shard map version " << map->value("version", 0) << ", "
              << map->value("buckets", 0) << " buckets (" << map->value("hash", "?") << ")";
    const std::string own = map->value("shard", "");
    std::cout << (own.empty() ? " as a proxy sees it" : ", asked of a node of shard " + own)
              << "\n";
    Table t({"SHARD", "BUCKETS", "LEADER", "MEMBERS", "FROM"});
    for (const auto& s : (*map)["shards"]) {
        std::string members;
        for (const auto& m : s["members"])
            members +=
                (members.empty() ? "" : " ") + m.value("id", "?") + "=" + m.value("client", "?");
        const std::string leader = s.value("leader", "");
        // Members come from the map file until the shard's own membership is learned.
        const std::uint64_t index = s.value("membership_index", std::uint64_t{0});
        t.add({s.value("name", "?"), ranges_text(s["buckets"]), leader.empty() ? "-" : leader,
               members, index ? "membership " + std::to_string(index) : "map file"});
    }
    t.print();
    return 0;
}

}  // namespace

void add_shards_command(CLI::App& app, Context& ctx) {
    command(app, ctx, "shards",
            "Show the shard map: its version, each shard's buckets, members and leader.\n\n"
            "Asks the first --addr that answers (a node or a dueq-proxy). A node that is not "
            "sharded shows one shard holding every key. See docs/sharding.md; `dueqctl status "
            "--shards` shows every member of every shard.",
            "  dueqctl --addr 127.0.0.1:7601 shards\n"
            "  dueqctl --addr 127.0.0.1:7711 shards --json\n",
            [&ctx] { return run_shards(ctx); });
}

}  // namespace dueq::dueqctl
