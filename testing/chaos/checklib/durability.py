"""G1 (nothing lost, nothing resurrected, failed ops not applied) and replica agreement,
both judged on the `final` reads the harness makes after healing the cluster.

Why G1 can be decided from the history alone: every put and ack carries a unique value,
so a final value names the one write that produced it. The cluster is linearizable
(one Raft log), so an op invoked after another op completed is ordered after it in the
log. A write W is therefore *definitely superseded* when another write or delete on the
key was ok and was invoked after W completed: whatever W did, that later op undid it. An
indeterminate (info) op never completes, so nothing definitely supersedes it.

The same rule judges every task a `take` handed out during the run, not only the final
reads: a take is a log entry, so the value it hands out must come from a write that no
ok write or delete definitely superseded *before the take was invoked*. This is what
catches an acknowledged write that was lost and later overwritten (the final state then
looks fine).
"""
import bisect

from .history import WRITES, running_max
from .report import Check


class KeyOps:
    """What G1 needs to know about one key's writes and deletes."""
    __slots__ = ("last_ok_write", "last_ok_delete", "latest_delete")

    def __init__(self, ops):
        self.last_ok_write = None     # the ok put/ack invoked last
        self.last_ok_delete = None    # the ok delete invoked last
        self.latest_delete = None     # the delete, not failed, that completed last (info: never)
        for op in ops:
            if op.f in WRITES and op.outcome == "ok":
                if self.last_ok_write is None or op.t_inv > self.last_ok_write.t_inv:
                    self.last_ok_write = op
            elif op.f == "delete" and op.outcome != "fail":
                if op.outcome == "ok" and (self.last_ok_delete is None
                                           or op.t_inv > self.last_ok_delete.t_inv):
                    self.last_ok_delete = op
                if self.latest_delete is None or op.done > self.latest_delete.done:
                    self.latest_delete = op


class Supersessions:
    """Per key, the ok writes and deletes ordered by completion, with the running latest
    invoke: answers "which ok op, completed before T, was invoked last?" in O(log n)."""

    def __init__(self, h):
        self.done, self.latest = {}, {}
        for key, ops in h.by_key.items():
            oks = sorted((op for op in ops if op.outcome == "ok"
                          and (op.f in WRITES or op.f == "delete")), key=lambda o: o.t_done)
            self.done[key] = [op.t_done for op in oks]
            self.latest[key] = running_max(oks, lambda op: op.t_inv)

    def last_before(self, key, t):
        i = bisect.bisect_left(self.done.get(key, ()), t)
        return self.latest[key][i - 1] if i > 0 else None


def check_takes(c, h, by_value):
    """G1 on every task handed out by an ok take (see the module docstring)."""
    sup_index = Supersessions(h)
    seen = 0
    for take in h.takes:
        if take.outcome != "ok":
            continue
        for task in take.tasks or ():
            seen += 1
            key, v = task.get("key"), task.get("value")
            where = f"{key} handed out by {take.brief()}"
            w = by_value.get(v)
            if w is None or w.key != key:
                c.violation("unknown_value", f"{where}: value {v!r} was never written to this "
                            "key", take.lines, key=key, value=v)
                continue
            if w.outcome == "fail":
                c.violation("failed_op_applied", f"{where}: value {v!r} comes from "
                            f"{w.brief()}, which failed", take.lines + w.lines, key=key, value=v)
                continue
            sup = sup_index.last_before(key, take.t_inv)
            if sup is None or sup is w or sup.t_inv <= w.done:
                continue
            kind = "lost" if sup.f in WRITES else "resurrected"
            c.violation(kind, f"{where}: value {v!r} of {w.brief()}, but {sup.brief()} had "
                        "superseded it before the take was invoked",
                        take.lines + w.lines + sup.lines, key=key, value=v)
    return seen


def check_g1(h, takes=True):
    """`takes=False`: judge only the final reads (autonomous mode: a cut-off node hands out
    its own view, which the majority may have superseded; that is G4, not a loss)."""
    c = Check("G1", "nothing lost, nothing resurrected, failed ops not applied")
    by_value = {}
    dup = 0
    for op in h.ops:
        if op.f in WRITES:
            if op.value in by_value:
                dup += 1      # values are meant to be unique; the first write keeps the name
            else:
                by_value[op.value] = op
    if dup:
        c.notes.append(f"{dup} writes reused a value already written; the first one is used")
    taken = check_takes(c, h, by_value) if takes else 0
    c.checked += taken
    if not h.finals:
        c.notes.append("no final reads in the history: nothing to judge"
                       + (" (the final read failed, see replicas)" if h.final_failed else ""))
        c.stats = {"tasks_handed_out": taken}
        return c
    keyops = {}
    present = absent = from_info = 0
    for (node, key), ev in sorted(h.finals.items()):
        c.checked += 1
        k = keyops.get(key)
        if k is None:
            k = keyops[key] = KeyOps(w for w in h.by_key.get(key, ()) if w.f != "get")
        where = f"{key} on {node}"
        if ev["present"]:
            present += 1
            w = by_value.get(ev.get("value"))
            if _judge_present(c, ev, where, key, k, w) and w.outcome in (None, "info"):
                from_info += 1
        else:
            absent += 1
            w = k.last_ok_write
            d = k.latest_delete
            # Absent is right when no write was ever ok, or when some delete is not
            # definitely superseded by an ok write (the last ok write is the one to test).
            if w is not None and (d is None or w.t_inv > d.done):
                why = (f"no delete could have removed it" if d is None else
                       f"every delete was over before it was invoked (last: {d.brief()})")
                c.violation("lost", f"{where}: absent, but the ok write {w.brief()} "
                            f"should have survived; {why}",
                            [ev["line"]] + w.lines + (d.lines if d else []),
                            key=key, node=node, expected=w.value)
    c.stats = {"tasks_handed_out": taken, "final_present": present, "final_absent": absent,
               "final_value_from_indeterminate_write": from_info}
    return c


