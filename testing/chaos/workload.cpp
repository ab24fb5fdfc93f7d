#include "workload.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "client/client.h"
#include "client/payload.h"

namespace dueq::chaos {
namespace {

using client::Client;

// A unique payload per write, so that a final value names the write that produced it.
struct Values {
    int process;
    std::uint64_t seq = 0;
    std::string next() { return "w" + std::to_string(process) + "-" + std::to_string(++seq); }
};

std::string msgpack_str(const std::string& s) {
    return client::payload_from_json(Json(s).dump()).value();
}

std::unique_ptr<Client> connect(const WorkloadOptions& o, const NodeAddress& node) {
    client::ClientOptions co;
    co.seeds = {node.address};
    co.call_timeout = std::chrono::milliseconds(o.call_timeout_ms);
    co.connect_timeout = std::chrono::milliseconds(500);
    o.credentials.apply(co);
    return std::make_unique<Client>(co);
}

// How one datacenter's processes reach the cluster (WorkloadOptions::via): one client per
// node through the datacenter's links, without the client library's redirects. Calls go
// to the current target: the local node, or the leader it named; a target that does not
// answer sends the next call back to the local node.
class Router {
  public:
    Router(const WorkloadOptions& o, const NodeAddress& local) : o_(o), local_(local.id) {
        if (o.via.empty()) {
            addresses_[local_] = local.address;
        } else {
            addresses_ = o.via;
        }
        for (const auto& [id, address] : addresses_) clients_[id] = make(id);
    }
    Client& current() { return *clients_.at(clients_.count(target()) ? target() : local_); }
    // After a call made on current(): follow a redirect, or fall back to the local node.
    template <class R>
    void observe(const R& r) {
        if (o_.via.empty() || r) return;
        const auto& e = r.error();
        if (e.code == client::Code::not_leader) {
            target_ = local_;
            for (const auto& n : o_.nodes)
                if (!e.leader.empty() && n.address == e.leader && clients_.count(n.id))
                    target_ = n.id;
        } else if (e.code == client::Code::timeout || e.code == client::Code::unavailable) {
            target_ = local_;
        }
    }
    // A fresh connection in place of `c` (its session ends; `c` is gone).
    void reset(Client& c) {
        for (auto& [id, client] : clients_)
            if (client.get() == &c) {
                client.reset();
                client = make(id);
            }
    }

  private:
    const std::string& target() const { return target_.empty() ? local_ : target_; }
    std::unique_ptr<Client> make(const std::string& id) {
        if (o_.via.empty()) return connect(o_, {id, addresses_.at(id)});
        client::ClientOptions co;
        co.seeds = {addresses_.at(id)};
        co.call_timeout = std::chrono::milliseconds(o_.call_timeout_ms);
        co.connect_timeout = std::chrono::milliseconds(500);
        co.max_redirects = 0;
        o_.credentials.apply(co);
        return std::make_unique<Client>(co);
    }
    const WorkloadOptions& o_;
    std::string local_, target_;
    std::map<std::string, std::string> addresses_;
    std::map<std::string, std::unique_ptr<Client>> clients_;
};

class Process {
  public:
    Process(const WorkloadOptions& o, History& h, int id, const NodeAddress& node)
        : o_(o), h_(h), id_(id), node_(node), values_{id}, rng_(o.seed * 7919 + id) {}

  protected:
    // Records the invoke of an op by `process`; end() records its completion.
    Json begin(int process, const char* f, Json fields) {
        Json inv = invoke(process, f, node_.id);
        inv.update(fields);
        h_.write(inv);
        return inv;
    }
    template <class R, class Fill>
    void end(const Json& inv, const R& r, Fill on_ok) {
        Json done = completion(inv, r ? nullptr : &r.error());
        if (r) on_ok(*r, done);
        h_.write(std::move(done));
    }
    // One call, invoke to completion; returns the result.
    template <class Req, class Fill>
    auto run(Client& c, const char* f, const Req& req, Json fields, Fill on_ok) {
        const Json inv = begin(id_, f, std::move(fields));
        auto r = c.call(req);
        end(inv, r, on_ok);
        return r;
    }
    // The same, pipelined: sends the request now; the returned function waits for the
    // answer and records it. `process` must have no other op outstanding (the history
    // pairs an invoke with its process's next completion).
    template <class Req, class Fill>
    std::function<bool()> start(Client& c, int process, const char* f, const Req& req,
                                Json fields, Fill on_ok) {
        Json inv = begin(process, f, std::move(fields));
        auto future = std::make_shared<decltype(c.call_async(req))>(c.call_async(req));
        return [this, inv = std::move(inv), future, on_ok] {
            auto r = future->get();
            end(inv, r, on_ok);
            return r.ok();
        };
    }
    bool coin(double p) { return std::uniform_real_distribution<>(0, 1)(rng_) < p; }
    std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
    }

