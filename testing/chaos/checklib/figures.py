"""Figures that decide nothing: availability around each nemesis window, and op counts.

A client's "side" is the node it talks to (the op's `node`), so per-node ack rates show
which side of a partition kept refreshing.
"""
import bisect

HEALTHY_MS = 10000


class FirstOk:
    """The earliest ok time among ops invoked at or after a given time."""

    def __init__(self, ops):
        ops = sorted(ops, key=lambda op: op.t_inv)
        self.inv = [op.t_inv for op in ops]
        self.best = [None] * (len(ops) + 1)
        for i in range(len(ops) - 1, -1, -1):
            nxt = self.best[i + 1]
            self.best[i] = ops[i].t_done if nxt is None else min(nxt, ops[i].t_done)

    def after(self, t):
        b = self.best[bisect.bisect_left(self.inv, t)]
        return None if b is None else b - t


def _rate(times, a, b):
    """ok acks per second completed in [a, b]."""
    if b <= a:
        return None
    n = bisect.bisect_right(times, b) - bisect.bisect_left(times, a)
    return round(n * 1000.0 / (b - a), 2)


def availability(h):
    takes = FirstOk(op for op in h.takes if op.outcome == "ok" and op.tasks)
    puts = FirstOk(op for op in h.ops if op.f == "put" and op.outcome == "ok")
    acks = [op for op in h.ops if op.f == "ack" and op.outcome == "ok"]
    all_acks = sorted(op.t_done for op in acks)
    by_node = {}
    for op in acks:
        by_node.setdefault(op.node, []).append(op.t_done)
    for lst in by_node.values():
        lst.sort()
    nodes = sorted(set(h.meta.get("nodes") or []) | {n for n in by_node if n is not None})
    start = min((op.t_inv for op in h.ops), default=h.first_t)
    end = max((op.t_done for op in h.ops if op.t_done is not None), default=h.last_t)
    windows = sorted(h.windows, key=lambda w: w.start)
    # The healthy rate: the 10 s before the first fault (or the whole run without one).
    if windows:
        ha, hb = max(start, windows[0].start - HEALTHY_MS), windows[0].start
    else:
        ha, hb = start, end
    out = {"healthy": {"from": ha, "to": hb, "acks_per_s": _rate(all_acks, ha, hb),
                       "acks_per_s_by_node": {n: _rate(by_node.get(n, []), ha, hb)
                                              for n in nodes}},
           "windows": []}
    for w in windows:
        stop = w.end(h.last_t)
        out["windows"].append({
            "name": w.name, "start": w.start, "stop": w.stop, "majority": w.majority,
            "duration_ms": stop - w.start,
            "first_ok_take_ms": takes.after(w.start),
            "first_ok_put_ms": puts.after(w.start),
            "first_ok_take_after_stop_ms": takes.after(w.stop) if w.stop is not None else None,
            "acks_per_s": _rate(all_acks, w.start, stop),
            "acks_per_s_by_node": {n: _rate(by_node.get(n, []), w.start, stop)
                                   for n in nodes},
        })
    return out


def counts(h):
    by_f, errors = {}, {}
    for op in h.ops:
        o = op.outcome or "pending"
        d = by_f.setdefault(op.f, {"ok": 0, "fail": 0, "info": 0, "pending": 0})
        d[o] += 1
        if op.error:
            e = errors.setdefault(op.f, {})
            e[op.error] = e.get(op.error, 0) + 1
    return {"events": h.events, "by_type": h.types, "ops": by_f, "errors": errors,
            "ok_acks": by_f.get("ack", {}).get("ok", 0),
            "processes": len(h.by_process), "abandons": len(h.abandons),
            "nemesis_windows": len(h.windows),
            "span_s": round((h.last_t - h.first_t) / 1000.0, 1)}


def _ms(v):
    return "-" if v is None else f"{v}"


def render(avail, cnt):
    out = ["", "Counts: " + f"{cnt['events']} events over {cnt['span_s']} s, "
           f"{cnt['processes']} processes, {cnt['ok_acks']} ok acks, "
           f"{cnt['abandons']} abandons, {cnt['nemesis_windows']} nemesis windows"]
    for f, d in sorted(cnt["ops"].items()):
        errs = cnt["errors"].get(f, {})
        out.append(f"  {f:8} ok {d['ok']:>8}  fail {d['fail']:>7}  info {d['info']:>7}  "
                   f"pending {d['pending']:>3}" + ("   " + ", ".join(
                       f"{e} {n}" for e, n in sorted(errs.items())) if errs else ""))
    hl = avail["healthy"]
    out += ["", f"Availability (healthy: {_ms(hl['acks_per_s'])} acks/s, by node " +
            ", ".join(f"{n} {_ms(r)}" for n, r in hl["acks_per_s_by_node"].items()) + ")"]
    if avail["windows"]:
        out.append("  start          dur ms  nemesis               maj  1st take  1st put  "
                   "take after stop  acks/s  by node")
    for w in avail["windows"]:
        out.append(f"  {w['start']:<14} {w['duration_ms']:>6}  {w['name'][:20]:20}  "
                   f"{'yes' if w['majority'] else 'no ':3}  {_ms(w['first_ok_take_ms']):>8}  "
                   f"{_ms(w['first_ok_put_ms']):>7}  {_ms(w['first_ok_take_after_stop_ms']):>15}"
                   f"  {_ms(w['acks_per_s']):>6}  " + ", ".join(
                       f"{n} {_ms(r)}" for n, r in w["acks_per_s_by_node"].items()))
    return out
