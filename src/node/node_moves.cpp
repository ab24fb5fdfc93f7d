// Moving buckets between shards (docs/sharding.md, "Moving buckets"): the operator's
// move and move_cancel on the source's leader, a move_step from another shard's leader,
// the driver on each tick, and routing that follows the move table.
#include <spdlog/spdlog.h>

#include "net/frame.h"
#include "net/peer_handshake.h"
#include "node/node.h"
#include "queue/command_codec.h"
#include "shard/request_map.h"
#include "wire/protocol.h"

namespace dueq::node {

using queue::Code;
using shard::BucketPhase;

namespace {

// A Replier for the node's own proposals: `done` gets the outcome.
class CallbackReply final : public Replier {
  public:
    explicit CallbackReply(std::function<void(const shell::Outcome&)> done)
        : done_(std::move(done)) {}
    bool open() const override { return true; }
    void answer(const shell::Outcome& o) override { done_(o); }

  private:
    std::function<void(const shell::Outcome&)> done_;
};

bool applied_ok(const shell::Outcome& o) {
    return o.code == Code::ok && o.result && o.result->ok();
}

}  // namespace

bool Node::moves_enabled() const {
    return !config_.shard_secret.empty() && router_->map().shards.size() > 1;
}

void Node::drive_moves() {
    const queue::Store& store = shell_->store();
    const auto& table = store.bucket_moves();
    if (table.changes() != moves_seen_) {
        // Routing follows what this shard's log says: a bucket it received is its own, one
        // it let go of is the destination's. Other shards' routers learn it by discovery.
        moves_seen_ = table.changes();
        const std::string& own = router_->map().shards[own_shard_].name;
        for (const auto& [b, st] : table.states()) {
            if (st.phase == BucketPhase::gone) router_->learn_owner(b, st.peer, st.gen);
            if (st.phase == BucketPhase::active && st.gen > 0) router_->learn_owner(b, own, st.gen);
        }
    }
    if (!moves_enabled()) return;
    if (!move_driver_) {
        MoveDriver::Io io;
        io.propose = [this](queue::MoveBucket c, std::function<void(bool)> done) {
            auto reply = std::make_shared<CallbackReply>(
                [done = std::move(done)](const shell::Outcome& o) { done(applied_ok(o)); });
            writes_->propose(std::move(c), std::move(reply), now_ms());
        };
        io.send = [this](const std::string& to, std::string step,
                         std::function<void(std::optional<MoveStepAnswer>)> done) {
            const auto shard = router_->map().find(to);
            if (!shard) return done(std::nullopt);
            const std::string mac = move_step_mac(config_.shard_secret, to, step);
            auto request = shard::move_step_request(step, mac);
            router_->call(
                *shard, wire::op_name(wire::Op::move_step), request->get(),
                [request, done = std::move(done)](client::Result<client::ResponseFrame> r) {
                    done(r.ok() && r->ok ? read_move_step_answer(*r->map) : std::nullopt);
                });
        };
        io.now = [this] { return now_ms(); };
        move_driver_ =
            std::make_unique<MoveDriver>(std::move(io), router_->map().shards[own_shard_].name);
    }
    if (is_leader() && !autonomy_->serving())
        move_driver_->tick(store, now_ms());
    else
        move_driver_->stop_leading();
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::StartMove& req) {
    auto refuse = [&](Code code, const std::string& message) {
        send_error(conn, id, code, message);
        return code;
    };
    const auto& map = router_->map();
    if (map.shards.size() < 2)
        return refuse(Code::bad_request, "this node's shard map has one shard: nothing to move to");
    if (config_.shard_secret.empty())
        return refuse(Code::bad_request,
                      "bucket moves need [shard] secret_file, the same on every node of every "
                      "shard (docs/config.md)");
    if (!is_leader()) return refuse(Code::not_leader, "moves are started by the shard's leader");
    const std::string& own = map.shards[own_shard_].name;
    std::optional<std::size_t> to;
    if (!req.cancel) {
        to = map.find(req.to);
        if (!to) return refuse(Code::bad_request, "the shard map has no shard '" + req.to + "'");
        if (*to == own_shard_)
            return refuse(Code::bad_request, "shard '" + req.to + "' is this shard");
    }
    if (req.first + std::uint64_t(req.count) > map.bucket_count)
        return refuse(Code::bad_request,
                      "the map has buckets 0.." + std::to_string(map.bucket_count - 1));
    const auto& table = shell_->store().bucket_moves();
    std::vector<queue::MoveBucket> steps;
    for (shard::Bucket b = req.first; b < req.first + req.count; ++b) {
        const shard::BucketState* st = table.find(b);
        if (req.cancel) {
            if (st && st->phase == BucketPhase::sending)
                steps.push_back(
                    {{shard::MoveStep::abort, b, st->gen, {}, 0, false}, map.bucket_count, {}});
            continue;
        }
        if (map.owner[b] != own_shard_)
            return refuse(Code::bad_request, "bucket " + std::to_string(b) + " belongs to shard '" +
                                                 map.shards[map.owner[b]].name + "', not '" + own +
                                                 "': ask that shard's leader");
        if (st && st->phase != BucketPhase::active) continue;  // moving already
        steps.push_back({{shard::MoveStep::begin, b, table.next_gen(b), req.to, 0, false},
                         map.bucket_count,
                         {}});
    }
    // One answer once every step is applied: how many buckets started (or were cancelled).
    struct Tally {
        std::size_t left = 0;
        std::uint32_t done = 0;
        std::string error;
    };
    auto tally = std::make_shared<Tally>();
    tally->left = steps.size();
    std::weak_ptr<net::Connection> weak = conn;
    auto finish = [this, weak, id, tally] {
        auto c = weak.lock();
        if (!c || !c->open()) return;
        if (!tally->error.empty() && tally->done == 0)
            return send_error(c, id, Code::unavailable, tally->error);
        c->send(move_reply(id, tally->done));
    };
    if (steps.empty()) {
        finish();
        return Code::ok;
    }
    for (auto& step : steps) {
        const auto b = step.step.bucket;
        if (!req.cancel)
            spdlog::info("bucket {}: moving to shard '{}' (generation {})", b, req.to,
                         step.step.gen);
        auto reply = std::make_shared<CallbackReply>([tally, finish](const shell::Outcome& o) {
            if (applied_ok(o))
                ++tally->done;
            else if (tally->error.empty())
                tally->error = o.code != Code::ok ? o.message : o.result->message;
            if (--tally->left == 0) finish();
        });
        writes_->propose(std::move(step), std::move(reply), now_ms());
    }
    return Code::ok;
}

Code Node::handle(const ConnPtr& conn, std::uint64_t id, net::MoveStepRequest& req) {
    auto refuse = [&](Code code, const std::string& message) {
        send_error(conn, id, code, message);
        return code;
    };
    const auto& map = router_->map();
    const std::string& own = map.shards[own_shard_].name;
    if (!moves_enabled())
        return refuse(Code::unauthorized,
                      "this node takes no bucket moves ([shard] secret_file is not set)");
    // A forged or misdirected step changes nothing and is not even decoded.
    if (!net::same_secret(req.mac, move_step_mac(config_.shard_secret, own, req.step)))
        return refuse(Code::unauthorized, "a move step not signed for shard '" + own + "'");
    auto decoded = queue::decode_command(req.step);
    auto* move = decoded ? std::get_if<queue::MoveBucket>(&*decoded) : nullptr;
    if (!move)
        return refuse(Code::bad_request, "a move step must be an encoded MoveBucket command");
    const auto step = move->step.step;
    if (step != shard::MoveStep::chunk && step != shard::MoveStep::activate &&
        step != shard::MoveStep::forget)
        return refuse(Code::bad_request, "a destination takes chunk, activate and forget only");
    const auto from = map.find(move->step.peer);
    if (!from || *from == own_shard_ || move->bucket_count != map.bucket_count)
        return refuse(Code::bad_request, "a move step from shard '" + move->step.peer + "' of " +
                                             std::to_string(move->bucket_count) +
                                             " buckets, which this node's map does not know");
    if (!is_leader()) return refuse(Code::not_leader, "move steps go to the leader");
    const shard::Bucket bucket = move->step.bucket;
    std::weak_ptr<net::Connection> weak = conn;
    auto reply = std::make_shared<CallbackReply>([this, weak, id, bucket](const shell::Outcome& o) {
        auto c = weak.lock();
        if (!c || !c->open()) return;
        if (o.code != Code::ok) return send_error(c, id, o.code, o.message);
        const auto outcome = o.result->move;
        const bool moved = outcome == shard::MoveOutcome::refused ||
                           outcome == shard::MoveOutcome::out_of_sequence || o.result->ok();
        if (!moved) return send_error(c, id, o.result->code, o.result->message);
        c->send(move_step_reply(id, outcome, shell_->store().bucket_moves().find(bucket)));
    });
    writes_->propose(std::move(*move), std::move(reply), now_ms());
    return Code::ok;
}

}  // namespace dueq::node
