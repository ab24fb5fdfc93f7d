// Requests dueq-proxy asks of several shards and answers once.
//
// take: first a sweep that asks each shard in turn for what is due now (the shard asked
// first rotates from take to take, so that no shard's tasks starve; a shard that does not
// answer within sweep_step_timeout is passed over, so that one shard's fault does not hold
// up the others'), then, when nothing was due and the client is willing to wait, a
// blocking take on every shard at once. The first shard to answer with tasks answers the
// client; tasks that other shards hand out later are released at once (each costs that
// task one attempt).
//
// declare, kick and stats: asked of every shard in turn, and answered once, from all the
// answers. declare sets the queue's settings on every shard; kick moves at most `count`
// tasks in all; stats adds up the counts and keeps the earliest times.
#include <map>

#include "client/codec.h"
#include "net/frame.h"
#include "shard/proxy.h"
#include "wire/protocol.h"

namespace dueq::shard {

namespace asio = boost::asio;
using wire::Code;
using Clock = std::chrono::steady_clock;

struct Proxy::TakeJob {
    std::weak_ptr<net::Connection> conn;
    std::uint64_t id = 0, session = 0;
    queue::Take take;
    std::int64_t wait_ms = 0;
    Clock::time_point deadline;
    std::size_t first = 0;
    struct Got {
        std::size_t shard;
        MsgHandle handle;  // owns `task`
        const msgpack::object* task;
    };
    std::vector<Got> tasks;
    std::string first_error;  // a whole error frame; sent when no shard answered ok
    bool any_ok = false, answered = false;
    std::size_t waiting = 0;
};

namespace {

MsgHandle take_request(const queue::Take& t, std::uint32_t count, std::int64_t timeout_ms) {
    return request_map(wire::op_name(wire::Op::take), t.ttr_ms ? 5 : 4, [&](Packer& pk) {
        pack_str(pk, wire::field::queue), pack_str(pk, t.queue);
        pack_str(pk, wire::field::count), pk.pack_uint32(count);
        pack_str(pk, wire::field::timeout_ms), pk.pack_int64(timeout_ms);
        // The proxy tracks its clients' sessions itself: its own connection to a shard
        // outlives them, and must not take their leases with it when it closes.
        pack_str(pk, wire::field::release_on_disconnect), pk.pack(false);
        if (t.ttr_ms) pack_str(pk, wire::field::ttr_ms), pk.pack_int64(*t.ttr_ms);
    });
}

}  // namespace

void Proxy::take(const ConnPtr& conn, const net::Request& req, const queue::Take& t,
                 std::int64_t wait_ms) {
    auto job = std::make_shared<TakeJob>();
    job->conn = conn;
    job->id = req.id;
    job->session = conn->session;
    job->take = t;
    job->wait_ms = wait_ms;
    job->deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
    job->first = take_rotation_++ % router_->map().shards.size();
    take_sweep(job, 0);
}

void Proxy::take_sweep(const std::shared_ptr<TakeJob>& job, std::size_t asked) {
    const std::size_t shards = router_->map().shards.size();
    if (asked == shards || job->tasks.size() >= job->take.count) {
        if (!job->tasks.empty() || job->wait_ms == 0) return take_answer(job);
        return take_wait(job);
    }
    const std::size_t shard = (job->first + asked) % shards;
    const auto want = std::uint32_t(job->take.count - job->tasks.size());
    auto request = take_request(job->take, want, 0);
    const std::string name = router_->map().shards[shard].name;
    router_->call(
        shard, wire::op_name(wire::Op::take), request->get(),
        [this, job, shard, asked, name](client::Result<client::ResponseFrame> r) {
            if (!router_) return;
            if (!take_collect(*job, shard, r, name)) return;
            take_sweep(job, asked + 1);
        },
        std::chrono::milliseconds(0), options_.sweep_step_timeout);
}

void Proxy::take_wait(const std::shared_ptr<TakeJob>& job) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(job->deadline - Clock::now());
    if (left.count() <= 0) return take_answer(job);
    const std::size_t shards = router_->map().shards.size();
    job->waiting = shards;
    for (std::size_t shard = 0; shard < shards; ++shard) {
        auto request = take_request(job->take, job->take.count, left.count());
        const std::string name = router_->map().shards[shard].name;
        router_->call(
            shard, wire::op_name(wire::Op::take), request->get(),
            [this, job, shard, name](client::Result<client::ResponseFrame> r) {
                if (!router_) return;
                --job->waiting;
                if (!take_collect(*job, shard, r, name)) return;
                if (!job->tasks.empty() || job->waiting == 0) take_answer(job);
            },
            left);
    }
}