    const WorkloadOptions& o_;
    History& h_;
    int id_;
    NodeAddress node_;
    Values values_;
    std::mt19937_64 rng_;
};

class FrontEnd : Process {
  public:
    using Process::Process;
    void loop(std::int64_t until) {
        Router router(o_, node_);
        while (wall_ms() < until) {
            const std::string key = key_name(int(uniform(0, o_.keys - 1)));
            const auto roll = uniform(0, 99);
            Client& c = router.current();
            if (roll < 10) router.observe(put(c, key));
            else if (roll < 100 - o_.delete_percent) get(c, key);
            else router.observe(del(c, key));
            std::this_thread::sleep_for(std::chrono::milliseconds(o_.frontend_pause_ms));
        }
    }
    client::Result<client::PutResponse> put(Client& c, const std::string& key) {
        const std::string value = values_.next();
        const std::int64_t time = wall_ms() + uniform(0, o_.refresh_ms);
        client::PutRequest r{.queue = o_.queue, .key = key, .payload = msgpack_str(value),
                             .time = time};
        return run(c, "put", r, {{"key", key}, {"value", value}, {"time", time}},
            [](const client::PutResponse& p, Json& done) { done["version"] = p.version; });
    }

  private:
    void get(Client& c, const std::string& key) {
        const bool leader = o_.only_node.empty() && coin(o_.leader_read_share);
        client::GetRequest r{.queue = o_.queue, .key = key,
                             .consistency = leader ? "leader" : "local"};
        Json fields{{"key", key}};
        if (leader) fields["consistency"] = "leader";
        run(c, "get", r, std::move(fields), [](const client::GetResponse& g, Json& done) {
            done["value"] = payload_text(g.task.payload);
            done["status"] = g.task.status;
            done["time"] = g.task.time;
            done["version"] = g.task.version;
        });
    }
    client::Result<client::DeleteResponse> del(Client& c, const std::string& key) {
        client::DeleteRequest r{.queue = o_.queue, .key = key};
        return run(c, "delete", r, {{"key", key}}, [](const client::DeleteResponse&, Json&) {});
    }
};

class Refresher : Process {
  public:
    Refresher(const WorkloadOptions& o, History& h, int id, const NodeAddress& node, bool rod,
              std::atomic<std::uint64_t>& acks)
        : Process(o, h, id, node), rod_(rod), acks_(acks) {}

