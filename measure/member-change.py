#!/usr/bin/env python3
"""Membership changes under the refresh load, on loopback (docs/operations.md).

  member-change.py [--build build] [--tasks 1000000] [--baseline 15] [--keep DIR]

Three dueqd (the chaos harness's cluster: peer links through dueq-faultproxy, which passes
everything here) hold --tasks tasks that are not due; dueq-load refreshes a second queue
(take + ack, 10,000 due tasks) on all three for the whole run. After --baseline seconds:

 1. replace: n3's machine is lost (kill -9, data wiped); n4 is added (member add, dueqd
    --join), caught up (a snapshot of the whole store, then the log) and promoted; n3 removed;
 2. grow and shrink: n5 is added and promoted (four voters), n3's name comes back as a new
    member and is promoted (five), then both are removed again (three).

Prints one JSON object: the time from add to promoted for each member, the refresh rate
(ops/s, one op = take + ack) in the baseline and while each member caught up (as a ratio to
the baseline), and the refresh load's failures by code over the whole run (the contract:
nothing but not_leader, timeout and, for a take, "empty", no task due). Exit 0 when the
failures are only of those kinds.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402

ALLOWED = {"not_leader", "timeout", "empty"}


def rate(progress, t0, t1):
    """Mean ops/s over the whole seconds in [t0, t1] (unix ms) of dueq-load's progress."""
    lines = [(t, ops) for t, ops, _ in progress if t0 <= t <= t1]
    return sum(ops for _, ops in lines) / len(lines) if lines else 0.0


def read_progress(path):
    out = []
    with open(path) as f:
        for line in f:
            t, ops, errors = line.split()
            out.append((int(t), int(ops), int(errors)))
    return out


def now_ms():
    return int(time.time() * 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--baseline", type=float, default=15.0)
    ap.add_argument("--keep", help="keep the cluster's files in this directory")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="dueq-member-change-")
    # The default [raft] snapshot_entries and [storage] log_keep (docs/config.md).
    c = Cluster(os.path.abspath(a.build), work, spares=2, log=lambda m: None,
                snapshot_entries=10000, log_keep=10000)
    load = None
    try:
        c.start(seed=1)
        if not c.wait_leader(30):
            raise RuntimeError("no leader")
        addrs = []
        for n in c.ids:
            addrs += ["--addr", f"127.0.0.1:{c.client_port[n]}"]
        dueq_load = c.binary("measure/load/dueq-load")
        t = time.time()
        subprocess.run([dueq_load, "put", *addrs, "--keys", str(a.tasks), "--max-ops",
                        str(a.tasks), "--connections", "4", "--depth", "64", "--seconds",
                        "3600", "--queue", "stored"], check=True, capture_output=True)
        print(f"{a.tasks} tasks stored in {time.time() - t:.0f} s", file=sys.stderr)
        progress = os.path.join(work, "refresh-progress")
        seconds = 3600  # ended by SIGTERM once the changes are done
        load = subprocess.Popen([dueq_load, "refresh", *addrs, "--keys", "10000",
                                 "--connections", "6", "--depth", "2", "--seconds", str(seconds),
                                 "--progress-file", progress, "--queue", "refresh"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        time.sleep(5 + a.baseline)  # its preload, then the baseline
        windows = {"baseline": (now_ms() - int(a.baseline * 1000), now_ms())}
        figures = {}

        def add(n):
            began = now_ms()
            figures[f"add_to_promoted_s_{n}"] = round(c.add_member(n, timeout=600), 1)
            windows[f"catch_up_{n}"] = (began, now_ms())

        lost = "n3"
        c.lose_for_good(lost)
        add("n4")
        c.remove_member(lost)
        add("n5")  # four voters
        add(lost)  # five: the lost machine's name comes back as a new member
        time.sleep(3)
        c.remove_member("n5")
        c.remove_member(lost)
        load.terminate()
        out, _ = load.communicate(timeout=60)
        load = None
        summary = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        prog = read_progress(progress)
        base = rate(prog, *windows["baseline"])
        figures["refresh_ops_per_s_baseline"] = round(base)
        for name, (t0, t1) in windows.items():
            if name != "baseline":
                figures[f"refresh_ratio_{name}"] = round(rate(prog, t0, t1) / base, 2) if base else 0
        figures["failures_by_code"] = summary.get("errors_by_code", {})
        figures["final_members"] = [m["name"] for m in (c.members() or {}).get("members", [])]
        print(json.dumps(figures, indent=1))
        bad = set(figures["failures_by_code"]) - ALLOWED
        return 1 if bad else 0
    finally:
        if load:
            load.kill()
            load.wait()
        c.stop()


if __name__ == "__main__":
    sys.exit(main())