void Proxy::take_answer(const std::shared_ptr<TakeJob>& job) {
    if (job->answered) return;
    job->answered = true;
    auto conn = job->conn.lock();
    if (!conn || !conn->open()) {
        for (const auto& got : job->tasks)
            release(got.shard, job->take.queue, bytes_of(field(*got.task, wire::field::key)),
                    field(*got.task, wire::field::lease)->as<std::uint64_t>());
        return;
    }
    if (!job->any_ok && job->tasks.empty()) return conn->send(job->first_error);
    auto session = sessions_.find(job->session);
    net::FrameBuilder f;
    f.begin_ok(job->id, 1);
    f.key(wire::field::tasks);
    f.pk().pack_array(std::uint32_t(job->tasks.size()));
    for (const auto& got : job->tasks) {
        f.pk().pack(*got.task);
        if (job->take.release_on_disconnect && session != sessions_.end())
            session->second
                .held[{got.shard, job->take.queue, bytes_of(field(*got.task, wire::field::key))}] =
                field(*got.task, wire::field::lease)->as<std::uint64_t>();
    }
    conn->send(f.finish());
}

// Collects a shard's answer into the job; returns false when the job no longer wants
// tasks (answered, or its client is gone), after releasing what the answer carried.
bool Proxy::take_collect(TakeJob& job, std::size_t shard, client::Result<client::ResponseFrame>& r,
                         const std::string& name) {
    std::vector<const msgpack::object*> got;
    if (!r.ok()) {
        if (job.first_error.empty()) job.first_error = no_answer_frame(job.id, name, r.error());
    } else if (!r->ok) {
        if (job.first_error.empty())
            job.first_error = net::error_frame(
                job.id, r->error.code, "shard '" + name + "': " + r->error.message,
                r->error.leader.empty() ? std::nullopt
                                        : std::optional<std::string>(r->error.leader));
    } else {
        job.any_ok = true;
        const auto* tasks = field(*r->map, wire::field::tasks);
        if (tasks && tasks->type == msgpack::type::ARRAY)
            for (std::uint32_t i = 0; i < tasks->via.array.size; ++i) {
                const auto& t = tasks->via.array.ptr[i];
                const auto* key = field(t, wire::field::key);
                const auto* lease = field(t, wire::field::lease);
                if (key && lease && lease->type == msgpack::type::POSITIVE_INTEGER)
                    got.push_back(&t);
            }
    }
    auto conn = job.conn.lock();
    const bool wanted = !job.answered && conn && conn->open();
    for (const auto* t : got) {
        if (wanted && job.tasks.size() < job.take.count) {
            job.tasks.push_back({shard, r->handle, t});
        } else {
            release(shard, job.take.queue, bytes_of(field(*t, wire::field::key)),
                    field(*t, wire::field::lease)->as<std::uint64_t>());
        }
    }
    return wanted;
}

// ---- declare, kick and stats

namespace {

// One queue's stats as a shard reports them, added up over shards.
struct Totals {
    std::map<std::string, std::uint64_t> counts;  // ready, taken, buried, done, due_now
    std::optional<std::int64_t> next_due, oldest_late;

    void add(const msgpack::object& m) {
        if (m.type != msgpack::type::MAP) return;
        for (std::uint32_t i = 0; i < m.via.map.size; ++i) {
            const auto& kv = m.via.map.ptr[i];
            if (kv.key.type != msgpack::type::STR) continue;
            const std::string name(kv.key.via.str.ptr, kv.key.via.str.size);
            if (name == wire::field::next_due || name == wire::field::oldest_late) {
                if (kv.val.type != msgpack::type::POSITIVE_INTEGER &&
                    kv.val.type != msgpack::type::NEGATIVE_INTEGER)
                    continue;
                auto& slot = name == wire::field::next_due ? next_due : oldest_late;
                const auto v = kv.val.as<std::int64_t>();
                slot = slot ? std::min(*slot, v) : v;
            } else if (kv.val.type == msgpack::type::POSITIVE_INTEGER) {
                counts[name] += kv.val.via.u64;
            }
        }
    }
    void pack(net::FrameBuilder& f, const std::string& queue) const {
        f.pk().pack_map(
            std::uint32_t(1 + counts.size() + (next_due ? 1 : 0) + (oldest_late ? 1 : 0)));
        f.key(wire::field::queue), f.str(queue);
        for (const auto& [name, n] : counts)
            f.key(name), f.pk().pack_uint64(n);
        if (next_due) f.key(wire::field::next_due), f.pk().pack_int64(*next_due);
        if (oldest_late) f.key(wire::field::oldest_late), f.pk().pack_int64(*oldest_late);
    }
};

}  // namespace

