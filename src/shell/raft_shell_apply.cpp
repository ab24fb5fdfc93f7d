// RaftShell: applying committed entries. The store takes runs of them as batches
// (Store::apply_batch); around each entry the shell moves its applied position, answers
// the proposals, and shows the observer what changed.
#include "shell/raft_shell.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "queue/command_codec.h"

namespace dueq::shell {

using queue::Code;

bool RaftShell::apply_entries(const std::vector<raft::Entry>& entries) {
    if (entries.empty()) return false;
    if (entries.back().index <= applied_.index) {
        persist_applied_when_due();  // applied while the write was in flight
        return false;
    }
    bool wrote = false;
    // A run of commands goes to the store as one batch: while it applies one command it
    // loads the memory the next ones will read. A no-op or configuration entry goes alone
    // (apply_entry), and so does every entry while a planted defect drops merges.
    for (std::size_t i = 0; i < entries.size();) {
        // Applied already: while the write was in flight, or by the planted defect in
        // finish_ready.
        if (entries[i].index <= applied_.index) {
            ++i;
            continue;
        }
        if (const std::size_t n = batch_run(entries, i)) {
            const std::size_t applied = apply_run(entries, i, wrote);
            if (failed_) return wrote;
            // The store stopped before a command that does not decode (its entry begun).
            if (applied < n) {
                fail("log entry " + std::to_string(entries[i + applied].index) +
                     " does not decode");
                return wrote;
            }
            i += n;
            continue;
        }
        apply_entry(entries[i]);
        if (failed_) return wrote;
        wrote = wrote || entries[i].type == raft::EntryType::normal;
        ++i;
    }
    batch_.clear();
    persist_applied_when_due();
    if (replay_until_ != 0 && applied_.index >= replay_until_) {
        spdlog::info("replayed the log tail after restart: applied index {}", applied_.index);
        replay_until_ = 0;
    }
    return wrote;
}

std::size_t RaftShell::batch_run(const std::vector<raft::Entry>& entries, std::size_t from) {
    batch_.clear();
    if (planted(ShellDefect::merge_dropped)) return 0;  // apply_command drops them
    raft::Millis time = applied_.time;  // as begin_entry will have set applied_
    for (std::size_t i = from; i < entries.size(); ++i) {
        const raft::Entry& e = entries[i];
        if (e.type != raft::EntryType::normal) break;
        time = std::max<raft::Millis>(time, e.time);
        // Every replica applies at the entry's log time, so that all reach the same state.
        const auto at = planted(ShellDefect::lease_from_local_clock) ? queue::Millis(now_)
                                                                          : queue::Millis(time);
        batch_.push_back({e.data.view(), at});
    }
    return batch_.size();
}

std::size_t RaftShell::apply_run(const std::vector<raft::Entry>& entries, std::size_t from,
                                 bool& wrote) {
    struct Run {
        const raft::Entry* entries;  // the batch's first
        std::size_t size;
        std::optional<Proposal> mine;
    } run{&entries[from], batch_.size(), begin_entry(entries[from])};
    // Two pointers: std::function holds them without an allocation.
    auto step = [this, &run](std::size_t k, queue::Command& cmd, queue::Result& result) {
        finish_command(run.entries[k], cmd, result, std::move(run.mine));
        if (failed_) return false;
        if (k + 1 < run.size) run.mine = begin_entry(run.entries[k + 1]);
        return true;
    };
    const std::size_t applied = store_->apply_batch(batch_, step);
    // Each command applied counts, but for one whose hooks failed the shell.
    wrote = wrote || applied > (failed_ ? 1 : 0);
    return applied;
}

std::optional<RaftShell::Proposal> RaftShell::begin_entry(const raft::Entry& e) {
    end_fork();  // the log goes on from the committed state, never from a fork
    applied_ = {e.index, e.term, std::max<raft::Millis>(applied_.time, e.time)};
    // Proposals below this index that never reached it were overwritten by a new leader.
    while (!proposals_.empty() && proposals_.front().first < e.index) {
        Proposal p = std::move(proposals_.front().second);
        proposals_.pop_front();
        answer(p, Code::not_leader,
               "leadership changed before this was committed; it was not applied");
    }
    std::optional<Proposal> mine;
    if (!proposals_.empty() && proposals_.front().first == e.index) {
        mine = std::move(proposals_.front().second);
        proposals_.pop_front();
    }
    if (mine && e.type != mine->type) {
        // A new leader's no-op took the index of ours: ours is not in the log.
        answer(*mine, Code::not_leader,
               "leadership changed before this was committed; it was not applied");
        mine.reset();
    }
    return mine;
}

void RaftShell::apply_entry(const raft::Entry& e) {
    std::optional<Proposal> mine = begin_entry(e);
    if (e.type != raft::EntryType::normal) {
        store_->advance(queue::Millis(applied_.time));
        if (e.type == raft::EntryType::config) store_->set_membership(std::string(e.data.view()));
        finish_other(e);
        if (mine && mine->done) {
            if (mine->term != e.term)
                return answer(*mine, Code::not_leader,
                              "leadership changed before this was committed; it was not applied");
            Outcome o{Code::ok, {}, nullptr, nullptr, e.index, e.term};
            mine->done(o);
        }
        return;
    }
    apply_command(e, std::move(mine));
}

void RaftShell::finish_other(const raft::Entry& e) {
    if (hooks_.on_apply) {
        const std::size_t from = collect_changes();
        hooks_.on_apply(e, nullptr, nullptr, std::span(unwritten_.changes).subspan(from));
    }
    // Our own term's first entry: everything before it is applied, so the replicated
    // settings are known.
    if (e.term == raft_->term() && is_leader() && hooks_.term_started) hooks_.term_started();
}

void RaftShell::apply_command(const raft::Entry& e, std::optional<Proposal> mine) {
    auto cmd = queue::decode_command(e.data);
    if (!cmd) return fail("log entry " + std::to_string(e.index) + " does not decode");
    // Every replica applies at the entry's log time, so that all reach the same state.
    const auto at = planted(ShellDefect::lease_from_local_clock)
                        ? queue::Millis(now_)
                        : queue::Millis(applied_.time);
    queue::Result result;
    if (planted(ShellDefect::merge_dropped) && std::holds_alternative<queue::Merge>(*cmd))
        result.merge = queue::MergeOutcome::kept;
    else
        result = store_->apply(*cmd, at);
    finish_command(e, *cmd, result, std::move(mine));
}

void RaftShell::finish_command(const raft::Entry& e, queue::Command& cmd, queue::Result& result,
                               std::optional<Proposal> mine) {
    if (auto* merge = std::get_if<queue::Merge>(&cmd); merge && hooks_.merged)
        hooks_.merged(*merge, result);
    // The observer sees each entry's changes; otherwise they are collected once per
    // batch (persist_applied), which also writes a task changed twice only once.
    if (hooks_.on_apply) {
        const std::size_t from = collect_changes();
        hooks_.on_apply(e, &cmd, &result, std::span(unwritten_.changes).subspan(from));
    }
    if (!mine) return;
    if (mine->term != e.term)
        return answer(*mine, Code::not_leader,
                      "leadership changed before this was committed; it was not applied");
    Outcome o{Code::ok, {}, &cmd, &result, e.index, e.term};
    if (mine->done) mine->done(o);
}

}  // namespace dueq::shell
