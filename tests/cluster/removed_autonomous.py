#!/usr/bin/env python3
"""A node removed while it was cut off and autonomous never merges (docs/autonomy.md).

  removed_autonomous.py [--build build] [--keep DIR]

Three dueqd (testing/chaos/harness) with queue `tokens` autonomous. A follower's peer links
are cut; once it serves in autonomous mode it acknowledges a write of a key nobody else
writes. The majority removes it (dueqctl member remove). The links heal: the leader tells
the removed node of its removal, and the node stops with exit status 78. Its write must not
reach the cluster: the key is absent on every remaining member. Exit 0 on pass."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.test_main import test_main  # noqa: E402

REMOVED_EXIT = 78
KEY = "written-alone"


def ctl_at(c, n, *args):
    r = subprocess.run([c.binary("cmd/dueqctl/dueqctl"), "--json", "--timeout", "3s", "--addr",
                        f"127.0.0.1:{c.client_port[n]}", *args],
                       capture_output=True, text=True, timeout=60)
    out = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None
    return r.returncode, out, r.stderr.strip()


def run(build, work):
    c = Cluster(build, work, autonomy_after_ms=1000, log=lambda m: None)
    try:
        c.start(seed=1)
        leader = c.wait_leader(30)
        if not leader:
            return "no leader"
        victim = next(n for n in c.ids if n != leader)
        c.isolate(victim)
        deadline = time.time() + 30
        while (ctl_at(c, victim, "status")[1] or {}).get("mode") != "autonomous":
            if time.time() > deadline:
                return f"{victim} did not turn autonomous within 30 s of the cut"
            time.sleep(0.3)
        rc, _, err = ctl_at(c, victim, "put", "tokens", KEY, "--payload", '"alone"')
        if rc != 0:
            return f"{victim} did not acknowledge a write while autonomous: {err}"
        rc, out, err = ctl_at(c, victim, "status")
        if rc != 0 or out["autonomy"]["overlay"] != 1:
            return f"{victim}'s write is not in its overlay: {out} {err}"
        # The majority removes it while it cannot hear of it.
        c.ids.remove(victim)
        c.ctl_until(60, "member", "remove", victim, done_if=f"no member {victim}")
        c.ids.append(victim)
        c.heal_links()
        try:
            status = c.procs[victim].wait(timeout=30)
        except subprocess.TimeoutExpired:
            return f"removed {victim} did not stop within 30 s of the heal"
        c.procs[victim] = None
        c.ids.remove(victim)
        if status != REMOVED_EXIT:
            return f"removed {victim} exited {status}"
        # Its write stayed with it. Give a merge that slipped through time to apply.
        time.sleep(2)
        for n in c.ids:
            rc, out, err = ctl_at(c, n, "get", "tokens", KEY)
            if rc == 0:
                return f"{n} holds {KEY}, written by the removed {victim} alone: {out}"
            if "not_found" not in err:
                return f"get {KEY} on {n}: {err}"
        return None
    finally:
        c.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "removed autonomous node")
