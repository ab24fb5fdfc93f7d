"""Reads a chaos history (JSON lines) into indexed records.

The file is read once. Every event keeps its 1-based line number, so a report can quote
the exact lines that prove a violation (report.fetch_lines reads just those back, which
keeps a million-event history from living in memory twice).

Pairing follows the format: a process has at most one op outstanding, and the completion
of an op is the next ok/fail/info event of the same process after its invoke. File order
is trusted for that pairing (the harness sorts by `t` stably, so each process keeps its
own order); all times come from `t`.
"""
import json

INF = float("inf")

OUTCOMES = ("ok", "fail", "info")
WRITES = ("put", "ack")          # ops that set a task's value


class HistoryError(Exception):
    """The input cannot be read as a history (exit status 2)."""


class Op:
    """One invoke and its completion (outcome None: the history ended first)."""
    __slots__ = ("process", "f", "node", "key", "value", "time", "lease", "ttr", "rod",
                 "consistency", "t_inv", "t_done", "outcome", "error", "tasks", "version", "line_inv",
                 "line_done", "pos")

    def __init__(self, ev, line):
        self.process = ev["process"]
        self.f = ev["f"]
        self.node = ev.get("node")
        self.key = ev.get("key")
        self.value = ev.get("value")
        self.time = ev.get("time")
        self.lease = ev.get("lease")
        self.ttr = ev.get("ttr")
        self.rod = ev.get("rod")
        self.consistency = ev.get("consistency", "local")
        self.t_inv = ev["t"]
        self.t_done = None
        self.outcome = None
        self.error = None
        self.tasks = None
        self.version = None
        self.line_inv = line
        self.line_done = None
        self.pos = 0             # index in its process's op list

    @property
    def done(self):
        """When the op certainly took effect or certainly did not: its ok/fail time. An
        indeterminate op (info, or no completion) may apply at any later time: +inf."""
        return self.t_done if self.outcome in ("ok", "fail") else INF

    @property
    def lines(self):
        return [x for x in (self.line_inv, self.line_done) if x is not None]

    def brief(self):
        s = f"{self.f}"
        if self.key is not None:
            s += f" {self.key}"
        if self.value is not None:
            s += f" value={self.value}"
        if self.lease is not None:
            s += f" lease={self.lease}"
        s += f" by process {self.process} invoked {self.t_inv}"
        if self.outcome is None:
            return s + ", never completed"
        return s + f", {self.outcome} at {self.t_done}" + (f" ({self.error})" if self.error else "")


class Lease:
    """A lease known from an ok take: one task of its `tasks` list."""
    __slots__ = ("key", "lease", "take", "value", "lease_until", "end_lb", "end_why",
                 "end_lines")

    def __init__(self, key, lease, take, task):
        self.key = key
        self.lease = lease
        self.take = take
        self.value = task.get("value")
        self.lease_until = task.get("lease_until")
        self.end_lb = INF        # filled in by leases.g3: certainly live until then
        self.end_why = ""
        self.end_lines = []

    @property
    def ok_t(self):
        return self.take.t_done


class Window:
    """A nemesis between its start and its stop (stop None: still active at the end)."""
    __slots__ = ("name", "start", "stop", "majority", "g3_exempt", "lines")

    def __init__(self, ev, line):
        self.name = ev.get("name", "?")
        self.start = ev["t"]
        self.stop = None
        self.majority = bool(ev.get("majority", True))
        self.g3_exempt = bool(ev.get("g3_exempt", False))
        self.lines = [line]

    def end(self, last_t):
        return self.stop if self.stop is not None else last_t


