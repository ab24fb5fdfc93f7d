#include "node/autonomy.h"
#include "wire/protocol.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace dueq::node {

using queue::Code;

namespace {
constexpr std::size_t kMergeFrameBytes = 4 << 20;
}  // namespace

const char* to_string(Autonomy::Mode m) {
    // wire::kNodeModes lists the modes in Mode's order.
    return wire::kNodeModes.at(static_cast<std::size_t>(m)).data();
}

Autonomy::Autonomy(const AutonomySettings& settings, shell::RaftShell& shell,
                   ClientSessions& sessions, OverlayStorage& storage, SendMerges send,
                   std::int64_t now)
    : settings_(settings),
      shell_(shell),
      sessions_(sessions),
      storage_(storage),
      send_(std::move(send)),
      since_(now),
      now_(now),
      leader_seen_(now),
      waiters_(settings.max_waiting_takes) {}

bool Autonomy::load(const std::vector<storage::OverlayChange>& stored) {
    for (const auto& c : stored) {
        auto r = c.record ? queue::decode_overlay_record(*c.record) : std::nullopt;
        if (!r) return false;
        overlay_[{c.queue, c.key}] = std::move(*r);
    }
    if (!overlay_.empty())
        spdlog::info(
            "{} writes made in autonomous mode are not merged yet; they will be once "
            "a leader holding a quorum is known",
            overlay_.size());
    return true;
}

bool Autonomy::quorum_leader_known() const {
    // A leader steps down once it has not heard from a quorum for an election timeout
    // (CheckQuorum), and a follower forgets its leader when it starts an election.
    return shell_.is_leader() || shell_.raft().leader() != raft::kNoNode;
}

void Autonomy::on_tick(std::int64_t now) {
    now_ = std::max(now_, now);
    const bool leader = quorum_leader_known();
    if (leader) leader_seen_ = now;
    switch (mode_) {
        case Mode::normal:
            if (leader && !overlay_.empty()) {
                mode_ = Mode::merging;  // a restart with writes not merged yet
                since_ = now;
            } else if (!leader && settings_.after_ms > 0 && settings_.members > 1 &&
                       now - leader_seen_ >= settings_.after_ms) {
                enter(now);
            }
            break;
        case Mode::autonomous:
            if (leader) shell_.end_fork();  // calls on_fork_ended
            break;
        case Mode::merging:
            if (leader) {
                send_merges(now);
            } else if (settings_.after_ms > 0 && now - leader_seen_ >= settings_.after_ms) {
                enter(now);
            }
            break;
    }
}

void Autonomy::enter(std::int64_t now) {
    // Lease ids: the autonomous bit, this node's id, then this moment (ms, 44 bits) with
    // 12 bits of counter: a later fork starts above every lease an earlier one granted
    // unless one fork handed out over 4,096 leases per ms since the one before.
    const queue::LeaseId base = queue::kAutonomousLeases | (queue::LeaseId(settings_.self) << 56) |
                                ((queue::LeaseId(now) & ((queue::LeaseId{1} << 44) - 1)) << 12);
    if (!shell_.fork_store(base)) return;
    queue::Store* fork = shell_.fork();
    for (const auto& [k, r] : overlay_)
        if (!fork->load_overlay(k.first, k.second, r)) {
            spdlog::error("an overlay record of {}/{} does not load; it stays unmerged", k.first,
                          k.second);
        }
    fork->drain_fork([](auto, auto, const auto&) {});  // the overlay has them already
    sent_at_.clear();
    mode_ = Mode::autonomous;
    since_ = now;
    heal_ = Counts{};
    spdlog::warn(
        "autonomous mode: no leader holding a quorum for {} ms; serving the autonomous "
        "queues on this node alone ({} earlier writes not merged yet)",
        now - leader_seen_, overlay_.size());
}

void Autonomy::on_fork_ended() {
    for (auto& w : waiters_.expire(INT64_MAX))
        w.answer_nothing();
    spdlog::warn(
        "leaving autonomous mode after {} ms: a leader holding a quorum is known; {} "
        "writes to merge",
        now_ - since_, overlay_.size());
    mode_ = overlay_.empty() ? Mode::normal : Mode::merging;
    since_ = now_;
}

