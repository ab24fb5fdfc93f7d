// declare, kick and stats through the proxy: asked of every shard in turn, and answered
// once, from all the answers. declare sets the queue's settings on every shard; kick moves
// at most `count` tasks in all; stats adds up the counts and keeps the earliest times.
#include <map>

#include "client/codec.h"
#include "net/frame.h"
#include "shard/proxy.h"
#include "wire/protocol.h"

namespace dueq::shard {

using wire::Code;

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
