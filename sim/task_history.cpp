#include "sim/task_history.h"

#include <algorithm>

#include "sim/text.h"

namespace dueq::sim {

void TaskHistory::acknowledged(raft::Index index, raft::Term term) {
    auto [it, fresh] = acked_.emplace(index, term);
    if (!fresh && it->second != term)
        checker_.fail(cat("G1: two commands acknowledged at index ", index, " (terms ", it->second,
                          " and ", term, ")"));
}

void TaskHistory::applied(raft::NodeId node, const raft::Entry& e, const queue::Command* cmd,
                          const queue::Result* result) {
    if (auto it = acked_.find(e.index); it != acked_.end() && it->second != e.term)
        checker_.fail(cat("G1: the command acknowledged at index ", e.index, " (term ", it->second,
                          ") is lost: node ", node, " applied an entry of term ", e.term,
                          " there"));
    if (e.index <= history_) return;
    history_ = e.index;
    time_ = std::max<queue::Millis>(time_, queue::Millis(e.time));
    if (cmd && result) on_command(*cmd, *result, e.index);
}

void TaskHistory::end_lease(const TaskKey& key, queue::LeaseId lease) {
    auto it = live_.find(key);
    if (it != live_.end() && (lease == 0 || it->second.id == lease)) live_.erase(it);
}

void TaskHistory::on_command(const queue::Command& cmd, const queue::Result& r, raft::Index index) {
    if (!r.ok()) return;
    if (const auto* take = std::get_if<queue::Take>(&cmd)) {
        for (const auto& t : r.tasks) {
            const TaskKey key{take->queue, t.key};
            ++leases_checked_;
            auto it = live_.find(key);
            if (it != live_.end() && it->second.until > time_)
                return checker_.fail(cat("G3: at index ", index, " task ", take->queue, "/", t.key,
                                         " is handed out with lease ", t.lease, " while lease ",
                                         it->second.id, " runs until ", it->second.until,
                                         " (log time ", time_, ")"));
            live_[key] = Lease{t.lease, t.lease_until, take->session, take->release_on_disconnect};
        }
    } else if (const auto* touch = std::get_if<queue::Touch>(&cmd)) {
        auto it = live_.find({touch->queue, touch->key});
        if (it != live_.end() && it->second.id == touch->lease) it->second.until = r.lease_until;
    } else if (const auto* ack = std::get_if<queue::Ack>(&cmd)) {
        end_lease({ack->queue, ack->key}, ack->lease);
    } else if (const auto* rel = std::get_if<queue::Release>(&cmd)) {
        end_lease({rel->queue, rel->key}, rel->lease);
    } else if (const auto* bury = std::get_if<queue::Bury>(&cmd)) {
        end_lease({bury->queue, bury->key}, bury->lease);
    } else if (const auto* del = std::get_if<queue::Delete>(&cmd)) {
        end_lease({del->queue, del->key}, 0);
    } else if (const auto* put = std::get_if<queue::Put>(&cmd)) {
        end_lease({put->queue, put->key}, 0);  // a put replaces a taken task
    } else if (const auto* m = std::get_if<queue::Merge>(&cmd)) {
        // A merged write that wins replaces the task, as a put does (docs/autonomy.md).
        if (r.merge == queue::MergeOutcome::taken_over) end_lease({m->queue, m->key}, 0);
    } else if (const auto* rs = std::get_if<queue::ReleaseSession>(&cmd)) {
        ++sessions_released_;
        for (auto it = live_.begin(); it != live_.end();) {
            if (it->second.session == rs->session && it->second.release_on_disconnect)
                it = live_.erase(it);
            else
                ++it;
        }
    }
}

void TaskHistory::abandoned(const std::string& queue, const std::string& key, queue::LeaseId lease,
                            queue::Millis until) {
    abandoned_.push_back({queue, key, lease});
    abandoned_until_ = std::max(abandoned_until_, until);
}

void TaskHistory::check_final(raft::NodeId node, const queue::Store& store, raft::Index applied,
                              queue::Millis time) {
    for (const auto& [index, term] : acked_)
        if (index > applied)
            return checker_.fail(cat("G1: the command acknowledged at index ", index,
                                     " is missing on node ", node, ", which applied up to ",
                                     applied));
    for (const auto& a : abandoned_) {
        auto task = store.get(a.queue, a.key);
        if (task && task->status == queue::Status::taken && task->lease == a.lease &&
            task->lease_until <= time)
            return checker_.fail(cat("G2: on node ", node, " task ", a.queue, "/", a.key,
                                     " is still taken under abandoned lease ", a.lease,
                                     ", which ran out at ", task->lease_until, " (log time ", time,
                                     ")"));
    }
}

}  // namespace dueq::sim
