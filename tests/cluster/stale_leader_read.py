#!/usr/bin/env python3
"""A leader cut off from the others never answers a stale `consistency: "leader"` read.

  stale_leader_read.py [--build build] [--plant] [--keep DIR]

Three dueqd whose peer links go through dueq-faultproxy (testing/chaos/harness). A key is
written (v1); the leader L is cut off from both peers and frozen (SIGSTOP) at once, so that
it cannot notice it lost its majority; the two others elect a new leader, which commits v2.
Then L is woken (SIGCONT): its links are still cut and for about an election timeout it
still believes it leads. A leader read sent to L in that window must not return v1: L must
first confirm it leads (ReadIndex, docs/protocol.md), cannot, and refuses (`not_leader`
once it steps down, or `timeout`; dueqctl then says `unavailable`). With --plant, every node runs dueqd-test --plant
leader_reads_unconfirmed (leader reads served without that confirmation), and the test
passes only if it sees the stale v1: the check can fail. Exit 0 on pass."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402

ELECTION_MS = 1000


def dueqctl(c, node, *args, timeout="3s"):
    cmd = [c.binary("cmd/dueqctl/dueqctl"), "--addr", f"127.0.0.1:{c.client_port[node]}",
           "--timeout", timeout, "--json", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def run(build, workdir, plant):
    c = Cluster(build, workdir, election_ms=ELECTION_MS, heartbeat_ms=100,
                plant="leader_reads_unconfirmed" if plant else None, log=lambda m: None)
    try:
        c.start_proxy(seed=1)
        for n in c.ids:
            c.start_node(n)
        old = c.wait_leader(30)
        if not old:
            return "no leader within 30 s"
        rc, out, err = dueqctl(c, old, "put", "tokens", "k", "--payload", '"v1"')
        if rc != 0:
            return f"put v1 failed: {err}"
        c.isolate(old)
        c.pause(old)
        others = [n for n in c.ids if n != old]
        new = c.wait_leader(30, among=others)
        if not new:
            return "the two others elected no leader within 30 s"
        rc, out, err = dueqctl(c, new, "put", "tokens", "k", "--payload", '"v2"')
        if rc != 0:
            return f"put v2 through the new leader {new} failed: {err}"
        c.resume(old)
        rc, out, err = dueqctl(c, old, "get", "tokens", "k", "--consistency", "leader")
        print(f"leader read on the cut-off {old} (new leader {new}): exit {rc}, {out or err}")
        if rc == 0:
            payload = json.loads(out).get("task", {}).get("payload")
            if payload == "v1":
                return f"STALE: the cut-off {old} answered v1 after {new} committed v2"
            if payload != "v2":
                return f"the cut-off {old} answered {payload!r}, neither v1 nor v2"
            return f"the cut-off {old} answered v2, which it cannot have (its links are cut)"
        # dueqctl says `unavailable` when its only seed kept answering not_leader with no
        # leader to redirect to (the cut-off node knows none) until its --timeout.
        if not any(code in err for code in ("not_leader", "timeout", "unavailable")):
            return f"refused, but with neither not_leader, timeout nor unavailable: {err}"
        return None
    finally:
        c.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("DUEQ_BUILD", "build"))
    ap.add_argument("--plant", action="store_true",
                    help="run with the planted defect leader_reads_unconfirmed and pass only "
                         "if the stale read is seen")
    ap.add_argument("--keep", help="keep the nodes' files in this directory")
    args = ap.parse_args()
    workdir = args.keep or tempfile.mkdtemp(prefix="dueq-stale-read.")
    problem = run(args.build, workdir, args.plant)
    if args.plant:
        ok = problem is not None and problem.startswith("STALE")
        print("PASS: the planted defect was caught" if ok
              else f"FAIL: the planted defect was not caught ({problem or 'no stale read'})")
    else:
        ok = problem is None
        print("PASS: the cut-off leader refused the read" if ok else f"FAIL: {problem}")
    if ok and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not ok:
        print(f"files kept in {workdir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
