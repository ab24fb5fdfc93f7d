"""The dueq client: every op of docs/protocol.md over one connection at a time, pipelined
(any number of threads may call at once), with the protocol's redirects, back-off and
outcome classes (§4, §6) and session resumption (§5)."""
import threading
import time

from .connection import Connection
from .errors import Error, UNKNOWN
from .task import Task, Taken

# What a client may resend by itself after a broken connection (docs/protocol.md §6).
SAFE_TO_RESEND = frozenset({"ping", "hello", "get", "stats", "status", "declare", "list",
                            "members", "shards"})


class Client:
    """Client(seeds, token=None, ssl_context=None, call_timeout=5.0, ...).

    `seeds`: "host:port" strings of the cluster's nodes; the client finds the leader from
    any of them. `token`: the nodes' auth_token, sent in hello on every connection.
    `ssl_context`: an ssl.SSLContext for nodes with [tls] clients on."""

    def __init__(self, seeds, token=None, ssl_context=None, call_timeout=5.0,
                 connect_timeout=2.0, idle_ping=30.0, max_redirects=5):
        if isinstance(seeds, str):
            seeds = [s for s in seeds.split(",") if s]
        if not seeds:
            raise ValueError("no seeds")
        self.seeds = list(seeds)
        self.token = token
        self.ssl_context = ssl_context
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self.max_redirects = max_redirects
        self._lock = threading.Lock()
        self._conn = None
        self._retiring = []      # connections left for the leader, closed once drained
        self._hint = None        # the leader a not_leader named
        self._next_seed = 0
        self._session = None     # the session hello last gave, resumed on any node
        self._last_call = time.monotonic()
        self._stop = threading.Event()
        if idle_ping:
            threading.Thread(target=self._pinger, args=(idle_ping,), daemon=True,
                             name="dueq-idle-ping").start()

    # ---- the generic call ----
    def call(self, op, fields=None, timeout=None):
        """Sends {op, **fields}; returns the answer's result fields (a dict), or raises
        Error. A blocking take's deadline is the call timeout plus its timeout_ms."""
        fields = {k: v for k, v in (fields or {}).items() if v is not None}
        budget = self.call_timeout if timeout is None else timeout
        if op == "take":
            budget += fields.get("timeout_ms", 0) / 1000.0
        deadline = time.monotonic() + budget
        backoff, redirects = 0.05, 0
        request = {"op": op, **fields}
        while True:
            self._last_call = time.monotonic()
            conn = self._connection(deadline)
            heard = conn.heard
            p = conn.send(request)
            if not p.event.wait(max(0.0, deadline - time.monotonic())):
                # Silent since the write (a frozen node, a dead link): the next call dials
                # another node.
                if conn.heard == heard:
                    self._drop(conn)
                raise Error("timeout", f"no answer from {conn.address} in time; the outcome "
                            "is unknown", outcome=UNKNOWN)
            if p.error is not None:
                self._drop(conn)
                if (p.written and op not in SAFE_TO_RESEND) or time.monotonic() >= deadline:
                    raise p.error
                time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, 1.0)
                continue
            frame = p.frame
            if frame.get("ok"):
                return {k: v for k, v in frame.items() if k not in ("id", "ok")}
            err = frame.get("error") or {}
            code, leader = err.get("code", "internal"), err.get("leader") or ""
            # Both mean "not applied, go elsewhere": to the leader named (at most
            # max_redirects times: two nodes could name each other), or, when none is
            # named (an election, a cut-off node), to the next seed until the deadline.
            named = bool(leader) and leader != conn.address
            # A cut-off node's no_quorum with no other seed to try is the answer.
            stuck = code == "no_quorum" and not named and len(self.seeds) < 2
            if (code in ("not_leader", "no_quorum") and self.max_redirects > 0 and not stuck
                    and (not named or redirects < self.max_redirects)):
                if named:
                    redirects += 1
                    self._redirect(conn, leader)
                else:
                    time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                    backoff = min(backoff * 2, 1.0)
                    self._drop(conn)
                if time.monotonic() < deadline:
                    continue
            # The key's bucket is moving between shards (not applied): the same node again,
            # backing off, until the deadline.
            if code == "moving" and self.max_redirects > 0 and \
                    time.monotonic() + backoff < deadline:
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            raise Error(code, err.get("message", ""), leader)

    # ---- connections ----
    def _connection(self, deadline):
        with self._lock:
            self._retiring = [c for c in self._retiring if not self._close_if_idle(c)]
            if self._conn is not None and not self._conn.closed:
                return self._conn
            last = None
            moved = False
            while True:
                address = self._hint or self.seeds[self._next_seed % len(self.seeds)]
                if self._hint:
                    self._hint = None
                else:
                    self._next_seed += 1
                try:
                    conn = Connection(address, min(self.connect_timeout,
                                                   max(0.05, deadline - time.monotonic())),
                                      self.ssl_context)
                    resumed, leader = self._hello(conn)
                    # The leader keeps sessions (§5): one resumed on a follower would run
                    # out there while its tasks wait on the leader. Once per connection.
                    if resumed and leader and leader != address and not moved:
                        moved = True
                        conn.close()
                        self._hint = leader
                        continue
                    self._conn = conn
                    return conn
                except (OSError, Error) as e:
                    last = e
                if time.monotonic() >= deadline:
                    raise Error("unavailable", f"no node reachable ({last})",
                                outcome="not_applied")
                if self._next_seed % len(self.seeds) == 0:
                    time.sleep(0.05)

    def _hello(self, conn):
        # Always: it is how the session is learnt, to be resumed on the next node (a new
        # leader knows the sessions that hold leases).
        request = {"op": "hello"}
        if self.token:
            request["token"] = self.token
        if self._session is not None:
            request["session"] = self._session
        p = conn.send(request)
        if not p.event.wait(self.connect_timeout) or p.error is not None:
            conn.close()
            raise Error("unavailable", f"hello to {conn.address} got no answer")
        if not p.frame.get("ok"):
            conn.close()
            err = p.frame.get("error") or {}
            raise Error(err.get("code", "internal"), err.get("message", ""))
        resumed = self._session is not None and p.frame.get("session") == self._session
        self._session = p.frame.get("session")
        return resumed, p.frame.get("leader")

    @staticmethod
    def _close_if_idle(conn):
        if conn.closed or conn.idle():
            conn.close()
            return True
        return False

    def _redirect(self, conn, leader):
        with self._lock:
            if self._conn is conn:
                self._retiring.append(conn)  # its other requests are still answered
                self._conn = None
            self._hint = leader

    def _drop(self, conn):
        with self._lock:
            if self._conn is conn:
                self._conn = None
        conn.close()

    def _pinger(self, every):
        while not self._stop.wait(every / 2):
            if time.monotonic() - self._last_call >= every:
                try:
                    self.call("ping")
                except Error:
                    pass

    def current_address(self):
        c = self._conn
        return c.address if c is not None else None

    def close(self):
        self._stop.set()
        with self._lock:
            conns = ([self._conn] if self._conn else []) + self._retiring
            self._conn, self._retiring = None, []
        for c in conns:
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- the ops ----
    def ping(self):
        self.call("ping")

    def status(self):
        return self.call("status")

    def declare(self, queue, lead_ms=None, ttr_ms=None, retention_ms=None, max_attempts=None,
                late_share=None, autonomous=None):
        return self.call("declare", dict(queue=queue, lead_ms=lead_ms, ttr_ms=ttr_ms,
                                         retention_ms=retention_ms, max_attempts=max_attempts,
                                         late_share=late_share, autonomous=autonomous))

    def put(self, queue, key, payload, time=None, mode=None, delay_ms=None):
        """Stores the task; returns its version. `time`: when it comes due (ms since the
        epoch); `mode`: "upsert" (default), "insert" or "update"."""
        return self.call("put", dict(queue=queue, key=key, payload=payload, time=time,
                                     mode=mode, delay_ms=delay_ms))["version"]

    def get(self, queue, key, consistency=None):
        """The task (a dict as the protocol's get gives it), or None if there is none."""
        try:
            return self.call("get", dict(queue=queue, key=key, consistency=consistency))["task"]
        except Error as e:
            if e.code == "not_found":
                return None
            raise

    def delete(self, queue, key):
        self.call("delete", dict(queue=queue, key=key))

    def take(self, queue, count=1, ttr_ms=None, timeout_ms=0, release_on_disconnect=None):
        """Leases up to `count` due tasks. The list it returns is also a context manager:
        on a clean exit every task not finished yet is acked (with what Task.set_result
        gave), on an exception released."""
        r = self.call("take", dict(queue=queue, count=count, ttr_ms=ttr_ms,
                                   timeout_ms=timeout_ms or None,
                                   release_on_disconnect=release_on_disconnect))
        return Taken(self, [Task.from_answer(self, queue, t) for t in r["tasks"]])

    def touch(self, queue, key, lease, ttr_ms=None):
        return self.call("touch", dict(queue=queue, key=key, lease=lease,
                                       ttr_ms=ttr_ms))["lease_until"]

    def ack(self, queue, key, lease, payload=None, time=None):
        return self.call("ack", dict(queue=queue, key=key, lease=lease, payload=payload,
                                     time=time))

    def release(self, queue, key, lease, delay_ms=None):
        return self.call("release", dict(queue=queue, key=key, lease=lease, delay_ms=delay_ms))

    def bury(self, queue, key, lease):
        return self.call("bury", dict(queue=queue, key=key, lease=lease))

    def kick(self, queue, count=None, key=None):
        return self.call("kick", dict(queue=queue, count=count, key=key))["kicked"]

    def stats(self, queue=None, consistency=None):
        """One queue's counts (a dict), or with no queue a list of every queue's."""
        r = self.call("stats", dict(queue=queue, consistency=consistency))
        return r if queue is not None else r["queues"]

    def list(self, queue, status, count=None, after=None, after_time=None):
        return self.call("list", dict(queue=queue, status=status, count=count, after=after,
                                      after_time=after_time))

    def members(self):
        return self.call("members")

    def shards(self):
        return self.call("shards")
