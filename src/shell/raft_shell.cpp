#include "shell/raft_shell.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "queue/command_codec.h"
#include "raft/message_check.h"
#include "wire/limits.h"

namespace dueq::shell {

using queue::Code;

RaftShell::RaftShell(ShellConfig cfg, Storage& storage, Transport& transport, Hooks hooks)
    : cfg_(std::move(cfg)), storage_(storage), transport_(transport), hooks_(std::move(hooks)) {}

RaftShell::~RaftShell() = default;

std::optional<std::string> RaftShell::start(const storage::Loaded& loaded,
                                            std::unique_ptr<queue::Store> store) {
    store_ = std::move(store);
    store_->plant(cfg_.store_defect);
    // The durable log, mirrored in memory: base, entries, then the applied state as the
    // snapshot the core starts from (it hands out committed entries after it).
    log_.apply_snapshot(raft::Snapshot{loaded.base, {}});
    if (!loaded.entries.empty() && !log_.append(loaded.entries).is_ok())
        return "refusing to serve: the stored log does not line up with its base";
    if (loaded.applied_index > loaded.base.index &&
        !log_.create_snapshot(loaded.applied_index, {}).is_ok())
        return "refusing to serve: applied index " + std::to_string(loaded.applied_index) +
               " is not in the stored log";
    log_.set_hard_state(loaded.hard_state);
    applied_ = log_.snapshot().meta;
    handed_index_ = applied_.index;
    replay_until_ = loaded.base.index + loaded.entries.size();
    if (replay_until_ <= applied_.index) replay_until_ = 0;
    applied_.time = std::max<raft::Millis>(applied_.time, raft::Millis(loaded.applied_time));
    raft_ = std::make_unique<raft::Raft>(raft_config(), log_);
    if (raft_->is_voter() && raft_->membership().voters.size() == 1)
        raft_->campaign_now();  // alone: no one to wait for
    notice_membership();
    return std::nullopt;
}

raft::Config RaftShell::raft_config() const {
    raft::Config rc = cfg_.raft;
    if (auto m = raft::decode_membership(store_->membership())) {
        rc.voters = m->voters;
        rc.learners = m->learners;
        rc.directory = m->directory;
    }
    return rc;
}

void RaftShell::notice_membership() {
    const raft::Index at = raft_->membership_index();
    const bool committed = raft_->log().committed() >= at;
    if (at == noticed_conf_ && committed == noticed_committed_) return;
    noticed_conf_ = at;
    noticed_committed_ = committed;
    if (hooks_.membership_changed) hooks_.membership_changed();
}

bool RaftShell::planted(ShellDefect d) const {
#ifdef DUEQ_PLANTED_BUGS
    return cfg_.defect == d;
#else
    (void)d;
    return false;
#endif
}

void RaftShell::fail(const std::string& message) {
    failed_ = true;
    if (hooks_.fatal) hooks_.fatal(message);
}

bool RaftShell::reaches_quorum() const {
    const auto& voters = raft_->membership().voters;
    std::size_t reached = 0;
    for (raft::NodeId id : voters)
        if (id == cfg_.raft.id || transport_.connected(id)) ++reached;
    return 2 * reached > voters.size();
}

void RaftShell::answer(Proposal& p, Code code, const std::string& message) {
    Outcome o{code, message, nullptr, nullptr, 0, 0};
    if (p.done) p.done(o);
}

raft::Index RaftShell::propose(queue::Command cmd, std::int64_t now, Done done) {
    now_ = std::max(now_, now);
    Proposal p{0, now + cfg_.proposal_timeout_ms, std::move(done)};
    // Links to a majority are down: nothing proposed now could commit. Checked first, so
    // that a leader cut off from its followers, or a node that knows no leader because
    // it is alone, says so at once instead of redirecting or waiting for the deadline.
    if (!reaches_quorum()) {
        answer(p, Code::no_quorum, "this node cannot reach a majority of the cluster; not applied");
        return 0;
    }
    if (!is_leader()) {
        answer(p, Code::not_leader,
               raft_->leader() == raft::kNoNode ? "no leader is known yet; retry shortly"
                                                : "this node is a follower");
        return 0;
    }
    std::string entry = queue::encode_command(cmd);
    // Every replica must read back what is logged: an entry apply cannot decode would stop
    // each of them at its index, on every restart too.
    if (!queue::fits_log_record(entry)) {
        answer(p, Code::too_large,
               "the command is larger than a log record holds (" +
                   std::to_string(limits::kRecordPayloadBytes) + " bytes of payload); not applied");
        return 0;
    }
    auto index = raft_->propose(std::move(entry), raft::Millis(now));
    if (!index) {
        answer(p, index.error() == raft::Error::not_leader ? Code::not_leader : Code::unavailable,
               std::string("cannot propose: ") + std::string(raft::to_string(index.error())));
        return 0;
    }
    if (planted(ShellDefect::reply_before_commit) && !std::holds_alternative<queue::Take>(cmd)) {
        queue::Result nothing;
        Outcome o{Code::ok, {}, &cmd, &nothing, index.value(), raft_->term()};
        p.done(o);
        p.done = nullptr;
    }
    p.term = raft_->term();
    track(index.value(), std::move(p));
    return index.value();
}

raft::Index RaftShell::propose_membership(raft::Membership next, std::int64_t now, Done done) {
    now_ = std::max(now_, now);
    Proposal p{0, now + cfg_.proposal_timeout_ms, std::move(done), raft::EntryType::config};
    auto index = raft_->propose_membership(std::move(next), raft::Millis(now));
    if (!index) {
        const raft::Error e = index.error();
        // A malformed change is the caller's; the rest pass (a pending change commits, a
        // learner catches up, a transfer ends) and may be retried.
        answer(p,
               e == raft::Error::not_leader ? Code::not_leader
               : e == raft::Error::invalid  ? Code::bad_request
                                            : Code::unavailable,
               std::string(raft::to_string(e)));
        return 0;
    }
    p.term = raft_->term();
    track(index.value(), std::move(p));
    return index.value();
}

void RaftShell::track(raft::Index index, Proposal p) {
    // Ours from an earlier term at this index or after: this node's log was cut below
    // them, but another replica may still hold them and commit them as a later leader.
    while (!proposals_.empty() && proposals_.back().first >= index) {
        Proposal old = std::move(proposals_.back().second);
        proposals_.pop_back();
        answer(old, Code::timeout,
               "leadership changed before this was seen to commit; it may or may not be "
               "applied");
    }
    proposals_.emplace_back(index, std::move(p));
    if (hooks_.schedule) hooks_.schedule();
}

raft::Status RaftShell::read_index(std::uint64_t context) {
    auto st = raft_->read_index(context);
    if (hooks_.schedule) hooks_.schedule();
    return st;
}

// Proposals are made in index order with a clock that does not go back, so their
// deadlines grow with the index: the sweep stops at the first one still in time.
void RaftShell::expire_proposals(std::int64_t now) {
    while (!proposals_.empty() && proposals_.front().second.deadline <= now) {
        Proposal p = std::move(proposals_.front().second);
        proposals_.pop_front();
        answer(p, Code::timeout,
               "not committed within " + std::to_string(cfg_.proposal_timeout_ms) +
                   " ms; it may or may not be applied later");
    }
}

void RaftShell::tick(std::int64_t now) {
    now_ = std::max(now_, now);
    raft_->tick(raft::Millis(now));
    if (campaign_at_ >= 0 && now >= campaign_at_) {
        campaign_at_ = -1;
        if (raft_->role() == raft::Role::follower && raft_->leader() == raft::kNoNode) {
            spdlog::info("leader link lost: campaigning now (term {})", raft_->term());
            raft_->campaign_now();
        }
    }
    expire_proposals(now);
    if (!inflight_) persist_applied_when_due();
    if (hooks_.schedule) hooks_.schedule();
}

std::string RaftShell::step(raft::NodeId from, const raft::Message& m) {
    if (auto problem = raft::message_problem(m, from, cfg_.raft.id); !problem.empty())
        return problem;
    const raft::NodeId old_leader = raft_->leader();
    const raft::Role old_role = raft_->role();
    raft_->step(m);
    if (raft_->leader() != old_leader || raft_->role() != old_role)
        spdlog::info("term {}: {} (leader {})", raft_->term(), raft::to_string(raft_->role()),
                     raft_->leader());
    if (hooks_.schedule) hooks_.schedule();
    return {};
}

bool RaftShell::step_snapshot(const raft::Message& m, std::unique_ptr<queue::Store> store) {
    // The records were checked before the core hears of the snapshot: once it has
    // accepted one, there is no going back to the old state.
    // The membership at the snapshot's index is the one its state holds.
    raft::Message with_conf = m;
    if (with_conf.snapshot && store && !store->membership().empty())
        with_conf.snapshot->conf = store->membership();
    raft_->step(with_conf);
    const auto& pending = raft_->log().unstable_snapshot();
    const bool accepted = m.snapshot && pending && pending->meta == m.snapshot->meta;
    // Only the snapshot the core will hand out goes with it: one it refused must not
    // replace an earlier one it accepted and has not installed yet.
    if (accepted) received_store_ = std::move(store);
    if (hooks_.schedule) hooks_.schedule();
    return accepted;
}

void RaftShell::on_link_change(raft::NodeId peer, bool up, std::int64_t now) {
    now_ = std::max(now_, now);
    if (up || peer != raft_->leader() || raft_->role() != raft::Role::follower) return;
    // The leader's link broke, as it does at once when its process dies. Forget it (so
    // our vote is free) and campaign soon instead of after the election timeout;
    // PreVote keeps this harmless if the leader is in fact alive and heard by others.
    // The survivors start one after another by id, so that they do not split the vote.
    // Refused with lease reads on (raft.h): then the leader's lease must run out first.
    if (!raft_->forget_leader().is_ok()) return;
    std::int64_t rank = 0;
    for (raft::NodeId id : raft_->membership().voters)
        if (id < cfg_.raft.id && id != peer) ++rank;
    if (rank > 0) {
        campaign_at_ = now + rank * cfg_.campaign_step_ms;
    } else {
        campaign_at_ = -1;
        spdlog::info("leader link lost: campaigning now (term {})", raft_->term());
        raft_->campaign_now();
    }
    if (hooks_.schedule) hooks_.schedule();
}

void RaftShell::process_ready() {
    if (failed_ || !raft_) return;
    notice_membership();
    if (inflight_) return apply_while_writing();
    if (!raft_->has_ready()) return;
    inflight_ = raft_->ready();
    raft::Ready& rd = *inflight_;
    for (const auto& m : rd.messages_before_persist)
        transport_.send(m);
    if (rd.snapshot) {
        install_snapshot(rd);
        if (failed_) return;
        if (!rd.entries.empty())
            inflight_ticket_ =
                storage_.write_log(storage::LogWrite{rd.entries, std::nullopt, true});
        return;
    }
    if (!rd.must_sync) {
        // Nothing here needs to be durable before it takes effect (at most the commit
        // index moved): write it behind, and go on without waiting for the disk.
        if (rd.hard_state) storage_.write_log(storage::LogWrite{{}, rd.hard_state, false});
        inflight_ticket_ = 0;
        return finish_ready();
    }
    inflight_ticket_ = storage_.write_log(storage::LogWrite{rd.entries, rd.hard_state, true});
}

void RaftShell::on_persisted(std::uint64_t ticket) {
    if (failed_ || !inflight_ || inflight_ticket_ == 0 || ticket < inflight_ticket_) return;
    finish_ready();
}

void RaftShell::finish_ready() {
    raft::Ready rd = std::move(*inflight_);
    inflight_.reset();
    inflight_ticket_ = 0;
    // What was just made durable becomes visible to the core (raft/storage.h).
    if (!rd.entries.empty() && !log_.append(rd.entries).is_ok())
        return fail("the log mirror refused entries from index " +
                    std::to_string(rd.entries.front().index));
    if (rd.hard_state) log_.set_hard_state(*rd.hard_state);
    for (const auto& m : rd.messages)
        transport_.send(m);
    if (planted(ShellDefect::applies_uncommitted))
        for (const auto& e : rd.entries)
            if (e.index == applied_.index + 1) apply_entry(e);
    const bool wrote = apply_entries(rd.committed_entries);
    if (failed_) return;
    if (rd.snapshot_wanted) take_checkpoint();
    raft_->advance(rd);
    if (hooks_.on_read_state)
        for (const auto& rs : rd.read_states)
            hooks_.on_read_state(rs);
    if (hooks_.applied) hooks_.applied(wrote);
    process_ready();
}

void RaftShell::apply_while_writing() {
    // A leader would otherwise answer a batch its followers have acknowledged only once
    // its own next write is done (the commit reaches it inside that next Ready).
    if (inflight_->snapshot) return;
    const raft::Index before = applied_.index;
    // In order: first what the Ready in flight carries (finish_ready then skips it), then
    // what committed after it was made.
    bool wrote = apply_entries(inflight_->committed_entries);
    if (failed_) return;
    const auto entries = raft_->take_committed(written_prefix());
    wrote = apply_entries(entries) || wrote;
    if (failed_) return;
    if (hooks_.applied && applied_.index != before) hooks_.applied(wrote);
}

raft::Index RaftShell::written_prefix() const {
    // Storage writes in order, so an applied state handed to it now lands after the write
    // in flight. By Log Matching, an entry the core still holds vouches for all before it.
    const raft::RaftLog& core = raft_->log();
    const auto& writing = inflight_->entries;
    if (!writing.empty()) {
        for (auto it = writing.rbegin(); it != writing.rend(); ++it)
            if (core.match_term(it->index, it->term)) return it->index;
        return 0;  // the whole write was replaced since: what it leaves is not the core's
    }
    const raft::Index last = log_.last_index();
    const auto term = log_.term(last);
    return term && core.match_term(last, term.value()) ? last : 0;
}

bool RaftShell::fork_store(queue::LeaseId lease_base) {
    if (failed_ || !store_ || store_->forked()) return false;
    persist_applied();  // the fork starts from a store whose changes are handed off
    return store_->fork(lease_base);
}

void RaftShell::end_fork() {
    if (!store_ || !store_->forked()) return;
    store_->rollback();
    if (hooks_.fork_ended) hooks_.fork_ended();
}

std::size_t RaftShell::collect_changes() {
    const std::size_t from = unwritten_.changes.size();
    store_->drain_changes([this](std::string_view q, std::string_view k, auto&& encoded) {
        unwritten_.changes.push_back({std::string(q), std::string(k), std::move(encoded)});
    });
    return from;
}

void RaftShell::persist_applied(const raft::SnapshotMeta& trim) {
    collect_changes();
    if (unwritten_.changes.empty() && applied_.index == handed_index_ && trim.index == 0) return;
    unwritten_.applied_index = applied_.index;
    unwritten_.applied_time = std::int64_t(applied_.time);
    unwritten_.trim = trim;
    unwritten_.store_meta = store_->encode_meta();
    handed_index_ = applied_.index;
    handed_at_ = now_;
    storage_.write_applied(std::move(unwritten_));
    unwritten_ = storage::AppliedState{};
}

void RaftShell::persist_applied_when_due() {
    if (applied_.index == handed_index_ || store_->forked()) return;
    if (applied_.index - handed_index_ >= cfg_.state_write_entries ||
        now_ - handed_at_ >= cfg_.state_write_ms)
        persist_applied();
}

void RaftShell::take_checkpoint() {
    if (checkpoint_pending_) return;
    checkpoint_pending_ = true;
    persist_applied();  // a checkpoint is a view of the applied state as written
    storage_.checkpoint(applied_);
}

raft::Index RaftShell::kept_for_peers(raft::Index trim) const {
    if (!is_leader()) return trim;
    // A member that is being sent a snapshot, or catching up after one, needs the log from
    // where that snapshot ends: trimming it would send it another snapshot, and with a big
    // store under load it would never catch up (a new member's first snapshot). Within
    // bounds: never more than ten snapshot intervals beyond the usual.
    const raft::Index extra = 10 * cfg_.raft.snapshot_threshold;
    const raft::Index bound = trim > extra ? trim - extra : 0;
    raft::Index floor = trim;
    auto need = [&](raft::NodeId id) {
        const raft::Progress* pr = raft_->progress(id);
        if (!pr || !transport_.connected(id)) return;
        const raft::Index from =
            pr->state == raft::ProgressState::snapshot ? pr->pending_snapshot : pr->match;
        floor = std::min(floor, from);
    };
    for (raft::NodeId id : raft_->membership().voters)
        need(id);
    for (raft::NodeId id : raft_->membership().learners)
        need(id);
    return std::max({floor, bound, log_.first_index()});
}

bool RaftShell::on_checkpoint(const raft::SnapshotMeta& meta) {
    checkpoint_pending_ = false;
    if (failed_) return false;
    if (meta.index > log_.snapshot().meta.index) {
        if (!log_.create_snapshot(meta.index, {}).is_ok()) return false;
        // Keep log_keep entries behind the snapshot for followers slightly behind.
        if (meta.index > cfg_.log_keep + log_.first_index()) {
            const raft::Index trim = kept_for_peers(meta.index - cfg_.log_keep);
            auto entries = log_.entries(trim, trim + 1, 0);
            if (trim >= log_.first_index() && entries && !entries.value().empty()) {
                const raft::Entry& e = entries.value().front();
                log_.compact(trim);
                persist_applied({trim, e.term, e.time});
            }
        }
        spdlog::debug("snapshot at index {}; log from {}", meta.index, log_.first_index());
    }
    return meta == log_.snapshot().meta;
}

void RaftShell::install_snapshot(raft::Ready& rd) {
    const raft::SnapshotMeta meta = rd.snapshot->meta;
    if (!received_store_) return fail("the core accepted a snapshot this node never received");
    end_fork();
    auto ticket = storage_.install_snapshot(meta, rd.hard_state.value_or(log_.hard_state()));
    if (!ticket) return fail("the core accepted a snapshot whose records are gone");
    inflight_ticket_ = *ticket;
    // The store is replaced now; the core sees the snapshot once it is durable.
    store_ = std::move(received_store_);
    store_->plant(cfg_.store_defect);
    store_->drain_changes([](auto, auto, const auto&) {});
    unwritten_ = storage::AppliedState{};
    log_.apply_snapshot(raft::Snapshot{meta, {}});
    if (rd.hard_state) log_.set_hard_state(*rd.hard_state);
    rd.hard_state.reset();
    applied_ = meta;
    handed_index_ = meta.index;
    checkpoint_pending_ = true;
    storage_.checkpoint(meta);
    // A snapshot replaced the log: whether these entries are in it cannot be told here.
    auto lost = std::move(proposals_);
    proposals_.clear();
    for (auto& [index, p] : lost)
        answer(p, Code::timeout,
               "a snapshot replaced the log before this was seen to commit; it may or may not "
               "be applied");
    ++snapshots_installed_;
    spdlog::info("installed snapshot at index {} (term {}): {} tasks", meta.index, meta.term,
                 store_->task_count());
}

}  // namespace dueq::shell
