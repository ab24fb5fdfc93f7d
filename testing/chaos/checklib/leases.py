"""G3 (at most one live lease per task) and G2 (an abandoned lease is handed out again).

All times are the harness machine's real clock (`t`), never the servers' lease_until:
a server whose clock jumped must not be able to vouch for itself.
"""
import bisect

from .history import INF, running_max
from .report import Check


def _bad_for_session(op):
    """An op whose outcome says the process's connection may have broken (or moved to
    another node on a redirect), which ends its session and, after the grace, every lease
    it took with release_on_disconnect."""
    return op.outcome in (None, "info") or (op.outcome == "fail" and op.error == "not_leader")


def merge_intervals(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _inside(merged, t):
    i = bisect.bisect_right(merged, [t, INF]) - 1
    return i >= 0 and merged[i][0] <= t <= merged[i][1]


def writes_that_void(h, key):
    """Non-failed puts and deletes of a key (each voids whatever lease the task had)."""
    return [op for op in h.by_key.get(key, ()) if op.f in ("put", "delete")
            and op.outcome != "fail"]


def _set_end(lease, t, why, lines):
    if t < lease.end_lb:
        lease.end_lb, lease.end_why, lease.end_lines = t, why, lines


def lease_ends(h, slew=0.0):
    """Fills in each lease's end_lb: a time until which the lease was certainly live,
    the earliest of every way it can end (see docs in check_g3). `slew`: the share of a
    lease the node's clock may cut short while it absorbs a step (src/node/clock.h)."""
    default_ttr = h.ttr_ms
    for lst in h.leases_by_key.values():
        for L in lst:
            ttr = L.take.ttr if L.take.ttr is not None else default_ttr
            # Promised from when the worker asked; a take without a known ttr is live
            # for no time we can vouch for.
            _set_end(L, L.take.t_inv + int(ttr * (1 - slew)) if ttr is not None
                     else L.take.t_inv, "ttr from the take's invoke", [])
    for op in h.ops:
        if op.f in ("ack", "release") and op.outcome != "fail":
            L = h.lease_of(op.key, op.lease)
            if L is not None and L.key == op.key:
                _set_end(L, op.t_inv, f"{op.f} invoked", op.lines)
    for ab in h.abandons:
        L = h.lease_of(ab["key"], ab["lease"])
        if L is not None and L.key == ab["key"] and ab.get("rod") and \
                ab.get("disconnect_t") is not None:
            _set_end(L, int(ab["disconnect_t"]), "connection closed (abandon)", [ab["line"]])
    # A put or delete that may apply after the take voids the lease: one that did not
    # fail and did not complete before the take was invoked. Sweep leases by take invoke
    # time, latest first, adding writes as their completion passes.
    for key, lst in h.leases_by_key.items():
        writes = sorted(writes_that_void(h, key), key=lambda op: op.done, reverse=True)
        i, best = 0, None
        for L in sorted(lst, key=lambda x: x.take.t_inv, reverse=True):
            while i < len(writes) and writes[i].done >= L.take.t_inv:
                if best is None or writes[i].t_inv < best.t_inv:
                    best = writes[i]
                i += 1
            if best is not None:
                _set_end(L, best.t_inv, f"{best.f} invoked", best.lines)
    # A rod lease also ends `grace` after its session ends, and the session may end as
    # soon as the connection breaks. The connection was alive when the process last got
    # an answer; it may have broken right after, if its next op failed in a way that
    # suggests a broken or moved connection. (Without the grace, like disconnect_t.)
    for plist in h.by_process.values():
        next_bad = [None] * (len(plist) + 1)
        for j in range(len(plist) - 1, -1, -1):
            next_bad[j] = j if _bad_for_session(plist[j]) else next_bad[j + 1]
        for j, take in enumerate(plist):
            if take.f != "take" or take.outcome != "ok" or not take.rod or not take.tasks:
                continue
            b = next_bad[j + 1]
            if b is None:
                continue
            alive = plist[b - 1].t_done
            for task in take.tasks:
                L = h.lease_of(task["key"], task["lease"])
                if L is not None and L.take is take:
                    _set_end(L, alive, f"session may have ended after {alive}: "
                             f"{plist[b].brief()}", plist[b].lines)


def check_g3(h, slew=0.0):
    """For two leases A < B on one key, B's take ok before A.end_lb means B was certainly
    granted while A was certainly live. Comparing B with the running maximum of end_lb
    over the leases before it finds every such pair's worst A in one sorted pass."""
    c = Check("G3", "no two live leases on one task")
    for a, b in h.duplicate_leases:
        scope = h.lease_scope(b.key)
        c.violation("duplicate_lease", f"lease {b.lease} handed out twice"
                    + (f" by shard {scope}" if scope else "") + f": {a.key} and {b.key}",
                    a.take.lines + b.take.lines, lease=b.lease)
    lease_ends(h, slew)
    exempt = merge_intervals((w.start, w.end(h.last_t)) for w in h.windows if w.g3_exempt)
    excluded = 0
    for key, lst in h.leases_by_key.items():
        top = None
        for B in lst:
            c.checked += 1
            if top is not None and B.ok_t < top.end_lb:
                if _inside(exempt, B.ok_t):
                    excluded += 1
                else:
                    c.violation("overlapping_leases",
                                f"{key}: lease {top.lease} certainly live until {top.end_lb} "
                                f"({top.end_why}), but lease {B.lease} was granted by {B.ok_t} "
                                f"({top.end_lb - B.ok_t} ms of overlap)",
                                top.take.lines + top.end_lines + B.take.lines, key=key,
                                leases=[top.lease, B.lease], overlap_ms=top.end_lb - B.ok_t)
            if top is None or B.end_lb > top.end_lb:
                top = B
    _stale_acks(h, c)
    c.stats = {"leases": c.checked, "excluded_g3_exempt": excluded}
    return c


def _stale_acks(h, c):
    """An ok ack/release on lease A is impossible once, before it was invoked, (a) an ok
    take granted a lease B > A on the key (B is later in the log, so A is no longer the
    task's lease), or (b) a put/delete invoked after A's take completed had completed ok
    (it voided A). Both are in the log before the ack, so the ack had to be refused."""
    grants = {}
    for key, lst in h.leases_by_key.items():
        by_ok = sorted(lst, key=lambda x: x.ok_t)
        grants[key] = ([L.ok_t for L in by_ok], running_max(by_ok, lambda L: L.lease))
    voids = {}
    for op in h.ops:
        if op.f not in ("ack", "release") or op.outcome != "ok":
            continue
        key = op.key
        if key in grants:
            times, pref = grants[key]
            i = bisect.bisect_left(times, op.t_inv)
            if i and pref[i - 1].lease > op.lease:
                B = pref[i - 1]
                c.violation("stale_lease_accepted", f"{key}: {op.brief()} accepted, but "
                            f"lease {B.lease} was granted at {B.ok_t}, before it",
                            op.lines + B.take.lines, key=key, lease=op.lease)
                continue
        A = h.lease_of(op.key, op.lease)
        if A is None or A.key != key:
            continue
        if key not in voids:
            ws = sorted((w for w in writes_that_void(h, key) if w.outcome == "ok"),
                        key=lambda w: w.t_done)
            voids[key] = ([w.t_done for w in ws], running_max(ws, lambda w: w.t_inv))
        times, pref = voids[key]
        i = bisect.bisect_left(times, op.t_inv)
        if i and pref[i - 1].t_inv > A.ok_t:
            w = pref[i - 1]
            c.violation("stale_lease_accepted", f"{key}: {op.brief()} accepted, but "
                        f"{w.brief()} had voided lease {A.lease} (taken at {A.ok_t})",
                        op.lines + w.lines + A.take.lines, key=key, lease=op.lease)
