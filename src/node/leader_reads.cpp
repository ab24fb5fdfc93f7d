#include "node/leader_reads.h"

#include "shell/raft_shell.h"
#include "wire/limits.h"

namespace dueq::node {

using wire::Code;

LeaderReads::LeaderReads(shell::RaftShell& shell, std::int64_t timeout_ms,
                         std::function<void()> schedule)
    : shell_(shell), timeout_ms_(timeout_ms), schedule_(std::move(schedule)) {}

void LeaderReads::read(Done done, std::int64_t now) {
    if (reads_.size() >= limits::kMaxPendingLeaderReads)
        return done(Code::unavailable, "too many leader reads are waiting; retry");
    reads_.push_back({next_context_, now + timeout_ms_, 0, std::move(done)});
    if (!queued_) {
        queued_ = true;
        schedule_();
    }
}

void LeaderReads::flush() {
    if (!queued_) return;
    queued_ = false;
    const std::uint64_t context = next_context_++;
    if (shell_.read_index(context)) return;
    // Refused at once (no longer the leader): so are the reads that share the context.
    std::deque<Read> kept;
    std::deque<Read> refused;
    for (auto& r : reads_)
        (r.context == context ? refused : kept).push_back(std::move(r));
    reads_ = std::move(kept);
    for (auto& r : refused)
        r.done(Code::not_leader, "this node no longer leads");
}

void LeaderReads::on_read_state(const raft::ReadState& rs) {
    // Queued in context order: the reads of this context are together, and none after a
    // later one.
    for (auto& r : reads_) {
        if (r.context > rs.context) break;
        if (r.context == rs.context) r.index = rs.index;
    }
    serve_applied();
}

void LeaderReads::on_applied() {
    if (!reads_.empty()) serve_applied();
}

void LeaderReads::serve_applied() {
    const raft::Index applied = shell_.applied().index;
    for (auto it = reads_.begin(); it != reads_.end();) {
        if (it->index == 0 || it->index > applied) {
            ++it;
            continue;
        }
        auto done = std::move(it->done);
        it = reads_.erase(it);
        done(Code::ok, "");
    }
}

void LeaderReads::on_tick(bool leader, std::int64_t now) {
    if (reads_.empty()) return;
    if (!leader) return refuse_all(Code::not_leader, "this node no longer leads");
    for (auto it = reads_.begin(); it != reads_.end();) {
        if (it->deadline > now) {
            ++it;
            continue;
        }
        auto done = std::move(it->done);
        it = reads_.erase(it);
        done(Code::timeout, "the leader could not confirm it still leads in time");
    }
}

void LeaderReads::refuse_all(Code code, const char* why) {
    auto reads = std::move(reads_);
    reads_.clear();
    for (auto& r : reads)
        r.done(code, why);
}

}  // namespace dueq::node