def _judge_present(c, ev, where, key, k, w):
    """Judges a present final value; True when it is a value the key may hold."""
    v = ev.get("value")
    line = ev["line"]
    if w is None or w.key != key:
        other = f" (it was written to {w.key})" if w is not None else ""
        c.violation("unknown_value", f"{where}: value {v!r} was never written to this "
                    f"key{other}", [line] + (w.lines if w else []), key=key, node=ev["node"],
                    value=v)
        return False
    if w.outcome == "fail":
        c.violation("failed_op_applied", f"{where}: value {v!r} comes from {w.brief()}, "
                    f"which failed", [line] + w.lines, key=key, node=ev["node"], value=v)
        return False
    # The latest-invoked ok op that was invoked after w completed names what happened.
    sup = None
    for cand in (k.last_ok_write, k.last_ok_delete):
        if cand is not None and cand is not w and cand.t_inv > w.done:
            if sup is None or cand.t_inv > sup.t_inv:
                sup = cand
    if sup is None:
        return True
    if sup.f in WRITES:
        c.violation("lost", f"{where}: value {v!r} of {w.brief()} is final, but the later "
                    f"ok write {sup.brief()} should have survived",
                    [line] + w.lines + sup.lines, key=key, node=ev["node"], value=v,
                    expected=sup.value)
    else:
        c.violation("resurrected", f"{where}: value {v!r} of {w.brief()} is final, but "
                    f"{sup.brief()} deleted the key after it",
                    [line] + w.lines + sup.lines, key=key, node=ev["node"], value=v)
    return False


def _state(ev):
    if not ev["present"]:
        return ("absent",)
    return tuple(ev.get(f) for f in ("value", "time", "status", "version"))


def _replica_groups(h):
    """Which nodes must agree: every node (every member of the last membership, when the
    run changed it), or, when the final reads name shards (a sharded run, where the
    workload's own nodes are proxies), each shard's nodes among themselves."""
    reads = list(h.final_nodes.values()) + list(h.finals.values())
    if not any(ev.get("shard") for ev in reads + h.final_failed):
        if h.members is not None:
            return {"": sorted(h.members)}
        return {"": sorted(set(h.meta.get("nodes") or []) | {ev["node"] for ev in reads})}
    groups = {}
    for ev in reads:
        groups.setdefault(ev.get("shard", ""), set()).add(ev["node"])
    return {s: sorted(nodes) for s, nodes in groups.items()}


def check_replicas(h):
    c = Check("replicas", "replica agreement on applied index and every key")
    for ev in h.final_failed:
        c.violation("final_failed", f"the final read failed: {ev.get('reason', '?')}"
                    + (f" (shard {ev['shard']})" if ev.get("shard") else ""), [ev["line"]])
    if not h.finals and not h.final_nodes:
        c.notes.append("no final reads in the history: nothing to compare")
        return c
    groups = _replica_groups(h)
    for shard, nodes in sorted(groups.items()):
        _check_applied(c, h, shard, nodes)
    reads = {}
    for (_, k), ev in h.finals.items():
        reads.setdefault(k, []).append(ev)
    keys = sorted(set(h.meta.get("keys") or []) | set(reads))
    for key in keys:
        c.checked += 1
        shards = {ev.get("shard", "") for ev in reads.get(key, ())}
        if len(shards) > 1:
            c.violation("two_shards", f"{key}: read as a key of shards {sorted(shards)}",
                        [ev["line"] for ev in reads[key]], key=key)
            continue
        shard = shards.pop() if shards else ("" if "" in groups else None)
        if shard is None:
            c.violation("missing", f"{key}: no final read on any shard", [], key=key)
            continue
        states = {}
        for n in groups[shard]:
            ev = h.finals.get((n, key))
            if ev is None:
                c.violation("missing", f"{key}: no final read on {n}",
                            [e["line"] for e in reads.get(key, ())], key=key, node=n)
            else:
                states[n] = _state(ev)
        if len(set(states.values())) > 1:
            c.violation("state", f"{key}: " + "; ".join(
                f"{n} {'/'.join(str(x) for x in s)}" for n, s in sorted(states.items())),
                [h.finals[(n, key)]["line"] for n in states], key=key)
    c.stats = {"nodes": sum(len(n) for n in groups.values()), "keys": len(keys)}
    if len(groups) > 1:
        c.stats["shards"] = len(groups)
    return c


def _check_applied(c, h, shard, nodes):
    where = f"shard {shard}: " if shard else ""
    applied = {}
    for n in nodes:
        ev = h.final_nodes.get(n)
        if ev is None:
            c.violation("missing", f"{where}no final_node for {n}", [], node=n)
        else:
            applied[n] = ev.get("applied_index")
    if len(set(applied.values())) > 1:
        c.violation("applied_index", f"{where}applied_index differs: " +
                    ", ".join(f"{n}={a}" for n, a in sorted(applied.items())),
                    [h.final_nodes[n]["line"] for n in applied], applied=applied)