    void loop(std::int64_t until) {
        Router router(o_, node_);
        while (wall_ms() < until) {
            client::TakeRequest r{.queue = o_.queue, .count = 4, .timeout_ms = 500,
                                  .ttr_ms = o_.ttr_ms, .release_on_disconnect = rod_};
            std::vector<client::Task> tasks;
            // A lease is acked where it was granted.
            Client* c = &router.current();
            auto taken = run(*c, "take", r, {{"ttr", o_.ttr_ms}, {"rod", rod_}},
                             [&](const client::TakeResponse& t, Json& done) {
                                 Json list = Json::array();
                                 for (const auto& task : t.tasks)
                                     list.push_back({{"key", task.key},
                                                     {"value", payload_text(task.payload)},
                                                     {"lease", task.lease},
                                                     {"lease_until", task.lease_until},
                                                     {"time", task.time}});
                                 done["tasks"] = std::move(list);
                                 tasks = t.tasks;
                             });
            router.observe(taken);
            if (!taken) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            // The acks and releases of one batch go out together, as a pool of workers
            // would send them: across datacenters each one waits a quorum round trip.
            std::vector<std::function<bool()>> answers;
            for (std::size_t i = 0; i < tasks.size(); ++i) {
                if (coin(o_.abandon_share)) {
                    if (!rod_) {
                        abandon(tasks[i], std::nullopt);
                        continue;
                    }
                    // Drop the connection: every lease still held in this batch goes back
                    // after the session grace.
                    router.reset(*c);
                    const auto gone = wall_ms();
                    for (; i < tasks.size(); ++i) abandon(tasks[i], gone);
                    break;
                }
                // The call to the token provider.
                std::this_thread::sleep_for(std::chrono::milliseconds(uniform(0, 10)));
                const int slot = id_ * 1000 + int(i) + 1;
                answers.push_back(coin(o_.release_share) ? release(*c, slot, tasks[i])
                                                         : ack(*c, slot, tasks[i]));
            }
            for (auto& answer : answers) answer();
        }
    }

  private:
    void abandon(const client::Task& t, std::optional<std::int64_t> disconnect_t) {
        Json e{{"type", "abandon"}, {"process", id_}, {"node", node_.id}, {"key", t.key},
               {"lease", t.lease}, {"rod", rod_}};
        if (disconnect_t) e["disconnect_t"] = *disconnect_t;
        h_.write(std::move(e));
    }
    std::function<bool()> ack(Client& c, int process, const client::Task& t) {
        const std::string value = values_.next();
        const std::int64_t time = wall_ms() + o_.refresh_ms + uniform(0, 500);
        client::AckRequest r{.queue = o_.queue, .key = t.key, .lease = t.lease,
                             .payload = msgpack_str(value), .time = time};
        auto answer = start(c, process, "ack", r,
                            {{"key", t.key}, {"lease", t.lease}, {"value", value}, {"time", time}},
                            [](const client::AckResponse& a, Json& e) { e["version"] = a.version; });
        return [this, answer] {
            const bool ok = answer();
            if (ok) ++acks_;
            return ok;
        };
    }
    std::function<bool()> release(Client& c, int process, const client::Task& t) {
        client::ReleaseRequest r{.queue = o_.queue, .key = t.key, .lease = t.lease};
        return start(c, process, "release", r, {{"key", t.key}, {"lease", t.lease}},
                     [](const client::ReleaseResponse&, Json&) {});
    }

    bool rod_;
    std::atomic<std::uint64_t>& acks_;
};

}  // namespace

std::string key_name(int i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "tok-%04d", i);
    return buf;
}

std::uint64_t run_workload(const WorkloadOptions& o, History& h) {
    const std::int64_t until = wall_ms() + std::int64_t(o.seconds) * 1000;
    std::atomic<std::uint64_t> acks{0};
    std::vector<std::thread> threads;
    int next_id = 2;  // 1: the seeder
    // Every token exists before the refreshers start (retried: the cluster may still be
    // settling). Process ids: front ends and refreshers count on from here.
    if (o.seed_keys) {
        FrontEnd seeder(o, h, 1, o.nodes.front());
        auto c = connect(o, o.nodes.front());
        for (int k = 0; k < o.keys && wall_ms() < until; ++k) seeder.put(*c, key_name(k));
    }
    for (const auto& node : o.nodes) {
        if (!o.only_node.empty() && node.id != o.only_node) {
            next_id += 1 + o.refreshers_per_node;  // process ids stay those of a full run
            continue;
        }
        const int fe = next_id++;
        threads.emplace_back([&o, &h, fe, node, until] { FrontEnd(o, h, fe, node).loop(until); });
        for (int r = 0; r < o.refreshers_per_node; ++r) {
            const int id = next_id++;
            const bool rod = r % 2 == 0;
            threads.emplace_back([&o, &h, &acks, id, node, rod, until] {
                Refresher(o, h, id, node, rod, acks).loop(until);
            });
        }
    }
    for (auto& t : threads) t.join();
    return acks.load();
}

}  // namespace dueq::chaos
