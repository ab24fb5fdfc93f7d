#!/usr/bin/env python3
"""A blocking take parked on a leader that is then cut off from the others
(docs/protocol.md §6, redirect rule): three dueqd behind the fault proxy; clients reach
every node directly, so only the peer links are cut.

  parked_take_cutoff.py [--build build] [--keep DIR] [--rounds 3]

Each round: a take with timeout_ms 20 s is parked on the leader on a bare connection, and
a second one through the Python client (clients/python), whose first seed is the leader;
then every peer link of the leader goes silent. The bare take must be answered
(no_quorum or not_leader, not applied) within twice the election timeout of the cut, long
before its 20 s; once the others elect a leader, a put there must reach the client's take,
which the client has moved to the new leader on its own. Prints the time from the cut to
each answer. Exit 0 on pass."""
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
from harness.cluster import Cluster  # noqa: E402
from harness.test_main import test_main  # noqa: E402
import dueq  # noqa: E402
from dueq.connection import Connection  # noqa: E402

ELECTION_MS = 1000
ROUNDS = 3
WAIT_MS = 20_000


def one_round(c, rnd, queue):
    """(bare answer s, client's take served s) after the cut, or a failure message."""
    old = c.wait_leader()
    addr = {n: f"127.0.0.1:{c.client_port[n]}" for n in c.ids}
    others = [n for n in c.ids if n != old]
    bare = Connection(addr[old], 2.0)
    parked = bare.send({"op": "take", "queue": queue, "timeout_ms": WAIT_MS})
    client = dueq.Client([addr[old]] + [addr[n] for n in others], call_timeout=30.0,
                         idle_ping=0)
    served = {}

    def take():
        try:
            served["tasks"] = client.take(queue, timeout_ms=WAIT_MS)
        except dueq.Error as e:
            served["error"] = e
        served["at"] = time.time()

    t = threading.Thread(target=take, daemon=True)
    t.start()
    time.sleep(0.5)  # both parked
    if parked.event.is_set():
        return f"round {rnd}: the take was answered before the cut: {parked.frame}"
    cut = time.time()
    c.isolate(old)
    if not parked.event.wait(WAIT_MS / 1000):
        return f"round {rnd}: the parked take on the cut-off leader got no answer in 20 s"
    answered = time.time() - cut
    frame = parked.frame or {}
    code = (frame.get("error") or {}).get("code")
    if frame.get("ok") or code not in ("no_quorum", "not_leader"):
        return f"round {rnd}: the parked take was answered {frame}"
    if answered > 2 * ELECTION_MS / 1000:
        return (f"round {rnd}: the parked take was answered {answered:.2f} s after the cut, "
                f"more than twice the election timeout")
    bare.close()
    new = c.wait_leader(among=others)
    if not new:
        return f"round {rnd}: the majority elected no leader"
    with dueq.Client([addr[n] for n in others], idle_ping=0) as w:
        w.put(queue, f"r{rnd}", "token")
    t.join(WAIT_MS / 1000 + 10)
    if "tasks" not in served:
        return f"round {rnd}: the client's take ended {served.get('error')}"
    if [x.key for x in served["tasks"]] != [f"r{rnd}"]:
        return f"round {rnd}: the client's take got {[x.key for x in served['tasks']]}"
    where = client.current_address()
    client.close()
    if where != addr[new]:
        return f"round {rnd}: the client's take was served by {where}, not the new leader"
    took = served["at"] - cut
    c.heal_links()
    c.wait_leader()
    return answered, took


def run(build, work, rounds=ROUNDS):
    c = Cluster(build, work, election_ms=ELECTION_MS, log=lambda m: None)
    try:
        c.start(seed=1)
        c.wait_leader()
        seeds = [f"127.0.0.1:{c.client_port[n]}" for n in c.ids]
        with dueq.Client(seeds, idle_ping=0) as admin:
            admin.declare("p")
        figures = []
        for rnd in range(rounds):
            r = one_round(c, rnd, "p")
            if isinstance(r, str):
                return r
            figures.append(r)
            print(f"round {rnd}: parked take answered {r[0]:.2f} s after the cut; the "
                  f"client's take served by the new leader {r[1]:.2f} s after it")
        return None
    finally:
        c.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "parked_take_cutoff")
