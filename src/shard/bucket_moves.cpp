#include "shard/bucket_moves.h"

namespace dueq::shard {

namespace {

MoveApplied applied(BucketData data = BucketData::keep) {
    return {MoveOutcome::applied, data, ""};
}
MoveApplied repeated() {
    return {MoveOutcome::repeated, BucketData::keep, ""};
}
MoveApplied refused(std::string why) {
    return {MoveOutcome::refused, BucketData::keep, std::move(why)};
}

// A step that does not fit the bucket's state (a stale generation, a step out of order).
MoveApplied out_of_order(const MoveCommand& c, const BucketState* s) {
    return refused(
        std::string(to_string(c.step)) + " of generation " + std::to_string(c.gen) +
        ": the bucket is " +
        (s ? std::string(to_string(s->phase)) + " (generation " + std::to_string(s->gen) + ")"
           : std::string("no move")));
}

}  // namespace

const char* to_string(BucketPhase p) {
    switch (p) {
        case BucketPhase::active:
            return "active";
        case BucketPhase::sending:
            return "sending";
        case BucketPhase::aborting:
            return "aborting";
        case BucketPhase::sent:
            return "sent";
        case BucketPhase::gone:
            return "gone";
        case BucketPhase::receiving:
            return "receiving";
        case BucketPhase::received:
            return "received";
        case BucketPhase::dropped:
            return "dropped";
    }
    return "?";
}

std::optional<BucketPhase> phase_from_string(std::string_view word) {
    for (int i = 0; i <= int(BucketPhase::dropped); ++i)
        if (word == to_string(BucketPhase(i))) return BucketPhase(i);
    return std::nullopt;
}

const char* to_string(MoveOutcome o) {
    switch (o) {
        case MoveOutcome::applied:
            return "applied";
        case MoveOutcome::repeated:
            return "repeated";
        case MoveOutcome::refused:
            return "refused";
        case MoveOutcome::out_of_sequence:
            return "out_of_sequence";
    }
    return "?";
}

std::optional<MoveOutcome> outcome_from_string(std::string_view word) {
    for (int i = 0; i <= int(MoveOutcome::out_of_sequence); ++i)
        if (word == to_string(MoveOutcome(i))) return MoveOutcome(i);
    return std::nullopt;
}

const char* to_string(MoveStep s) {
    switch (s) {
        case MoveStep::begin:
            return "begin";
        case MoveStep::sent:
            return "sent";
        case MoveStep::drop:
            return "drop";
        case MoveStep::abort:
            return "abort";
        case MoveStep::abort_done:
            return "abort_done";
        case MoveStep::chunk:
            return "chunk";
        case MoveStep::activate:
            return "activate";
        case MoveStep::forget:
            return "forget";
    }
    return "?";
}

const char* to_string(NextMoveAction a) {
    switch (a) {
        case NextMoveAction::none:
            return "none";
        case NextMoveAction::send_chunks:
            return "send_chunks";
        case NextMoveAction::propose_sent:
            return "propose_sent";
        case NextMoveAction::propose_abort:
            return "propose_abort";
        case NextMoveAction::send_activate:
            return "send_activate";
        case NextMoveAction::propose_drop:
            return "propose_drop";
        case NextMoveAction::send_forget:
            return "send_forget";
        case NextMoveAction::propose_abort_done:
            return "propose_abort_done";
    }
    return "?";
}

const BucketState* BucketMoves::find(Bucket b) const {
    auto it = states_.find(b);
    return it == states_.end() ? nullptr : &it->second;
}

bool BucketMoves::writable(Bucket b) const {
    const BucketState* s = find(b);
#ifdef DUEQ_PLANTED_BUGS
    if (planted_ == MoveDefect::write_while_sending && s && s->phase == BucketPhase::sending)
        return true;
#endif
    return !s || s->phase == BucketPhase::active || s->phase == BucketPhase::aborting;
}

void BucketMoves::plant([[maybe_unused]] MoveDefect defect) {
#ifdef DUEQ_PLANTED_BUGS
    planted_ = defect;
#endif
}

bool BucketMoves::readable(Bucket b) const {
    return writable(b) || find(b)->phase == BucketPhase::sending;
}

MoveGen BucketMoves::next_gen(Bucket b) const {
    const BucketState* s = find(b);
    return s ? s->gen + 1 : 1;
}

MoveApplied BucketMoves::apply(const MoveCommand& c) {
    if (c.peer.size() > kMaxShardNameBytes) return refused("the shard name is too long");
    MoveApplied a = refused("unknown step");
    switch (c.step) {
        case MoveStep::begin:
        case MoveStep::sent:
        case MoveStep::drop:
        case MoveStep::abort:
        case MoveStep::abort_done:
            a = source_step(c);
            break;
        case MoveStep::chunk:
        case MoveStep::activate:
        case MoveStep::forget:
            a = destination_step(c);
            break;
    }
    if (a.outcome == MoveOutcome::applied) {
        count_hiding();
        ++changes_;
    }
    return a;
}

void BucketMoves::reset(std::map<Bucket, BucketState> states) {
    states_ = std::move(states);
    count_hiding();
    ++changes_;
}

// Moves are rare: counting every entry after each step costs nothing that matters.
void BucketMoves::count_hiding() {
    hiding_ = 0;
    for (const auto& [b, s] : states_)
        if (s.phase == BucketPhase::sending || s.phase == BucketPhase::sent ||
            s.phase == BucketPhase::receiving || s.phase == BucketPhase::received)
            ++hiding_;
}

MoveApplied BucketMoves::source_step(const MoveCommand& c) {
    auto found = states_.find(c.bucket);
    BucketState* s = found == states_.end() ? nullptr : &found->second;
    const bool same = s && s->gen == c.gen;
    switch (c.step) {
        case MoveStep::begin:
            if (same && s->phase == BucketPhase::sending && s->peer == c.peer) return repeated();
            if (s && s->phase != BucketPhase::active) return out_of_order(c, s);
            if (c.gen != next_gen(c.bucket)) return out_of_order(c, s);
            if (c.peer.empty()) return refused("begin names no destination");
            states_[c.bucket] = {BucketPhase::sending, c.peer, c.gen, 0};
            return applied();
        case MoveStep::sent:
            if (!same) return out_of_order(c, s);
            if (s->phase == BucketPhase::sent || s->phase == BucketPhase::gone) return repeated();
            if (s->phase != BucketPhase::sending) return out_of_order(c, s);
            s->phase = BucketPhase::sent;
            return applied();
        case MoveStep::drop:
            if (!same) return out_of_order(c, s);
            if (s->phase == BucketPhase::gone) return repeated();
            if (s->phase != BucketPhase::sent) return out_of_order(c, s);
            s->phase = BucketPhase::gone;
            return applied(BucketData::clear);
        case MoveStep::abort:
            if (!same) return out_of_order(c, s);
            if (s->phase == BucketPhase::aborting || s->phase == BucketPhase::active)
                return repeated();
            if (s->phase != BucketPhase::sending) return out_of_order(c, s);  // sent: too late
            s->phase = BucketPhase::aborting;
            return applied();
        case MoveStep::abort_done:
            if (!same) return out_of_order(c, s);
            if (s->phase == BucketPhase::active) return repeated();
            if (s->phase != BucketPhase::aborting) return out_of_order(c, s);
            s->phase = BucketPhase::active;
            s->peer.clear();
            return applied();
        default:
            return out_of_order(c, s);
    }
}

MoveApplied BucketMoves::destination_step(const MoveCommand& c) {
    auto found = states_.find(c.bucket);
    BucketState* s = found == states_.end() ? nullptr : &found->second;
    const bool same = s && s->gen == c.gen;
    // Phases a new copy may start over: none here, or one this shard let go of earlier.
    const bool let_go =
        !s ||
        ((s->phase == BucketPhase::gone || s->phase == BucketPhase::dropped) && s->gen < c.gen);
    const bool copying =
        s && (s->phase == BucketPhase::receiving || s->phase == BucketPhase::received);
    switch (c.step) {
        case MoveStep::chunk:
            if (c.chunk == 0) {
                if (c.peer.empty()) return refused("chunk names no source");
                if (!let_go && !(copying && s->gen <= c.gen)) return out_of_order(c, s);
                // A copy that is complete stays so: the source's data is frozen, and a chunk
                // 0 sent again (a new source leader, a duplicate) carries nothing new.
                if (copying && same && s->phase == BucketPhase::received) return repeated();
                states_[c.bucket] = {c.last ? BucketPhase::received : BucketPhase::receiving,
                                     c.peer, c.gen, 1};
                return applied(BucketData::clear_first);
            }
            if (!same || !copying) return out_of_order(c, s);
            if (s->phase == BucketPhase::received || c.chunk < s->next_chunk) return repeated();
            if (c.chunk != s->next_chunk)
                return {MoveOutcome::out_of_sequence, BucketData::keep,
                        "chunk " + std::to_string(c.chunk) + " while " +
                            std::to_string(s->next_chunk) + " is expected"};
            s->next_chunk = c.chunk + 1;
            if (c.last) s->phase = BucketPhase::received;
            return applied();
        case MoveStep::activate:
            if (!same) return out_of_order(c, s);
            if (s->phase == BucketPhase::active) return repeated();
            if (s->phase != BucketPhase::received) return out_of_order(c, s);
            s->phase = BucketPhase::active;
            s->peer.clear();
            return applied();
        case MoveStep::forget:
            if (same && s->phase == BucketPhase::dropped) return repeated();
            if (copying && s->gen <= c.gen) {
                *s = {BucketPhase::dropped, "", c.gen, 0};
                return applied(BucketData::clear);
            }
            // Nothing arrived yet (chunk 0 was lost): remember the generation so that a late
            // chunk of it is refused.
            if (let_go) {
                states_[c.bucket] = {BucketPhase::dropped, "", c.gen, 0};
                return applied();
            }
            return out_of_order(c, s);
        default:
            return out_of_order(c, s);
    }
}

NextMoveAction next_move_action(const BucketState& source, const MoveProgress& progress,
                                [[maybe_unused]] MoveDefect defect) {
    const bool heard = progress.gen == source.gen;
#ifdef DUEQ_PLANTED_BUGS
    if (heard && defect == MoveDefect::serve_before_sent && progress.received &&
        source.phase == BucketPhase::sending && !progress.activated)
        return NextMoveAction::send_activate;
    if (heard && defect == MoveDefect::drop_before_commit && progress.chunks_sent) {
        if (source.phase == BucketPhase::sending) return NextMoveAction::propose_sent;
        if (source.phase == BucketPhase::sent) return NextMoveAction::propose_drop;
    }
#endif
    switch (source.phase) {
        case BucketPhase::sending:
            if (heard && progress.refused) return NextMoveAction::propose_abort;
            if (heard && progress.received) return NextMoveAction::propose_sent;
            return NextMoveAction::send_chunks;
        case BucketPhase::sent:
            return heard && progress.activated ? NextMoveAction::propose_drop
                                               : NextMoveAction::send_activate;
        case BucketPhase::aborting:
            return heard && progress.forgotten ? NextMoveAction::propose_abort_done
                                               : NextMoveAction::send_forget;
        default:
            return NextMoveAction::none;
    }
}

MoveProgress move_report(const BucketState* st, MoveGen gen, MoveOutcome outcome) {
    MoveProgress r;
    r.gen = gen;
    const bool mine = st && st->gen == gen;
    r.received = mine && (st->phase == BucketPhase::received || st->phase == BucketPhase::active);
    r.activated = mine && st->phase == BucketPhase::active;
    r.forgotten = mine && st->phase == BucketPhase::dropped;
    r.refused = outcome == MoveOutcome::refused;
    return r;
}

void take_report(MoveProgress& p, const MoveProgress& r) {
    if (r.gen != p.gen) return;
    p.received |= r.received;
    p.activated |= r.activated;
    p.forgotten |= r.forgotten;
    p.refused |= r.refused;
}

}  // namespace dueq::shard
