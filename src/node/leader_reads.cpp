#include "node/leader_reads.h"

#include "shell/raft_shell.h"
#include "wire/limits.h"

namespace dueq::node {

using wire::Code;

LeaderReads::LeaderReads(shell::RaftShell& shell, std::int64_t timeout_ms)
    : shell_(shell), timeout_ms_(timeout_ms) {}

void LeaderReads::read(Done done, std::int64_t now) {
    if (reads_.size() >= limits::kMaxPendingLeaderReads)
        return done(Code::unavailable, "too many leader reads are waiting; retry");
    const std::uint64_t context = next_context_++;
    reads_.push_back({context, now + timeout_ms_, 0, std::move(done)});
    // The answer may come within this call (a single node confirms at once).
    if (!shell_.read_index(context)) {
        for (auto it = reads_.begin(); it != reads_.end(); ++it) {
            if (it->context != context) continue;
            auto refused = std::move(it->done);
            reads_.erase(it);
            return refused(Code::not_leader, "this node no longer leads");
        }
    }
}

void LeaderReads::on_read_state(const raft::ReadState& rs) {
    for (auto& r : reads_) {
        if (r.context != rs.context) continue;
        r.index = rs.index;
        break;
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
