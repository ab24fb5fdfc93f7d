#!/usr/bin/env python3
"""Sessions survive a leader change (docs/semantics.md, "Sessions and release on
disconnect"): three dueqd, the Python client (clients/python), queue `s` with a ttr of
60 s so that a lease running out cannot pass for a release.

  session_failover.py [--build build] [--keep DIR] [--tasks 100]

(a) Resumed: a worker takes --tasks tasks with release_on_disconnect; the leader is
    killed (-9). The worker's client reconnects to a survivor with hello {session} and
    gets its own session back; it stays connected for longer than the new leader's grace
    period, then acks every task on its old lease id: every ack is accepted.
(b) Gone: a second worker takes --tasks tasks and dies with the leader. The new leader
    gives its session a grace period from when it took over, then releases it: every task
    is handed out again within the grace period plus an election and a margin, long before
    its ttr. Prints how long that took.
Exit 0 on pass."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
from harness.cluster import Cluster  # noqa: E402
from harness.test_main import test_main  # noqa: E402
import dueq  # noqa: E402

TASKS = 100
GRACE_MS = 3000
ELECTION_MS = 1000
TTR_MS = 60_000


def take_all(client, queue, count):
    held = []
    deadline = time.time() + 20
    while len(held) < count and time.time() < deadline:
        got = client.take(queue, count=min(50, count - len(held)), release_on_disconnect=True)
        held.extend(got)
    return held


def fill(client, queue, count):
    client.declare(queue, ttr_ms=TTR_MS)
    for i in range(count):
        client.put(queue, f"k{i}", f"token-{i}")


def resumed(c, seeds, tasks):
    """(a): None on pass, else what went wrong."""
    w = dueq.Client(seeds, call_timeout=10.0)
    try:
        fill(w, "s", tasks)
        held = take_all(w, "s", tasks)
        if len(held) != tasks:
            return f"(a) took {len(held)} of {tasks}"
        session = w._session
        leader = c.leader()
        c.kill(leader)
        c.wait_leader(among=[n for n in c.ids if n != leader])
        w.ping()  # reconnects: hello {session} on a survivor
        if w._session != session:
            return f"(a) hello gave session {w._session}, not the worker's {session}"
        # Connected, and past the new leader's grace period: nothing may be released.
        time.sleep((GRACE_MS + 2 * ELECTION_MS) / 1000)
        refused = []
        for t in held:
            try:
                w.ack("s", t.key, t.lease)
            except dueq.Error as e:
                refused.append(f"{t.key}: {e.code}")
        if refused:
            return f"(a) {len(refused)} of {tasks} acks refused, e.g. {refused[:3]}"
        st = w.stats("s", consistency="leader")
        print(f"(a) resumed session {session} on the new leader; {tasks} acks on the old "
              f"leases accepted; stats {st}")
        c.restart(leader)
        return None
    finally:
        w.close()


def gone(c, seeds, tasks):
    """(b): None on pass, else what went wrong."""
    admin = dueq.Client(seeds, call_timeout=10.0)
    w = dueq.Client(seeds, call_timeout=10.0)
    try:
        c.wait_leader()
        fill(admin, "g", tasks)
        held = take_all(w, "g", tasks)
        if len(held) != tasks:
            return f"(b) took {len(held)} of {tasks}"
        leader = c.leader()
        killed = time.time()
        c.kill(leader)
        w.close()  # the worker dies with it
        # Another worker waits for the tasks to come back.
        back = []
        bound = GRACE_MS / 1000 + 4 * ELECTION_MS / 1000 + 5  # far below the ttr (60 s)
        while len(back) < tasks and time.time() - killed < bound:
            try:
                back.extend(admin.take("g", count=50, timeout_ms=500))
            except dueq.Error:
                time.sleep(0.1)
        took = time.time() - killed
        if len(back) < tasks:
            return (f"(b) {len(back)} of {tasks} tasks handed out again within {bound:.1f} s "
                    f"of the kill (grace {GRACE_MS} ms, ttr {TTR_MS} ms)")
        if {t.key for t in back} != {t.key for t in held}:
            return "(b) the tasks handed out again are not the dead worker's"
        print(f"(b) the dead worker's {tasks} tasks were handed out again {took:.2f} s after "
              f"the kill (grace {GRACE_MS} ms, election timeout {ELECTION_MS} ms, ttr "
              f"{TTR_MS} ms)")
        return None
    finally:
        admin.close()


def run(build, work, tasks=TASKS):
    c = Cluster(build, work, grace_ms=GRACE_MS, election_ms=ELECTION_MS, log=lambda m: None)
    try:
        c.start(seed=1)
        c.wait_leader()
        seeds = [f"127.0.0.1:{c.client_port[n]}" for n in c.ids]
        return resumed(c, seeds, tasks) or gone(c, seeds, tasks)
    finally:
        c.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "session_failover")