queue::Result Autonomy::apply(queue::Store& fork, queue::Command& cmd, std::int64_t now) {
    queue::Result r = fork.apply(cmd, now);
    ++totals_.served;
    auto* take = std::get_if<queue::Take>(&cmd);
    if (take && r.ok() && !r.tasks.empty() && take->release_on_disconnect)
        sessions_.took_tasks(take->session, now);
    return r;
}

bool Autonomy::submit(queue::Command cmd, std::int64_t wait_ms, ReplyTo to, std::int64_t now) {
    now_ = std::max(now_, now);
    queue::Store* fork = shell_.fork();
    if (!fork) {
        if (to) {
            shell::Outcome o{Code::no_quorum,
                             "this node is not in autonomous mode any more; not applied",
                             nullptr,
                             nullptr,
                             0,
                             0};
            to->answer(o);
        }
        return false;
    }
    queue::Result r = apply(*fork, cmd, now);
    auto* take = std::get_if<queue::Take>(&cmd);
    if (take && wait_ms > 0 && r.ok() && r.tasks.empty()) {
        if (waiters_.full()) {
            r = queue::Result::error(Code::unavailable, TakeWaiters::kFullMessage);
        } else {
            waiters_.park({std::move(to), std::move(*take), now + wait_ms});
            return true;
        }
    }
    // A put, an ack or a release may have made a task due: the takes waiting for one hear
    // of it now, not at the next look (as a leader wakes them when the entry applies).
    // Woken first, so that one overlay write (one fsync) carries this command's changes
    // and theirs; this command is answered once that write is durable.
    if (!take && r.ok() && waiters_.size() > 0) wake_waiters(*fork, now);
    write_changes(std::move(to), std::move(cmd), std::move(r));
    return false;
}

void Autonomy::write_changes(ReplyTo to, queue::Command cmd, queue::Result result) {
    storage::OverlayWrite w;
    shell_.fork()->drain_fork(
        [&](std::string_view q, std::string_view k, const queue::OverlayRecord& r) {
            Key key{std::string(q), std::string(k)};
            auto [it, added] = overlay_.try_emplace(key, r);
            if (!added) {
                // The key's state before the first cut it was written in stays its base.
                const std::uint64_t base = it->second.base_hlc;
                it->second = r;
                it->second.base_hlc = base;
            }
            sent_at_.erase(key);
            w.changes.push_back({key.first, key.second, queue::encode_overlay_record(it->second)});
        });
    if (!w.changes.empty()) last_ticket_ = storage_.write_overlay(std::move(w));
    if (!to) return;
    if (last_ticket_ <= persisted_) {
        shell::Outcome o{Code::ok, {}, &cmd, &result, 0, 0, true};
        return to->answer(o);
    }
    pending_.push_back({last_ticket_, std::move(to), std::move(cmd), std::move(result)});
}

void Autonomy::on_persisted(std::uint64_t ticket) {
    persisted_ = std::max(persisted_, ticket);
    while (!pending_.empty() && pending_.front().ticket <= persisted_) {
        Pending p = std::move(pending_.front());
        pending_.pop_front();
        shell::Outcome o{Code::ok, {}, &p.command, &p.result, 0, 0, true};
        p.to->answer(o);
    }
}

void Autonomy::wake_waiters(queue::Store& fork, std::int64_t now) {
    for (const auto& queue : waiters_.queues()) {
        const std::uint64_t due = fork.count_due(queue, now, settings_.max_waiting_takes);
        for (auto& w : waiters_.pop(queue, due)) {
            if (!w.to || !w.to->open()) continue;
            queue::Command cmd{std::move(w.take)};
            queue::Result r = apply(fork, cmd, now);
            if (r.ok() && r.tasks.empty() && w.deadline > now) {
                waiters_.park({std::move(w.to), std::move(std::get<queue::Take>(cmd)), w.deadline});
                continue;
            }
            write_changes(std::move(w.to), std::move(cmd), std::move(r));
        }
    }
}

void Autonomy::on_timer(std::int64_t now) {
    now_ = std::max(now_, now);
    queue::Store* fork = shell_.fork();
    if (!fork) return;
    fork->advance(now);  // leases and delays run out here as on a leader
    for (auto& w : waiters_.expire(now)) {
        if (!w.to) continue;
        queue::Command take{std::move(w.take)};
        write_changes(std::move(w.to), std::move(take), queue::Result{});
    }
    wake_waiters(*fork, now);
    for (queue::SessionId session : sessions_.expire(now)) {
        queue::Command release{queue::ReleaseSession{session}};
        write_changes(nullptr, release, apply(*fork, release, now));
    }
    write_changes(nullptr, queue::Advance{}, queue::Result{});
}