class History:
    def __init__(self, path):
        self.path = path
        self.meta = None
        self.ops = []
        self.by_key = {}         # key -> ops naming that key, in invoke order
        self.by_process = {}     # process -> its ops, in order
        self.takes = []          # every take op (any outcome)
        self.leases_by_key = {}  # key -> [Lease] from ok takes
        self.duplicate_leases = []   # (first Lease, second Lease) sharing a lease id
        self.abandons = []       # dicts with "line"
        self.windows = []
        self.finals = {}         # (node, key) -> final event (with "line")
        self.final_nodes = {}    # node -> final_node event (with "line")
        self.members = None      # the latest "members" line's nodes, if any
        self.final_failed = []
        self.first_t = None
        self.last_t = None
        self.events = 0
        self.types = {}
        self.moves = []
        self.warnings = {}       # kind -> [count, [first few "line N: text"]]

    def warn(self, kind, line, text):
        w = self.warnings.setdefault(kind, [0, []])
        w[0] += 1
        if len(w[1]) < 5:
            w[1].append(f"line {line}: {text}")

    def lease_scope(self, key):
        """Where a key's lease ids are unique: its shard ("" when not sharded), or the key
        itself when buckets moved between shards during the run (a moved task keeps its
        lease id, and its new shard numbers later leases above it, but another key of that
        shard may have had the same id)."""
        if (self.meta or {}).get("lease_scope") == "key":
            return "key:" + key
        return ((self.meta or {}).get("key_shards") or {}).get(key, "")

    def lease_of(self, key, lease):
        """The Lease with this id in the key's shard, if an ok take handed it out."""
        return self.lease_by_id.get((self.lease_scope(key), lease))

    @property
    def grace_ms(self):
        return int((self.meta or {}).get("grace_ms") or 0)

    @property
    def ttr_ms(self):
        return (self.meta or {}).get("ttr_ms")


def _need(ev, field, kinds, line, what):
    v = ev.get(field)
    # bool is an int in Python; no field of the format is a bool where a number is meant
    if v is None or not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        raise HistoryError(f"line {line}: {what} needs `{field}` "
                           f"({'/'.join(k.__name__ for k in kinds)}), got {v!r}")
    return v


def load(path):
    h = History(path)
    outstanding = {}             # process -> Op awaiting its completion
    open_windows = []
    try:
        f = open(path, "r", encoding="utf-8", errors="strict")
    except OSError as e:
        raise HistoryError(f"cannot open {path}: {e}")
    with f:
        try:
            _read(h, f, outstanding, open_windows)
        except (OSError, UnicodeDecodeError) as e:
            raise HistoryError(f"cannot read {path}: {e}")
    if h.events == 0:
        raise HistoryError("empty history")
    if h.meta is None:
        raise HistoryError("no meta line: grace_ms and ttr_ms are needed for the checks")
    _build_leases(h)
    return h


