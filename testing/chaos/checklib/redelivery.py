"""G2: a lease the workload abandoned is handed out again, in time.

For an abandon of lease L (key k), the lease must end by its deadline:
    take ok t + ttr            (the server stamps lease_until no later than it answers;
                                the take's invoke would be too early for a take that
                                waited up to its timeout_ms for a task)
    disconnect_t + grace_ms    (rod leases whose connection the workload closed)
whichever is first. The next ok take of k with a lease > L must then come within
slack_ms of available time after the deadline: time inside `majority: false` nemesis
windows does not count, since no node could serve then.

A late or missing redelivery is not held against the cluster (not_checkable) when the
history cannot show it: a put/delete replaced the task, the workers stopped taking, or
the history ended first. An indeterminate (info) take may also have leased the task to
nobody: it hides the task until that take's ttr runs out. We assume such a take, if
applied, was applied before its client gave up (its info `t`); the bound then moves to
the latest end of such a hidden lease.
"""
import bisect
import math

from .history import INF
from .leases import merge_intervals, writes_that_void
from .report import Check


class Available:
    """Walks time skipping the majority:false windows."""

    def __init__(self, h):
        self.w = merge_intervals((w.start, w.end(h.last_t)) for w in h.windows if not w.majority)
        self.ends = [e for _, e in self.w]

    def advance(self, t0, amount):
        """The time at which `amount` ms of available time has passed since t0."""
        cur, left = t0, amount
        for s, e in self.w[bisect.bisect_right(self.ends, t0):]:
            if s > cur:
                if s - cur >= left:
                    return cur + left
                left -= s - cur
            cur = max(cur, e)
        return cur + left


def _percentile(sorted_vals, p):
    """Nearest rank."""
    if not sorted_vals:
        return None
    return sorted_vals[max(0, math.ceil(p / 100.0 * len(sorted_vals)) - 1)]


def check_g2(h, slack_ms):
    c = Check("G2", "abandoned leases are handed out again")
    avail = Available(h)
    grace = h.grace_ms
    default_ttr = h.ttr_ms
    # Per key, leases sorted by id with the earliest ok time among the ids after each.
    redeliver = {}
    for key, lst in h.leases_by_key.items():
        suffix = [None] * (len(lst) + 1)
        for i in range(len(lst) - 1, -1, -1):
            nxt = suffix[i + 1]
            suffix[i] = lst[i] if nxt is None or lst[i].ok_t < nxt.ok_t else nxt
        redeliver[key] = ([L.lease for L in lst], suffix)
    last_take = max((op.t_done for op in h.takes if op.outcome == "ok"), default=None)
    # Indeterminate takes, by invoke time; one never completed may apply at any time.
    hidden = sorted((op for op in h.takes if op.outcome in (None, "info")),
                    key=lambda op: op.t_inv)
    hidden_inv = [op.t_inv for op in hidden]
    span = max((op.t_done - op.t_inv for op in hidden if op.t_done is not None), default=0)
    # a take that never completed (the history ended first) may apply at any later time
    never = min((op.t_inv for op in hidden if op.t_done is None), default=INF)
    replacers = Replacers(h)
    nc = {}
    delays = []
    for ab in h.abandons:
        c.checked += 1
        key, lid = ab["key"], ab["lease"]
        L = h.lease_of(key, lid)
        if L is None or L.key != key:
            nc["unknown_lease"] = nc.get("unknown_lease", 0) + 1
            continue
        ttr = L.take.ttr if L.take.ttr is not None else default_ttr
        deadline = L.ok_t + (ttr or 0)
        how = f"take ok {L.ok_t} + ttr {ttr}"
        if ab.get("rod") and ab.get("disconnect_t") is not None and \
                int(ab["disconnect_t"]) + grace < deadline:
            deadline = int(ab["disconnect_t"]) + grace
            how = f"disconnect {ab['disconnect_t']} + grace {grace}"
        bound = avail.advance(deadline, slack_ms)
        ids, suffix = redeliver[key]
        R = suffix[bisect.bisect_right(ids, lid)]
        # The delay figures cover the redeliveries judged here: on time, or late. One that
        # a put/delete or an indeterminate take excused below is not counted.
        if R is not None and R.ok_t <= bound:
            delays.append(R.ok_t - deadline)
            continue
        # Late or never: first see whether indeterminate takes may have hidden the task.
        ready = deadline
        lo = bisect.bisect_left(hidden_inv, L.take.t_inv - span)
        for op in hidden[lo:]:
            if ready == INF or op.t_inv > avail.advance(ready, slack_ms):
                break
            done = op.t_done if op.outcome == "info" else INF
            if done >= L.take.t_inv:
                t = op.ttr if op.ttr is not None else default_ttr
                ready = max(ready, done + (t or 0))
        ext = avail.advance(ready, slack_ms) if ready != INF else INF
        if never <= ext:
            ext = INF
        if R is not None and R.ok_t <= ext:
            nc["indeterminate_take"] = nc.get("indeterminate_take", 0) + 1
            continue
        reason = _not_checkable(h, key, L, ext, last_take, replacers)
        if reason:
            nc[reason] = nc.get(reason, 0) + 1
            continue
        lines = [ab["line"]] + L.take.lines
        if R is None:
            c.violation("never_redelivered", f"{key}: lease {lid} abandoned, deadline "
                        f"{deadline} ({how}); never handed out again though takes went on "
                        f"until {last_take} (bound {ext})", lines, key=key, lease=lid,
                        deadline=deadline, bound=ext)
        else:
            delays.append(R.ok_t - deadline)
            c.violation("late_redelivery", f"{key}: lease {lid} abandoned, deadline "
                        f"{deadline} ({how}); handed out again (lease {R.lease}) only at "
                        f"{R.ok_t}, {R.ok_t - deadline} ms after it (bound {ext})",
                        lines + R.take.lines, key=key, lease=lid, deadline=deadline,
                        bound=ext, delay_ms=R.ok_t - deadline)
    delays.sort()
    c.stats = {"abandons": c.checked, "not_checkable": nc,
               "redelivery_delay_ms": {"count": len(delays),
                                       "min": delays[0] if delays else None,
                                       "p50": _percentile(delays, 50),
                                       "p99": _percentile(delays, 99),
                                       "max": delays[-1] if delays else None},
               "slack_ms": slack_ms, "grace_ms": grace}
    return c


class Replacers:
    """Per key, the non-failed puts/deletes by invoke time, to ask: did one that may
    apply after a take (not completed before its invoke) get invoked by a bound?"""

    def __init__(self, h):
        self.h = h
        self.index = {}

    def any(self, key, after, bound):
        if key not in self.index:
            ws = sorted(writes_that_void(self.h, key), key=lambda w: w.t_inv)
            pref, best = [], -INF
            for w in ws:
                best = max(best, w.done)
                pref.append(best)
            self.index[key] = ([w.t_inv for w in ws], pref)
        inv, pref = self.index[key]
        i = bisect.bisect_left(inv, after)
        # invoked in [after, bound], or invoked before `after` but completed after it
        return (i < len(inv) and inv[i] <= bound) or (i > 0 and pref[i - 1] >= after)


def _not_checkable(h, key, L, bound, last_take, replacers):
    """Why a late/missing redelivery cannot be judged, or None when it can."""
    if bound == INF or bound > h.last_t:
        return "history_ends"
    if replacers.any(key, L.take.t_inv, bound):
        return "replaced"
    if last_take is None or last_take < bound:
        return "workers_stopped"
    return None
