// take through the proxy: first a sweep that asks each shard in turn for what is due now
// (the shard asked first rotates from take to take, so that no shard's tasks starve; a
// shard that does not answer within sweep_step_timeout is passed over, so that one shard's
// fault does not hold up the others'),
// then, when nothing was due and the client is willing to wait, a blocking take on every
// shard at once. The first shard to answer with tasks answers the client; tasks that
// other shards hand out later are released at once (each costs that task one attempt).
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

}  // namespace dueq::shard
