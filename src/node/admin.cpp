// NodeAdmin's endpoints (docs/admin.md): /health, /ready, /status, /cluster, /metrics
// (metrics_text.cpp) and the dashboard at /. Everything here runs on the event loop and
// reads state the loop owns, so a request costs the loop its handling time and nothing
// while idle.
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "admin/dashboard.h"
#include "admin/http_get.h"
#include "admin/prometheus.h"
#include "common/version.h"
#include "node/node.h"
#include "node/node_admin.h"
#include "wire/protocol.h"

namespace dueq::node {

using json = nlohmann::json;

namespace {

admin::HttpResponse json_response(unsigned status, const std::string& body) {
    return {status, "application/json", body};
}

// One queue of /status: its counts now, its counters, and its recent ack rate.
json queue_json(const queue::Store& store, const std::string& name, std::int64_t now,
                const NodeMetrics& metrics) {
    const auto st = store.stats(name, now);
    const auto c = store.counters(name);
    json q{{"name", name},
           {"ready", st.ready},
           {"taken", st.taken},
           {"buried", st.buried},
           {"done", st.done},
           {"due_now", st.due_now},
           {"due_now_capped", st.due_now_capped},
           {"late_now", st.late_now},
           {"late_now_capped", st.late_now_capped},
           {"puts", c.puts},
           {"takes", c.takes},
           {"late_takes", c.late_takes},
           {"acks", c.acks},
           {"lease_expiries", c.lease_expiries},
           {"buries", c.buries}};
    if (st.oldest_late) q["oldest_late_age_ms"] = now - *st.oldest_late;
    if (auto it = metrics.queue_acks.find(name);
        it != metrics.queue_acks.end() && it->second.size() > 1) {
        const auto& [t0, a0] = it->second.front();
        const auto& [t1, a1] = it->second.back();
        if (t1 > t0 && a1 >= a0) q["acks_per_second"] = double(a1 - a0) * 1000.0 / double(t1 - t0);
    }
    return q;
}

// The leader changes and the sampled counters the dashboard charts.
void add_history(json& j, const NodeMetrics& metrics) {
    json changes = json::array();
    for (const auto& c : metrics.recent_changes)
        changes.push_back({{"at_ms", c.at_ms},
                           {"term", c.term},
                           {"from", c.from},
                           {"to", c.to},
                           {"reason", c.reason}});
    j["leader_changes"] = std::move(changes);
    json history = json::array();
    for (const auto& h : metrics.history)
        history.push_back({h.at_ms, h.acks, h.takes, h.puts});
    j["history"] = {{"every_ms", NodeMetrics::kSampleMs},
                    {"columns", {"at_ms", "acks", "takes", "puts"}},
                    {"rows", std::move(history)}};
}

}  // namespace

std::optional<std::string> NodeAdmin::start() {
    if (node_.config_.admin_listen.empty()) return std::nullopt;
    try {
        http_ = std::make_unique<admin::HttpServer>(
            node_.io_, node_.config_.admin_listen,
            [this](const admin::HttpRequest& req, admin::HttpServer::Respond respond) {
                on_request(req, std::move(respond));
            });
    } catch (const std::exception& e) {
        return "cannot listen for HTTP admin on " + node_.config_.admin_listen + ": " + e.what();
    }
    http_->set_tls(node_.tls_.admin);
    spdlog::info("HTTP{} admin on {} (port {})", node_.tls_.admin ? "S" : "",
                 node_.config_.admin_listen, http_->port());
    return std::nullopt;
}

void NodeAdmin::stop() {
    if (http_) http_->stop();
}

void NodeAdmin::set_tls(std::shared_ptr<const net::TlsContext> ctx) {
    if (http_) http_->set_tls(std::move(ctx));
}

void NodeAdmin::on_request(const admin::HttpRequest& req, admin::HttpServer::Respond respond) {
    const std::string& p = req.path;
    // Before the log is replayed there is no state to show: only the probes answer.
    if (node_.loading_ && p != "/health" && p != "/ready")
        return respond(json_response(503, R"({"reason":"loading"})"));
    if (p == "/health" || p == "/ready") {
        std::string reason = node_.loading_ ? "loading" : node_.stopped_ ? "stopping" : "";
        if (reason.empty() && p == "/health") reason = unhealthy_reason();
        json body{{"node_id", node_.config_.node_id}, {"healthy", reason.empty()}};
        if (!reason.empty()) body["reason"] = reason;
        if (auto w = warning(); !w.empty()) body["warning"] = w;
        if (!node_.loading_) body["mode"] = to_string(node_.autonomy_->mode());
        return respond(json_response(reason.empty() ? 200 : 503, body.dump() + "\n"));
    }
    if (p == "/reload-shards") {
        if (req.method != "POST") return respond(json_response(405, R"({"error":"use POST"})"));
        const std::string why = node_.reload_shard_map();
        json body{{"reloaded", why.empty()}, {"version", node_.router_->map().version}};
        if (!why.empty()) body["refused"] = why;
        return respond(json_response(why.empty() ? 200 : 409, body.dump() + "\n"));
    }
    if (req.method == "POST") return respond(json_response(405, R"({"error":"GET only"})"));
    if (p == "/status") return respond(json_response(200, status_object().dump() + "\n"));
    if (p == "/cluster") return cluster_json(std::move(respond));
    if (p == "/metrics") return respond({200, admin::PromText::kContentType, metrics_text()});
    if (p == "/" || p == "/index.html")
        return respond({200, "text/html; charset=utf-8", std::string(admin::dashboard_html())});
    respond({404, "text/plain; charset=utf-8",
             "not found; try /, /health, /ready, /status, /cluster or /metrics\n"});
}

// Two weeks before the node's certificate expires, /health says so (still 200): time to
// renew and SIGHUP. Once it has expired, new connections fail: unhealthy.
std::string NodeAdmin::tls_warning() const {
    const std::int64_t not_after = node_.tls_not_after_ms();
    if (not_after <= 0) return {};
    const std::int64_t left_ms = not_after - node_.now_ms();
    if (left_ms > 14LL * 86'400'000) return {};
    if (left_ms <= 0) return "the TLS certificate has expired";
    return "the TLS certificate expires in " + std::to_string(left_ms / 3'600'000) +
           " hours: renew it and send SIGHUP (docs/security.md)";
}

// From kWarnShare of the budget on: writes will soon be refused (store_full).
std::string NodeAdmin::store_warning() const {
    const std::uint64_t used = node_.shell_->store().memory_bytes(), limit = node_.budget_.limit();
    if (double(used) < StoreBudget::kWarnShare * double(limit)) return {};
    return "the store holds " + std::to_string(used * 100 / limit) +
           "% of its budget ([limits] max_store_bytes): writes past it get store_full "
           "(docs/config.md)";
}

std::string NodeAdmin::warning() const {
    std::string out;
    for (const std::string& w : {tls_warning(), node_.loading_ ? std::string() : store_warning()})
        if (!w.empty()) out += (out.empty() ? "" : "; ") + w;
    return out;
}

std::string NodeAdmin::unhealthy_reason() const {
    if (node_.tls_not_after_ms() > 0 && node_.tls_not_after_ms() <= node_.now_ms())
        return "the TLS certificate has expired: peers and clients refuse new connections";
    if (!node_.raft_io_->has_mesh()) return {};  // standalone: serving is all it takes
    const raft::Raft& raft = node_.shell_->raft();
    const std::int64_t now = node_.now_ms();
    // Half an election timeout is five missed heartbeats: late enough not to flap, early
    // enough that /health turns before the Raft timers even start an election.
    const std::int64_t silence = node_.config_.raft.election_timeout_ms / 2;
    auto heard_within = [&](raft::NodeId peer) {
        const auto* seen = node_.raft_io_->peer_seen(peer);
        return seen && seen->last_heard_ms >= 0 && now - seen->last_heard_ms <= silence;
    };
    const std::string mode = to_string(node_.autonomy_->mode());
    const std::string note = mode == wire::word::normal ? "" : " (mode " + mode + ")";
    if (raft.leader() == raft::kNoNode)
        return "no leader for " + std::to_string(now - node_.metrics_.leaderless_since) + " ms" +
               note;
    if (node_.is_leader()) {
        const auto& voters = raft.membership().voters;
        std::size_t heard = 0;
        for (raft::NodeId id : voters)
            if (id == node_.raft_id_ || heard_within(id)) ++heard;
        if (heard * 2 <= voters.size())
            return "leader without a quorum: heard from " + std::to_string(heard) + " of " +
                   std::to_string(voters.size()) + " voters in the last " +
                   std::to_string(silence) + " ms" + note;
        return {};
    }
    if (!heard_within(raft.leader())) {
        const auto* seen = node_.raft_io_->peer_seen(raft.leader());
        const std::string since = seen && seen->last_heard_ms >= 0
                                      ? std::to_string(now - seen->last_heard_ms) + " ms"
                                      : "ever";
        return "nothing from leader " + node_.member_name(raft.leader()) + " for " + since + note;
    }
    return {};
}

json NodeAdmin::status_object() const {
    const StatusInfo s = node_.status_info();
    json j{{"node_id", s.node_id},
           {"version", dueq::version()},
           {"revision", dueq::revision()},
           {"role", s.role},
           {"term", s.term},
           {"leader", s.leader},
           {"leader_id", s.leader_id},
           {"commit_index", s.commit_index},
           {"applied_index", s.applied_index},
           {"last_index", s.last_index},
           {"tasks", s.tasks},
           {"pending", s.pending},
           {"peer_input_dropped", s.peer_input_dropped},
           {"mode", s.mode},
           {"mode_ms", s.mode_ms},
           {"overlay", s.overlay},
           {"store_bytes", node_.shell_->store().memory_bytes()},
           {"store_limit_bytes", node_.budget_.limit()},
           {"store_region_bytes", node_.shell_->store().region_bytes()},
           {"now_ms", node_.now_ms()}};
    if (auto w = store_warning(); !w.empty()) j["store_warning"] = w;
    const std::string reason = unhealthy_reason();
    j["healthy"] = reason.empty();
    if (!reason.empty()) j["unhealthy_reason"] = reason;
    if (const std::int64_t not_after = node_.tls_not_after_ms(); not_after > 0) {
        j["tls_not_after_ms"] = not_after;
        if (auto warning = tls_warning(); !warning.empty()) j["tls_warning"] = warning;
    }
    json peers = json::array();
    for (const auto& p : s.peers) {
        json pj{{"id", p.id}, {"peer", p.peer}, {"connected", p.connected}};
        if (node_.is_leader()) {
            pj["match"] = p.match;
            pj["lag"] = p.lag;
        }
        const MemberEntry* entry = node_.members_.by_name(p.id);
        const auto* seen = entry ? node_.raft_io_->peer_seen(entry->raft_id) : nullptr;
        if (seen && seen->last_heard_ms >= 0)
            pj["last_heard_ms_ago"] = node_.now_ms() - seen->last_heard_ms;
        if (seen && seen->rtt_us >= 0) pj["rtt_ms"] = double(seen->rtt_us) / 1000.0;
        peers.push_back(std::move(pj));
    }
    j["peers"] = std::move(peers);
    const queue::Store& store = node_.shell_->store();
    const std::int64_t now = node_.store_now();
    json queues = json::array();
    for (const auto& name : store.queue_names())
        queues.push_back(queue_json(store, name, now, node_.metrics_));
    j["queues"] = std::move(queues);
    add_history(j, node_.metrics_);
    json members = json::array();
    for (const auto& m : node_.members_info().members) {
        json mj{{"id", m.name},
                {"raft_id", m.raft_id},
                {"role", m.voter ? "voter" : "learner"},
                {"client", m.client},
                {"admin", m.admin}};
        if (node_.is_leader()) mj["lag"] = m.lag;  // a learner's catch-up
        members.push_back(std::move(mj));
    }
    j["members"] = std::move(members);
    return j;
}

void NodeAdmin::cluster_json(admin::HttpServer::Respond respond) {
    // Every member's /status, asked in parallel; this node answers for itself.
    struct Gather {
        json members = json::array();
        std::size_t waiting = 0;
        admin::HttpServer::Respond respond;
    };
    auto g = std::make_shared<Gather>();
    g->respond = std::move(respond);
    std::vector<Member> members;
    for (const auto& m : node_.members_.members)
        members.push_back({m.name, m.peer, m.client, m.admin});
    if (members.empty())
        members.push_back({node_.config_.node_id, "", node_.config_.client_advertise, ""});
    g->members = json::array();
    for (std::size_t i = 0; i < members.size(); ++i)
        g->members.push_back({{"id", members[i].id}, {"admin", members[i].admin}});
    auto finish = [g, self = node_.config_.node_id] {
        if (--g->waiting > 0) return;
        g->respond(json_response(200, json{{"self", self}, {"members", g->members}}.dump() + "\n"));
    };
    g->waiting = members.size() + 1;  // +1: released below, after every request is out
    for (std::size_t i = 0; i < members.size(); ++i) {
        json& slot = g->members[i];
        if (members[i].id == node_.config_.node_id) {
            slot["status"] = status_object();
            finish();
        } else if (members[i].admin.empty()) {
            slot["error"] = "no admin address in [cluster] members";
            finish();
        } else {
            admin::http_get(
                node_.io_, members[i].admin, "/status", std::chrono::milliseconds(800),
                [g, i, finish](admin::HttpGetResult r) {
                    json& slot = g->members[i];
                    if (!r.ok) {
                        slot["error"] = r.error;
                    } else {
                        auto parsed = json::parse(r.body, nullptr, false);
                        if (parsed.is_discarded())
                            slot["error"] = "its /status is not JSON";
                        else
                            slot["status"] = std::move(parsed);
                    }
                    finish();
                },
                node_.tls_.admin_dial);
        }
    }
    finish();
}

void NodeAdmin::observe_raft() {
    const raft::Raft& raft = node_.shell_->raft();
    const std::int64_t now = node_.now_ms();
    if (raft.term() > node_.metrics_.seen_term) {
        // A term this node began: it campaigned (as a candidate, or already won).
        if (raft.role() == raft::Role::candidate ||
            (raft.role() == raft::Role::leader && raft.leader() == node_.raft_id_))
            ++node_.metrics_.elections_started;
        node_.metrics_.seen_term = raft.term();
    }
    if (raft.leader() != node_.metrics_.seen_leader) {
        LeaderChange c{now, raft.term(), node_.member_name(node_.metrics_.seen_leader),
                       node_.member_name(raft.leader()), ""};
        if (raft.leader() == node_.raft_id_) {
            c.reason = "this node won the election";
        } else if (raft.leader() != raft::kNoNode) {
            c.reason = "heard from the new leader";
        } else if (node_.metrics_.seen_leader != raft::kNoNode &&
                   !node_.raft_io_->connected(node_.metrics_.seen_leader)) {
            c.reason = "the link to the leader broke";
        } else {
            c.reason = "the leader fell silent or stepped down";
        }
        if (node_.metrics_.seen_leader != raft::kNoNode || raft.leader() != raft::kNoNode) {
            spdlog::info("leader change in term {}: {} -> {} ({})", c.term,
                         c.from.empty() ? "none" : c.from, c.to.empty() ? "none" : c.to, c.reason);
            ++node_.metrics_.leader_changes;
            node_.metrics_.recent_changes.push_back(std::move(c));
            if (node_.metrics_.recent_changes.size() > NodeMetrics::kKeptChanges)
                node_.metrics_.recent_changes.pop_front();
        }
        if (raft.leader() == raft::kNoNode) node_.metrics_.leaderless_since = now;
        node_.metrics_.seen_leader = raft.leader();
    }
    if (node_.metrics_.seen_leader == raft::kNoNode && node_.metrics_.leaderless_since == 0)
        node_.metrics_.leaderless_since = now;  // no leader since start
    if (node_.metrics_.history.empty() ||
        now - node_.metrics_.history.back().at_ms >= NodeMetrics::kSampleMs) {
        NodeMetrics::Sample s{now, 0, 0, 0};
        const queue::Store& store = node_.shell_->store();
        for (const auto& name : store.queue_names()) {
            const auto c = store.counters(name);
            s.acks += c.acks;
            s.takes += c.takes;
            s.puts += c.puts;
            auto& acks = node_.metrics_.queue_acks[name];
            acks.emplace_back(now, c.acks);
            if (acks.size() > NodeMetrics::kRateSamples) acks.pop_front();
        }
        node_.metrics_.history.push_back(s);
        if (node_.metrics_.history.size() > NodeMetrics::kKeptSamples)
            node_.metrics_.history.pop_front();
    }
}

}  // namespace dueq::node
