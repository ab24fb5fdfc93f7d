#include "sim/checker.h"

#include <algorithm>

#include "sim/digest.h"
#include "sim/text.h"

namespace dueq::sim {

using raft::Index;
using raft::NodeId;
using raft::Role;
using raft::Term;

namespace {

struct LastEntry {
    Term term;
    Index index;
};

LastEntry durable_last(const raft::MemoryStorage& s) {
    Index last = s.last_index();
    auto t = s.term(last);
    return {t ? t.value() : 0, last};
}

// §3.6.1 ordering: is log a at least as up-to-date as log b?
bool at_least_as_up_to_date(LastEntry a, LastEntry b) {
    return a.term > b.term || (a.term == b.term && a.index >= b.index);
}

// Does the durable log hold (index, term)? Entries behind its snapshot count as held:
// a snapshot covers only committed entries, which the checker verifies separately.
bool durable_holds(const raft::MemoryStorage& s, Index index, Term term) {
    if (index <= s.snapshot().meta.index) return true;
    auto t = s.term(index);
    return t && t.value() == term;
}

bool memory_holds(const raft::Raft& r, Index index, Term term) {
    auto t = r.log().term(index);
    if (t) return t.value() == term;
    return t.error() == raft::Error::compacted;
}
}  // namespace

void Checker::fail(const std::string& what) {
    if (failure_.empty())
        failure_ = cat("t=", now_us_ / 1000, ".", now_us_ % 1000 / 100, "ms: ", what);
}

const NodeView& Checker::view(NodeId id) const {
    for (const auto& v : nodes_) {
        if (v.id == id) return v;
    }
    return nodes_.front();
}

void Checker::set_raft(NodeId id, const raft::Raft* r) {
    for (auto& v : nodes_) {
        if (v.id == id) v.raft = r;
    }
}

void Checker::on_start(NodeId id, const raft::SnapshotMeta& applied, std::uint64_t digest) {
    NodeTrack& t = track(id);
    const auto& st = *view(id).storage;
    std::vector<NodeId> voters = std::move(t.voters);
    t = NodeTrack{};
    t.voters = std::move(voters);
    t.term = st.hard_state().term;
    t.applied = applied.index;
    t.applied_time = applied.time;
    t.commit = view(id).raft ? view(id).raft->log().committed() : 0;
    // What the disk kept of the applied state must be the state every replica had at
    // that index: a torn or lost write may leave it behind, never different.
    if (applied.index > 0 && applied.index < applied_.size() && applied_[applied.index].term != 0 &&
        applied_[applied.index].digest != digest)
        fail(cat("node ", id, " restarted with a store at index ", applied.index,
                 " that differs from what was applied there"));
}

void Checker::after_step(NodeId id) {
    const raft::Raft* r = view(id).raft;
    if (!r) return;
    NodeTrack& t = track(id);
    if (r->term() < t.term)
        fail(cat("node ", id, " term went back from ", t.term, " to ", r->term()));
    Index commit = r->log().committed();
    if (commit > r->log().last_index()) {
        fail(cat("node ", id, " commit ", commit, " beyond last index ", r->log().last_index()));
    }
    if (commit < t.commit)
        fail(cat("node ", id, " commit went back from ", t.commit, " to ", commit));

    t.voters = r->membership().voters;
    if (r->role() == Role::leader) {
        if (contract_checks_) check_changes(id);
        auto [it, inserted] = leaders_.emplace(r->term(), id);
        if (!inserted && it->second != id) {
            fail(cat("two leaders in term ", r->term(), ": nodes ", it->second, " and ", id));
        }
        if (t.role != Role::leader || t.term != r->term()) check_leader_completeness(id);
    }
    if (commit > t.commit) {
        record_commit(id, t.commit + 1, commit);
        if (r->role() == Role::leader) check_commit_safe(id, commit);
    }
    t.term = r->term();
    t.role = r->role();
    t.commit = commit;
}

void Checker::record_commit(NodeId id, Index from, Index to) {
    const raft::Raft& r = *view(id).raft;
    if (committed_.size() <= to) committed_.resize(to + 1, 0);
    if (commit_term_.size() <= to) commit_term_.resize(to + 1, 0);
    for (Index i = from; i <= to; ++i) {
        auto term = r.log().term(i);
        if (!term) continue;  // behind a snapshot: committed by whoever made it
        Term& known = committed_[i];
        if (known == 0) {
            known = term.value();
            commit_term_[i] = r.term();  // the leader that commits it sees it first
        } else if (known != term.value()) {
            fail(cat("committed entry changed at index ", i, ": term ", known, " before, node ", id,
                     " now commits term ", term.value()));
            return;
        }
    }
}

void Checker::check_leader_completeness(NodeId id) {
    // §3.6.3 Leader Completeness: a leader holds every entry committed in an earlier
    // term. (A leader of an old term may still be elected late, by nodes that never
    // heard of the newer terms; entries committed in newer terms are not its business,
    // even when the entry itself is of an older term: seed 900,059,138 with 20 s of
    // faults, where an entry of term 4 was committed in term 6 and a late vote then made
    // a node that lacked it the leader of term 5.)
    const raft::Raft& r = *view(id).raft;
    for (Index i = r.log().first_index(); i < committed_.size(); ++i) {
        if (committed_[i] == 0 || commit_term_[i] > r.term()) continue;
        auto t = r.log().term(i);
        if (!t || t.value() != committed_[i]) {
            fail(cat("leader completeness: node ", id, " leads term ", r.term(),
                     " without committed entry ", i, " (term ", committed_[i], "; its log has ",
                     t ? t.value() : 0, ")"));
            return;
        }
    }
}

void Checker::check_changes(NodeId id) {
    // §4.1: a leader has at most one membership change in flight, and only once it has
    // committed an entry of its own term (a leader whose change is still in the log from
    // an earlier term inherited it and did not propose it).
    const raft::Raft& r = *view(id).raft;
    const std::vector<Index> pending = r.pending_changes();
    if (pending.size() > 1)
        fail(cat("leader ", id, " of term ", r.term(), " has ", pending.size(),
                 " membership changes in flight (indexes ", pending[0], " and ", pending[1], ")"));
    for (Index i : pending) {
        if (r.log().term_or_zero(i) == r.term() &&
            r.log().term_or_zero(r.log().committed()) != r.term())
            fail(cat("leader ", id, " proposed the membership change at ", i, " in term ", r.term(),
                     " before committing an entry of that term"));
    }
}

void Checker::check_commit_safe(NodeId id, Index index) {
    // The moment an entry is committed, no node that lacks it may be able to win an
    // election: votes from a majority of the voters it knows of, whose (durable) logs are
    // not more up-to-date than its own. This sees a Figure 8 commit before anybody
    // exploits it, and a commit counted with the wrong voters (a learner, a removed one).
    Term term = committed_term(index);
    if (term == 0) return;
    for (const auto& x : nodes_) {
        const std::vector<NodeId>& x_voters = track(x.id).voters;
        if (std::find(x_voters.begin(), x_voters.end(), x.id) == x_voters.end()) continue;
        const std::size_t quorum = x_voters.size() / 2 + 1;
        std::vector<LastEntry> candidates;
        if (!durable_holds(*x.storage, index, term)) candidates.push_back(durable_last(*x.storage));
        if (x.raft && !memory_holds(*x.raft, index, term)) {
            candidates.push_back({x.raft->log().last_term(), x.raft->log().last_index()});
        }
        for (LastEntry c : candidates) {
            std::size_t voters = 0;
            for (const auto& v : nodes_) {
                if (std::find(x_voters.begin(), x_voters.end(), v.id) == x_voters.end()) continue;
                voters += at_least_as_up_to_date(c, durable_last(*v.storage)) ? 1 : 0;
            }
            if (voters >= quorum) {
                fail(cat("unsafe commit: leader ", id, " committed index ", index, " (term ", term,
                         ") but node ", x.id, " lacks it and could win an election with log (",
                         c.term, ",", c.index, ")"));
                return;
            }
        }
    }
}

void Checker::on_synced(NodeId id, const storage::LogWrite& w) {
    const auto& st = *view(id).storage;
    if (w.hard_state) {
        const raft::HardState old = st.hard_state();
        const raft::HardState& hs = *w.hard_state;
        if (hs.term < old.term)
            fail(cat("node ", id, " persisted term ", hs.term, " < ", old.term));
        if (hs.term == old.term && old.vote != 0 && hs.vote != old.vote) {
            fail(cat("node ", id, " changed its persisted vote in term ", hs.term));
        }
        if (hs.vote != 0) durable_votes_[{id, hs.term}] = hs.vote;
    }
    // Log Matching (§3.5): the same (index, term) anywhere means the same entry after
    // the same history. Checked inductively: same payload and same previous term.
    for (std::size_t k = 0; k < w.entries.size(); ++k) {
        const raft::Entry& e = w.entries[k];
        Term prev_term;
        if (k > 0) {
            prev_term = w.entries[k - 1].term;
        } else {
            auto t = st.term(e.index - 1);
            prev_term = t ? t.value() : 0;
        }
        LogValue v{fnv1a(e.data), prev_term};
        auto [it, inserted] = log_entries_.emplace(LogKey{e.index, e.term}, v);
        if (!inserted &&
            (it->second.data_hash != v.data_hash || it->second.prev_term != v.prev_term)) {
            fail(cat("log matching: node ", id, " stores a different entry at index ", e.index,
                     " term ", e.term));
        }
    }
}

void Checker::on_send(const raft::Message& m) {
    if (m.type == raft::MessageType::append_resp && !m.reject && contract_checks_) {
        // An acknowledgement counts toward a commit: what it acknowledges is on disk. Or
        // the node has durably moved to a later term: entries it acknowledged in an older
        // term that a newer leader then overwrote before they reached the disk cannot be
        // committed (that leader was elected by a majority without them).
        const auto& st = *view(m.from).storage;
        if (m.index > st.last_index() && m.index > st.snapshot().meta.index &&
            st.hard_state().term <= m.term)
            fail(cat("node ", m.from, " acknowledged index ", m.index, " to ", m.to,
                     " while its disk holds up to ", st.last_index()));
    }
    if (m.type != raft::MessageType::vote_resp || m.reject) return;
    // Figure 3.1: votedFor is on stable storage before the vote is granted (or a later
    // term is: a node whose durable term is past m.term can never vote in it again).
    auto durable = durable_votes_.find({m.from, m.term});
    bool vote_durable = durable != durable_votes_.end() && durable->second == m.to;
    bool term_passed = view(m.from).storage->hard_state().term > m.term;
    if (contract_checks_ && !vote_durable && !term_passed) {
        fail(cat("node ", m.from, " granted its vote in term ", m.term, " to ", m.to,
                 " before persisting it"));
    }
    auto [it, inserted] = votes_.emplace(std::make_pair(m.from, m.term), m.to);
    if (!inserted && it->second != m.to) {
        fail(cat("node ", m.from, " voted for both ", it->second, " and ", m.to, " in term ",
                 m.term));
    }
}

void Checker::on_apply(NodeId id, const raft::Entry& e, std::uint64_t digest) {
    NodeTrack& t = track(id);
    if (e.index != t.applied + 1) {
        fail(cat("node ", id, " applied index ", e.index, " after ", t.applied));
        return;
    }
    if (contract_checks_ && committed_term(e.index) != e.term) {
        fail(cat("node ", id, " applied entry ", e.index, " (term ", e.term,
                 ") that is not committed"));
    }
    if (e.time < t.applied_time) {
        fail(cat("log time went back at index ", e.index, ": ", e.time, " < ", t.applied_time));
    }
    if (applied_.size() <= e.index) applied_.resize(e.index + 1, {0, 0});
    Applied& a = applied_[e.index];
    if (a.term == 0) {
        a = {e.term, digest};
    } else if (a.term != e.term || a.digest != digest) {
        fail(cat("node ", id, " applied a different sequence: index ", e.index, " term ", e.term,
                 " vs term ", a.term, " applied elsewhere"));
    }
    t.applied = e.index;
    t.applied_time = e.time;
}

void Checker::on_install(NodeId id, const raft::SnapshotMeta& meta, std::uint64_t digest) {
    NodeTrack& t = track(id);
    if (meta.index < applied_.size() && applied_[meta.index].term != 0 &&
        applied_[meta.index].digest != digest) {
        fail(cat("node ", id, " installed a snapshot at ", meta.index,
                 " that differs from what was applied"));
    }
    if (committed_term(meta.index) != 0 && committed_term(meta.index) != meta.term) {
        fail(cat("node ", id, " installed a snapshot of an uncommitted entry ", meta.index));
    }
    if (meta.time < t.applied_time && meta.index >= t.applied) {
        fail(cat("log time went back with a snapshot at index ", meta.index));
    }
    t.applied = meta.index;
    t.applied_time = meta.time;
}

}  // namespace dueq::sim