def _read(h, f, outstanding, open_windows):
    bad = None                   # (line, error) of a line that is not JSON
    for n, text in enumerate(f, 1):
        if not text.strip():
            continue
        if bad is not None:
            raise HistoryError(f"line {bad[0]}: not JSON: {bad[1]}")
        try:
            ev = json.loads(text)
        except ValueError as e:
            # A workload killed mid-write can leave a cut last line (no newline); anything
            # else is not a history we can judge.
            if text.endswith("\n"):
                raise HistoryError(f"line {n}: not JSON: {e}")
            bad = (n, e)
            continue
        if not isinstance(ev, dict):
            raise HistoryError(f"line {n}: not a JSON object")
        t = _need(ev, "t", (int, float), n, "every event")
        ev["t"] = t = int(t)
        typ = _need(ev, "type", (str,), n, "every event")
        h.events += 1
        h.types[typ] = h.types.get(typ, 0) + 1
        if h.first_t is None or t < h.first_t:
            h.first_t = t
        if h.last_t is None or t > h.last_t:
            h.last_t = t

        if typ == "invoke":
            p = _need(ev, "process", (int,), n, "invoke")
            _need(ev, "f", (str,), n, "invoke")
            op = Op(ev, n)
            if op.f in ("put", "ack", "get", "delete", "release"):
                _need(ev, "key", (str,), n, op.f)
            if op.f in ("put", "ack"):
                _need(ev, "value", (str,), n, op.f)
            if op.f in ("ack", "release"):
                _need(ev, "lease", (int,), n, op.f)
            prev = outstanding.get(p)
            if prev is not None:
                h.warn("invoke_while_outstanding", n, f"process {p} invoked again; its op of "
                       f"line {prev.line_inv} is left without completion")
            outstanding[p] = op
            plist = h.by_process.setdefault(p, [])
            op.pos = len(plist)
            plist.append(op)
            h.ops.append(op)
            if op.key is not None:
                h.by_key.setdefault(op.key, []).append(op)
            if op.f == "take":
                h.takes.append(op)
        elif typ in OUTCOMES:
            p = _need(ev, "process", (int,), n, typ)
            op = outstanding.pop(p, None)
            if op is None:
                h.warn("completion_without_invoke", n, f"process {p} had nothing outstanding")
                continue
            if ev.get("f") is not None and ev.get("f") != op.f:
                h.warn("completion_f_mismatch", n, f"{ev.get('f')} completes {op.f} of "
                       f"line {op.line_inv}")
            op.outcome = typ
            op.t_done = t
            op.line_done = n
            op.error = ev.get("error")
            if typ == "ok":
                op.version = ev.get("version")
                if op.f == "take":
                    tasks = ev.get("tasks")
                    if not isinstance(tasks, list):
                        raise HistoryError(f"line {n}: ok take needs a `tasks` list")
                    for task in tasks:
                        if not isinstance(task, dict):
                            raise HistoryError(f"line {n}: a task is not an object")
                        _need(task, "key", (str,), n, "a taken task")
                        _need(task, "lease", (int,), n, "a taken task")
                    op.tasks = tasks
                elif op.f == "get":
                    op.value = ev.get("value")
        elif typ == "abandon":
            _need(ev, "key", (str,), n, "abandon")
            _need(ev, "lease", (int,), n, "abandon")
            ev["line"] = n
            h.abandons.append(ev)
        elif typ == "nemesis":
            action = ev.get("action")
            if action == "start":
                w = Window(ev, n)
                h.windows.append(w)
                open_windows.append(w)
            elif action == "stop":
                # A stop names its start's time in `started` (chaos.py); else the oldest
                # open window of that name.
                name = ev.get("name", "?")
                cands = [w for w in open_windows if w.name == name]
                match = [w for w in cands if w.start == ev.get("started")] or cands
                if not match:
                    h.warn("nemesis_stop_without_start", n, name)
                    continue
                w = match[0]
                open_windows.remove(w)
                w.stop = t
                w.lines.append(n)
                w.g3_exempt = w.g3_exempt or bool(ev.get("g3_exempt", False))
            else:
                raise HistoryError(f"line {n}: nemesis action must be start or stop")
        elif typ == "final":
            node = _need(ev, "node", (str,), n, "final")
            key = _need(ev, "key", (str,), n, "final")
            _need(ev, "present", (bool,), n, "final")
            ev["line"] = n
            if (node, key) in h.finals:
                h.warn("final_twice", n, f"{node} {key} read twice; the later read counts")
            h.finals[(node, key)] = ev
        elif typ == "final_node":
            node = _need(ev, "node", (str,), n, "final_node")
            ev["line"] = n
            h.final_nodes[node] = ev
        elif typ == "final_failed":
            ev["line"] = n
            h.final_failed.append(ev)
        elif typ == "members":
            # The membership changed (the replace and remove-leader scenarios): the final
            # reads must come from the members of the latest such line.
            nodes = _need(ev, "nodes", (list,), n, "members")
            h.members = [str(x) for x in nodes]
        elif typ == "move":
            # A bucket moved between shards (chaos.py --moves): for the report; the checks
            # judge each key wherever the final reads found it.
            h.moves.append(ev)
        elif typ == "meta":
            if h.meta is None:
                ev["line"] = n
                h.meta = ev
            else:
                h.warn("meta_twice", n, "a second meta line, ignored")
        else:
            h.warn("unknown_type", n, f"type {typ!r} ignored")
    if bad is not None:
        h.warn("truncated_last_line", bad[0], "not JSON, ignored")


def _build_leases(h):
    """Every task of every ok take is a lease. Lease ids come from one store-wide counter
    (one per shard: a sharded run's meta line names each key's shard), so an id seen twice
    in one shard (on one key or two) is itself a violation (G3); with moves, on one key."""
    by_id = {}
    for take in h.takes:
        if take.outcome != "ok":
            continue
        for task in take.tasks:
            lease = Lease(task["key"], task["lease"], take, task)
            prev = by_id.get((h.lease_scope(lease.key), lease.lease))
            if prev is not None:
                h.duplicate_leases.append((prev, lease))
                continue
            by_id[(h.lease_scope(lease.key), lease.lease)] = lease
            h.leases_by_key.setdefault(lease.key, []).append(lease)
    h.lease_by_id = by_id
    for lst in h.leases_by_key.values():
        lst.sort(key=lambda x: x.lease)


def running_max(items, key):
    """out[i] is the item of items[:i + 1] with the largest key(item) (the first on ties):
    with items sorted by time, "which one, among those before T, is the largest" becomes
    one bisect."""
    out, best = [], None
    for item in items:
        if best is None or key(item) > key(best):
            best = item
        out.append(best)
    return out