struct Proxy::EveryJob {
    std::weak_ptr<net::Connection> conn;
    net::Request req;
    MsgHandle request;  // the client's request, sent as is (declare, stats)
    std::size_t next = 0;
    std::uint64_t kicked = 0;
    std::map<std::string, Totals> queues;  // stats by queue name
    std::string error;                     // the first failure, as a whole error frame
    client::Result<client::ResponseFrame> last = client::Error(Code::internal, "no answer");
};

void Proxy::to_every_shard(const ConnPtr& conn, const net::Request& req, std::string_view frame) {
    auto request = client::unpack_request(frame);
    if (!request.ok())
        return conn->send(net::error_frame(req.id, Code::bad_request, request.error().message));
    auto job = std::make_shared<EveryJob>();
    job->conn = conn;
    job->req = req;
    job->request = *request;
    every_step(job);
}

void Proxy::every_step(const std::shared_ptr<EveryJob>& job) {
    const auto& map = router_->map();
    const auto* kick = std::get_if<net::Write>(&job->req.body);
    const auto* k = kick ? std::get_if<queue::Kick>(&kick->command) : nullptr;
    if (job->next == map.shards.size() || (k && job->kicked >= k->count) || !job->error.empty())
        return every_answer(job);
    const std::size_t shard = job->next++;
    MsgHandle request = job->request;
    if (k)  // what is left of the count, so that all shards together move at most count
        request = request_map(wire::op_name(wire::Op::kick), 2, [&](Packer& pk) {
            pack_str(pk, wire::field::queue), pack_str(pk, k->queue);
            pack_str(pk, wire::field::count), pk.pack_uint64(k->count - job->kicked);
        });
    const std::string name = map.shards[shard].name;
    router_->call(
        shard, net::to_string(job->req.op), request->get(),
        [this, job, name](client::Result<client::ResponseFrame> r) {
            if (!router_) return;
            if (!r.ok()) {
                job->error = no_answer_frame(job->req.id, name, r.error());
            } else if (!r->ok) {
                job->error = net::error_frame(job->req.id, r->error.code,
                                              "shard '" + name + "': " + r->error.message);
            } else if (const auto* kicked = field(*r->map, wire::field::kicked)) {
                job->kicked +=
                    kicked->type == msgpack::type::POSITIVE_INTEGER ? kicked->via.u64 : 0;
            } else if (job->req.op == net::Op::stats) {
                if (const auto* list = field(*r->map, wire::field::queues);
                    list && list->type == msgpack::type::ARRAY) {
                    for (std::uint32_t i = 0; i < list->via.array.size; ++i)
                        job->queues[bytes_of(field(list->via.array.ptr[i], wire::field::queue))]
                            .add(list->via.array.ptr[i]);
                } else {
                    job->queues[bytes_of(field(*r->map, wire::field::queue))].add(*r->map);
                }
            }
            if (r.ok()) job->last = std::move(r);
            every_step(job);
        });
}

void Proxy::every_answer(const std::shared_ptr<EveryJob>& job) {
    auto conn = job->conn.lock();
    if (!conn || !conn->open()) return;
    if (!job->error.empty()) return conn->send(job->error);
    const std::uint64_t id = job->req.id;
    if (job->req.op == net::Op::declare)  // every shard now has the same settings
        return conn->send(client::repack_with_id(*job->last->map, id));
    net::FrameBuilder f;
    if (job->req.op == net::Op::kick) {
        f.begin_ok(id, 1);
        f.key(wire::field::kicked), f.pk().pack_uint64(job->kicked);
        return conn->send(f.finish());
    }
    const auto& stats = std::get<net::GetStats>(job->req.body);
    if (stats.queue) {
        const Totals& t = job->queues[*stats.queue];
        // The queue's entries sit at the top level of the answer, beside id and ok.
        net::FrameBuilder inner;
        t.pack(inner, *stats.queue);
        std::string packed = inner.finish().substr(4);
        auto handle = msgpack::unpack(packed.data(), packed.size());
        return conn->send(
            client::repack_with_id(handle.get(), id, {{std::string(wire::field::ok), true}}));
    }
    f.begin_ok(id, 1);
    f.key(wire::field::queues), f.pk().pack_array(std::uint32_t(job->queues.size()));
    for (const auto& [name, t] : job->queues)
        t.pack(f, name);
    conn->send(f.finish());
}

}  // namespace dueq::shard
