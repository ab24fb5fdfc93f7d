"""Leader reads: a get with consistency "leader" that answered ok returned the latest write
acknowledged before it began, or a later one (docs/protocol.md).

A read that returned value x of write w is stale when another write of the key (a put, an
ack or a delete that answered ok) began after w had been acknowledged and was itself
acknowledged before the read began: x had certainly been overwritten by then. A write that
never answered (info) may apply at any later time, so a value it wrote is never stale.
Times are the harness machine's real clock (`t`).
"""
import bisect

from .history import running_max
from .report import Check

OVERWRITES = ("put", "ack", "delete")   # ops after which the old value is gone


def check_leader_reads(h):
    c = Check("leader_reads", "leader reads: never older than the latest acknowledged write")
    for key, ops in h.by_key.items():
        reads = [op for op in ops if op.f == "get" and op.consistency == "leader"
                 and op.outcome == "ok" and op.value is not None]
        if not reads:
            continue
        writer_of = {op.value: op for op in ops if op.f in ("put", "ack") and op.value}
        acked = sorted((op for op in ops if op.f in OVERWRITES and op.outcome == "ok"),
                       key=lambda op: op.t_done)
        done_times = [op.t_done for op in acked]
        latest_start = running_max(acked, key=lambda op: op.t_inv)
        for r in reads:
            c.checked += 1
            w = writer_of.get(r.value)
            if w is None:
                c.violation("value_never_written",
                            f"{key}: the leader read returned {r.value!r}, which no write wrote",
                            [r.line_inv, r.line_done])
                continue
            i = bisect.bisect_left(done_times, r.t_inv) - 1  # acked strictly before the read
            if i < 0:
                continue
            newer = latest_start[i]
            if newer is not w and newer.t_inv > w.done:
                c.violation("stale",
                            f"{key}: the leader read returned {r.value!r} (written at line "
                            f"{w.line_inv}), but the {newer.f} of line {newer.line_inv} had "
                            f"overwritten it, acknowledged {r.t_inv - newer.t_done} ms before "
                            f"the read began",
                            [w.line_inv, w.line_done, newer.line_inv, newer.line_done,
                             r.line_inv, r.line_done])
    c.stats["leader_reads"] = c.checked
    return c
