// `dueqctl shard move | rebalance | moves`: moving buckets between live shards
// (docs/sharding.md, "Moving buckets"; docs/operations.md, "Adding a shard").
//
// The nodes do the moving: a shard's leader, asked with `move`, copies each bucket to the
// destination and hands it over. This tool paces them (a few buckets at a time, since a
// moving bucket is read-only until it has moved), watches the map for each bucket's new
// owner, and shows progress.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "command_util.h"
#include "shard/request_map.h"
#include "shards.h"
#include "wire/protocol.h"

namespace dueq::dueqctl {

namespace {

using Clock = std::chrono::steady_clock;

// The map as one node or proxy routes by it: each bucket's owner, each shard's members.
struct MapView {
    std::uint32_t buckets = 0;
    std::vector<std::string> names;
    std::vector<std::vector<std::string>> members;  // client addresses, leader first
    std::vector<int> owner;                         // bucket -> index into names
    Json moves = Json::array();                     // the asked node's moves in progress
};

std::optional<MapView> view_of(const Json& map) {
    MapView v;
    v.buckets = map.value("buckets", 0u);
    if (v.buckets == 0 || !map.contains("shards")) return std::nullopt;
    v.owner.assign(v.buckets, -1);
    for (const auto& s : map["shards"]) {
        const int i = int(v.names.size());
        v.names.push_back(s.value("name", "?"));
        std::vector<std::string> m;
        if (auto leader = s.value("leader", ""); !leader.empty()) m.push_back(leader);
        for (const auto& member : s["members"])
            m.push_back(member.value("client", ""));
        v.members.push_back(std::move(m));
        for (const auto& r : s["buckets"])
            for (std::uint32_t b = r[0]; b <= r[1].get<std::uint32_t>() && b < v.buckets; ++b)
                v.owner[b] = i;
    }
    if (map.contains("moves")) v.moves = map["moves"];
    return v;
}

// The map as shard `i`'s own nodes see it: they know first what their shard let go of.
std::optional<MapView> view_from_shard(Context& ctx, const MapView& v, int i) {
    Context one;
    one.addrs = v.members[std::size_t(i)];
    one.credentials = ctx.credentials;
    one.timeout_ms = ctx.timeout_ms;
    std::string why;
    auto map = fetch_shard_map(one, &why);
    return map ? view_of(*map) : std::nullopt;
}

// Sends move or move_cancel for buckets [first, first + count) to shard i's leader.
client::Result<client::ResponseFrame> send_move(Context& ctx, const MapView& v, int i,
                                                std::uint32_t first, std::uint32_t count,
                                                const std::string& to) {
    client::Client c(ctx.client_options(v.members[std::size_t(i)]));
    const auto op = wire::op_name(to.empty() ? wire::Op::move_cancel : wire::Op::move);
    return c.call_raw(op, shard::move_request(first, count, to)->get(), ctx.call_options());
}

bool parse_range(const std::string& text, std::uint32_t* lo, std::uint32_t* hi) {
    try {
        const auto dash = text.find('-');
        std::size_t used = 0;
        *lo = std::uint32_t(std::stoul(text.substr(0, dash), &used));
        *hi = dash == std::string::npos ? *lo : std::uint32_t(std::stoul(text.substr(dash + 1)));
        return *lo <= *hi;
    } catch (const std::exception&) {
        return false;
    }
}

std::string duration_text(double s) {
    char buf[32];
    if (s < 90)
        std::snprintf(buf, sizeof buf, "%.0fs", s);
    else
        std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
    return buf;
}

// Runs the moves in `plan` (bucket -> destination shard index), `at_once` buckets at a time.
int run_plan(Context& ctx, MapView v, const std::map<std::uint32_t, int>& plan, int at_once,
             int stall_s) {
    const bool tty = isatty(STDERR_FILENO);
    std::deque<std::pair<std::uint32_t, int>> waiting(plan.begin(), plan.end());
    std::map<std::uint32_t, std::pair<int, Clock::time_point>> moving;  // bucket -> (dest, since)
    std::size_t done = 0, failed = 0;
    // Since when each bucket was seen neither moving nor moved (cleared when seen moving).
    std::map<std::uint32_t, Clock::time_point> absent;
    std::map<std::uint32_t, Clock::time_point> tried;  // when each bucket's start was first asked
    const auto started = Clock::now();
    auto last_line = started;
    while (!waiting.empty() || !moving.empty()) {
        while (!waiting.empty() && int(moving.size()) < at_once) {
            const auto [b, dest] = waiting.front();
            waiting.pop_front();
            const int src = v.owner[b];
            if (src == dest) {
                ++done;
                continue;
            }
            auto r = send_move(ctx, v, src, b, 1, v.names[std::size_t(dest)]);
            const auto code = r.ok() ? (r->ok ? wire::Code::ok : r->error.code) : r.error().code;
            // No leader, no quorum, no answer: the shard is between leaders or cut off. The
            // bucket goes to the back of the line and is asked for again (a start asked twice
            // starts once), until --stall-s has passed since the first try.
            const auto first_try = tried.try_emplace(b, Clock::now()).first->second;
            if (code != wire::Code::ok && code != wire::Code::bad_request &&
                Clock::now() - first_try < std::chrono::seconds(stall_s)) {
                waiting.emplace_back(b, dest);
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                break;
            }
            if (!r.ok() || !r->ok) {
                std::cerr << "\ndueqctl: bucket " << b << " (shard " << v.names[std::size_t(src)]
                          << " to " << v.names[std::size_t(dest)]
                          << "): " << (r.ok() ? r->error.to_string() : r.error().to_string())
                          << '\n';
                ++failed;
                continue;
            }
            moving[b] = {dest, Clock::now()};
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        // Each source's own nodes say first when a bucket has gone (their router learns it
        // from their log), and which of theirs are still in progress.
        std::set<int> sources;
        for (const auto& [b, m] : moving)
            sources.insert(v.owner[b]);
        for (int src : sources) {
            auto seen = view_from_shard(ctx, v, src);
            if (!seen || seen->buckets != v.buckets) continue;
            std::set<std::uint32_t> in_progress;
            for (const auto& m : seen->moves)
                in_progress.insert(m.value("bucket", 0u));
            for (auto it = moving.begin(); it != moving.end();) {
                const auto b = it->first;
                if (v.owner[b] != src) {
                    ++it;
                    continue;
                }
                const auto now_owner = seen->owner[b];
                const bool arrived = now_owner >= 0 && seen->names[std::size_t(now_owner)] ==
                                                           v.names[std::size_t(it->second.first)];
                const bool stalled =
                    Clock::now() - it->second.second > std::chrono::seconds(stall_s);
                if (in_progress.count(b)) absent.erase(b);
                if (arrived) {
                    v.owner[b] = it->second.first;
                    ++done;
                    it = moving.erase(it);
                } else if (!in_progress.count(b) &&
                           Clock::now() - absent.try_emplace(b, Clock::now()).first->second >
                               std::chrono::seconds(15)) {
                    // Seen neither moving nor moved for 15 s (not once: the node that
                    // answers may lag behind its leader's log, or fall between its log and
                    // its routing catching up).
                    std::cerr << "\ndueqctl: bucket " << b << " did not move (cancelled or refused:"
                              << " see the source leader's log)\n";
                    ++failed;
                    it = moving.erase(it);
                } else if (stalled) {
                    std::cerr << "\ndueqctl: bucket " << b << " has not moved in " << stall_s
                              << " s; it goes on in the background (dueqctl shard moves)\n";
                    ++failed;
                    it = moving.erase(it);
                } else {
                    ++it;
                }
            }
        }
        const auto now = Clock::now();
        if (tty || now - last_line > std::chrono::seconds(5) ||
            (waiting.empty() && moving.empty())) {
            last_line = now;
            const double secs = std::chrono::duration<double>(now - started).count();
            const std::size_t total = plan.size();
            const double rate = secs > 0 ? double(done) / secs : 0;
            const std::size_t left = total - done - failed;
            constexpr int kWidth = 30;
            const int filled = total ? int(kWidth * double(done) / double(total)) : kWidth;
            std::string bar(std::size_t(filled), '#');
            bar.resize(kWidth, '.');
            std::fprintf(stderr, "%s[%s] %zu/%zu buckets, %zu moving, %.1f/s, ETA %s%s",
                         tty ? "\r" : "", bar.c_str(), done, total, moving.size(), rate,
                         rate > 0 ? duration_text(double(left) / rate).c_str() : "?",
                         tty ? "   " : "\n");
        }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - started).count();
    std::fprintf(stderr, "%smoved %zu of %zu buckets in %s%s\n", tty ? "\n" : "", done, plan.size(),
                 duration_text(secs).c_str(),
                 failed ? (", " + std::to_string(failed) + " did not").c_str() : "");
    return failed ? kExitRefused : 0;
}

std::optional<MapView> fetch_view(Context& ctx) {
    std::string why;
    auto map = fetch_shard_map(ctx, &why);
    if (!map) {
        std::cerr << "dueqctl: no shard map: " << why << '\n';
        return std::nullopt;
    }
    auto v = view_of(*map);
    if (!v) std::cerr << "dueqctl: the shards answer holds no usable map\n";
    return v;
}

int find_shard(const MapView& v, const std::string& name) {
    for (std::size_t i = 0; i < v.names.size(); ++i)
        if (v.names[i] == name) return int(i);
    return -1;
}

struct MoveArgs {
    std::string buckets, to, cancel;
    int at_once = 4;
    int stall_s = 120;
    bool dry_run = false;
};

int run_move(Context& ctx, const MoveArgs& a) {
    std::uint32_t lo = 0, hi = 0;
    if (!parse_range(a.buckets, &lo, &hi)) {
        std::cerr << "dueqctl: --buckets must be A-B or A, not '" << a.buckets << "'\n";
        return kExitUsage;
    }
    auto v = fetch_view(ctx);
    if (!v) return kExitCannotConnect;
    const int dest = find_shard(*v, a.to);
    if (dest < 0) {
        std::cerr << "dueqctl: the shard map has no shard '" << a.to << "'\n";
        return kExitUsage;
    }
    if (hi >= v->buckets) {
        std::cerr << "dueqctl: the map has buckets 0-" << v->buckets - 1 << '\n';
        return kExitUsage;
    }
    std::map<std::uint32_t, int> plan;
    for (std::uint32_t b = lo; b <= hi; ++b)
        if (v->owner[b] != dest) plan[b] = dest;
    std::cerr << plan.size() << " of " << (hi - lo + 1) << " buckets to move to shard " << a.to
              << ", " << a.at_once << " at a time\n";
    return run_plan(ctx, std::move(*v), plan, a.at_once, a.stall_s);
}

// Even shares: every shard ends with bucket_count / shards buckets, the first ones one more
// when it does not divide. Buckets leave the fullest shards from the end of their ranges.
std::map<std::uint32_t, int> rebalance_plan(const MapView& v) {
    const std::size_t n = v.names.size();
    std::vector<std::vector<std::uint32_t>> held(n);
    for (std::uint32_t b = 0; b < v.buckets; ++b)
        held[std::size_t(v.owner[b])].push_back(b);
    std::vector<std::size_t> target(n, v.buckets / n);
    for (std::size_t i = 0; i < v.buckets % n; ++i)
        ++target[i];
    std::map<std::uint32_t, int> plan;
    std::vector<std::uint32_t> spare;
    for (std::size_t i = 0; i < n; ++i)
        while (held[i].size() > target[i]) {
            spare.push_back(held[i].back());
            held[i].pop_back();
        }
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = held[i].size(); k < target[i] && !spare.empty(); ++k) {
            plan[spare.back()] = int(i);
            spare.pop_back();
        }
    return plan;
}

int run_rebalance(Context& ctx, const MoveArgs& a) {
    auto v = fetch_view(ctx);
    if (!v) return kExitCannotConnect;
    const auto plan = rebalance_plan(*v);
    std::map<std::pair<int, int>, std::size_t> flows;
    for (const auto& [b, dest] : plan)
        ++flows[{v->owner[b], dest}];
    if (plan.empty()) {
        std::cerr << "buckets are even across " << v->names.size() << " shards: nothing to move\n";
        return 0;
    }
    for (const auto& [f, count] : flows)
        std::cerr << count << " buckets from shard " << v->names[std::size_t(f.first)]
                  << " to shard " << v->names[std::size_t(f.second)] << '\n';
    if (a.dry_run) return 0;
    return run_plan(ctx, std::move(*v), plan, a.at_once, a.stall_s);
}

// Every shard's moves in progress, as each shard's own nodes report them.
int run_moves(Context& ctx, const MoveArgs& a) {
    auto v = fetch_view(ctx);
    if (!v) return kExitCannotConnect;
    std::uint32_t lo = 0, hi = 0;
    if (!a.cancel.empty() && !parse_range(a.cancel, &lo, &hi)) {
        std::cerr << "dueqctl: --cancel must be A-B or A, not '" << a.cancel << "'\n";
        return kExitUsage;
    }
    Json all = Json::array();
    int rc = 0;
    for (std::size_t i = 0; i < v->names.size(); ++i) {
        if (!a.cancel.empty()) {
            for (std::uint32_t first = lo; first <= hi; first += limits::kMaxMoveBuckets) {
                const auto count = std::min<std::uint32_t>(limits::kMaxMoveBuckets, hi - first + 1);
                auto r = send_move(ctx, *v, int(i), first, count, "");
                if (!r.ok() || !r->ok) {
                    std::cerr << "dueqctl: shard " << v->names[i] << ": "
                              << (r.ok() ? r->error.to_string() : r.error().to_string()) << '\n';
                    rc = kExitRefused;
                }
            }
            continue;
        }
        auto seen = view_from_shard(ctx, *v, int(i));
        if (!seen) {
            std::cerr << "dueqctl: shard " << v->names[i] << " did not answer\n";
            rc = kExitNotApplied;
            continue;
        }
        for (auto m : seen->moves) {
            m["of"] = v->names[i];
            all.push_back(m);
        }
    }
    if (!a.cancel.empty()) {
        if (rc == 0)
            std::cerr << "cancelled the moves of buckets " << a.cancel << " still copying\n";
        return rc;
    }
    if (ctx.json) {
        print_json(all);
        return rc;
    }
    Table t({"SHARD", "BUCKET", "PHASE", "WITH", "GEN"});
    for (const auto& m : all)
        t.add({m.value("of", "?"), std::to_string(m.value("bucket", 0u)), m.value("phase", "?"),
               m.value("shard", "?"), std::to_string(m.value("gen", std::uint64_t{0}))});
    t.print();
    return rc;
}

}  // namespace

void add_shard_command(CLI::App& app, Context& ctx) {
    CLI::App* shard = app.add_subcommand("shard", "Move buckets between live shards.");
    shard->require_subcommand(1);
    shard->footer(
        "Adding a shard (docs/operations.md): start its nodes, add it to the map file with no\n"
        "buckets (raise `version`, SIGHUP every node and proxy), then: dueqctl shard rebalance");
    auto a = std::make_shared<MoveArgs>();
    auto* move = command(
        *shard, ctx, "move",
        "Move buckets to another shard, tasks and leases included; waits until they have moved.\n\n"
        "Each bucket's source leader copies it and hands it over; the bucket is read-only while "
        "it is copied (writes get `moving` and clients retry). Interrupted, the moves already "
        "started go on; `dueqctl shard moves` lists them.",
        "  dueqctl --addr 127.0.0.1:7711 shard move --buckets 0-63 --to c\n",
        [&ctx, a] { return run_move(ctx, *a); });
    move->add_option("--buckets", a->buckets, "A-B (inclusive) or one bucket")->required();
    move->add_option("--to", a->to, "The destination shard's name")->required();
    auto rate = [&](CLI::App* c) {
        c->add_option("--at-once", a->at_once, "Buckets moving at the same time (default 4)")
            ->check(CLI::Range(1, int(limits::kMaxMoveBuckets)));
        c->add_option("--stall-s", a->stall_s,
                      "Report a bucket that has not moved after this many seconds (default 120)");
    };
    rate(move);
    auto* rebalance =
        command(*shard, ctx, "rebalance",
                "Move buckets until every shard holds an even share; waits until they have moved.",
                "  dueqctl --addr 127.0.0.1:7711 shard rebalance --dry-run\n"
                "  dueqctl --addr 127.0.0.1:7711 shard rebalance --at-once 8\n",
                [&ctx, a] { return run_rebalance(ctx, *a); });
    rebalance->add_flag("--dry-run", a->dry_run, "Print the plan only");
    rate(rebalance);
    auto* moves = command(*shard, ctx, "moves",
                          "List the moves in progress on every shard, or cancel some.\n\n"
                          "A move can be cancelled while its bucket is being copied; once the "
                          "source has stopped serving it, it completes.",
                          "  dueqctl shard moves\n  dueqctl shard moves --cancel 0-63\n",
                          [&ctx, a] { return run_moves(ctx, *a); });
    moves->add_option("--cancel", a->cancel, "Cancel the moves of buckets A-B still copying");
}

}  // namespace dueq::dueqctl