std::optional<std::int64_t> Autonomy::next_deadline() const {
    if (mode_ != Mode::autonomous) return std::nullopt;
    std::optional<std::int64_t> at = waiters_.earliest_deadline();
    auto earliest = [&](std::int64_t t) { at = at ? std::min(*at, t) : t; };
    if (auto e = shell_.store().next_event_any(queue::Millis(now_))) earliest(*e);
    if (auto s = sessions_.next_deadline()) earliest(*s);
    // A blocking take also waits for tasks that come due; check them now and then.
    if (waiters_.size() > 0) earliest(now_ + 100);
    return at;
}

void Autonomy::send_merges(std::int64_t now) {
    if (overlay_.empty()) return finish_merge();
    std::size_t in_flight = 0;
    for (auto it = sent_at_.begin(); it != sent_at_.end();) {
        if (now - it->second >= settings_.merge_resend_ms) {
            it = sent_at_.erase(it);  // not seen applied: send it again
        } else {
            ++in_flight;
            ++it;
        }
    }
    std::vector<queue::Merge> batch;
    std::size_t bytes = 0;
    for (const auto& [k, r] : overlay_) {
        // A peer frame has a size limit: big payloads go a few at a time.
        if (in_flight + batch.size() >= settings_.merge_batch || bytes > kMergeFrameBytes) break;
        if (sent_at_.count(k)) continue;
        bytes += k.first.size() + k.second.size() + (r.task ? r.task->size() : 0) + 64;
        batch.push_back(queue::Merge{k.first, k.second, r.task, r.hlc, r.base_hlc, settings_.self});
        sent_at_[k] = now;
    }
    if (batch.empty()) return;
    if (shell_.is_leader()) {
        receive_merges(settings_.self, std::move(batch), now);
    } else {
        send_(shell_.raft().leader(), batch);
    }
}

std::string Autonomy::receive_merges(raft::NodeId from, std::vector<queue::Merge> merges,
                                     std::int64_t now) {
    if (!shell_.is_leader()) return "merges sent to a node that is not the leader";
    // A node removed while it was cut off is still dialed until it learns of its removal
    // (raft_membership.cpp), and may try to merge meanwhile: what it did alone is given up
    // with it (docs/autonomy.md).
    if (from != settings_.self && !shell_.raft().membership().contains(from))
        return "merges from a node that is not a member (removed)";
    for (const auto& m : merges)
        if (m.origin != from) return "a merge names another member as its origin";
    for (auto& m : merges)
        shell_.propose(std::move(m), now, [](shell::Outcome&) {});
    return {};
}

void Autonomy::on_merge_applied(const queue::Merge& m, const queue::Result& r) {
    if (m.origin != settings_.self) return;
    auto it = overlay_.find({m.queue, m.key});
    if (it == overlay_.end() || it->second.hlc != m.hlc) return;  // resent, or written again
    // Its bucket is moving between shards: it stays, and is sent again after the usual wait.
    if (r.code == queue::Code::moving) return;
    overlay_.erase(it);
    sent_at_.erase({m.queue, m.key});
    storage::OverlayWrite w;
    w.sync = false;  // a removal lost in a crash only sends that Merge again
    w.changes.push_back({m.queue, m.key, std::nullopt});
    storage_.write_overlay(std::move(w));
    for (Counts* c : {&heal_, &totals_}) {
        ++c->merged;
        if (r.merge == queue::MergeOutcome::taken_over) ++c->taken_over;
        if (r.merge == queue::MergeOutcome::kept) ++c->kept;
        if (r.both_sides_wrote) ++c->both_sides;
    }
    if (overlay_.empty() && mode_ == Mode::merging) finish_merge();
}

void Autonomy::finish_merge() {
    if (mode_ != Mode::merging) return;
    mode_ = Mode::normal;
    spdlog::info(
        "merged the writes of autonomous mode: {} merged, {} became the task, {} lost to a "
        "newer write of the majority, {} keys written on both sides",
        heal_.merged, heal_.taken_over, heal_.kept, heal_.both_sides);
    since_ = now_;
}

}  // namespace dueq::node
