#!/usr/bin/env python3
"""The "add a shard" runbook at scale (docs/operations.md), measured.

  measure/rebalance.py [--build build] [--tasks 1000000] [--at-once 4] [--out DIR]

Shards a and b of three dueqd each hold --tasks tasks (200-byte payloads, due over the
next hour, loaded through a dueq-proxy); shard c of three more dueqd starts with no
buckets. A refresh workload (dueq-bench refresh through the proxy, on tasks due now) runs
for 20 s before the moves, then through `dueqctl shard rebalance`, then 20 s after. Then
every task is counted on the shard its bucket now names.

Prints: the rebalance's time, buckets and tasks moved (tasks/s, MB/s of records), the
refresh rate and p99 before, during and after, and whether every task is where its bucket
says (0 lost). Every process is stopped by its PID; the data goes to --out (default a
temporary directory, removed)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing", "chaos"))
from harness.shards import ShardedCluster  # noqa: E402


def bench(sc, proxy, *args, seconds=None):
    """One dueq-bench run (its JSON); `seconds` for the measuring scenarios, none for preload."""
    timed = ["--seconds", str(seconds)] if seconds else []
    r = subprocess.run([sc.binary("measure/bench/dueq-bench"), *args, "--addr", proxy,
                        "--json", "-q", *timed],
                       capture_output=True, text=True, timeout=(seconds or 0) + 1200)
    if r.returncode != 0:
        raise RuntimeError(f"dueq-bench {args[0]}: {r.stderr[-1000:]}")
    return json.loads(r.stdout)


def refresh_figures(out):
    row = next((x for x in out.get("rows", out.get("results", [])) if x.get("op") == "refresh"),
               None)
    return row or out


def stats(sc, cluster, queue):
    leader = cluster.leader()
    r = subprocess.run([sc.binary("cmd/dueqctl/dueqctl"), "--json", "--addr",
                        f"127.0.0.1:{cluster.client_port[leader]}", "stats", queue,
                        "--consistency", "leader"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None
    s = json.loads(r.stdout)
    q = s.get("queues", {}).get(queue, s)
    return sum(int(q.get(k, 0)) for k in ("ready", "taken", "buried", "done"))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--at-once", type=int, default=4)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    work = a.out or tempfile.mkdtemp(prefix="dueq-rebalance-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    sc = ShardedCluster(os.path.abspath(a.build), work, shards=3, proxies=1, empty=1,
                        log=lambda m: None, snapshot_entries=200_000, log_keep=50_000)
    try:
        sc.start(seed=1)
        if not sc.wait_leader(60):
            print("no leader in every shard")
            return 1
        proxy = f"127.0.0.1:{sc.proxy_port['p1']}"
        a_node = f"127.0.0.1:{sc.clusters[0].client_port['a1']}"
        t = time.time()
        bench(sc, proxy, "preload", "--keys", str(a.tasks), "--queue", "tokens",
              "--connections", "16", "--depth", "32", "--spread-ms", "3600000",
              "--time-offset-ms", "600000")
        print(f"loaded {a.tasks} tasks in {time.time() - t:.0f} s", flush=True)
        # The refresh workload: its own small queue of tasks due now, spread over every
        # bucket, refreshed again and again.
        bench(sc, proxy, "preload", "--keys", "20000", "--queue", "refresh")
        before = bench(sc, proxy, "refresh", "--queue", "refresh", "--keys", "20000",
                       "--no-preload", "--connections", "8", seconds=20)
        during = {}

        def refresh_during():
            during["out"] = bench(sc, proxy, "refresh", "--queue", "refresh", "--keys",
                                  "20000", "--no-preload", "--connections", "8", seconds=40)
        worker = threading.Thread(target=refresh_during)
        worker.start()
        t = time.time()
        r = subprocess.run([sc.binary("cmd/dueqctl/dueqctl"), "--addr", a_node, "shard",
                            "rebalance", "--at-once", str(a.at_once)],
                           capture_output=True, text=True, timeout=3600)
        took = time.time() - t
        worker.join()
        print(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "", flush=True)
        if r.returncode != 0:
            print(f"rebalance: exit {r.returncode}: {r.stderr[-2000:]}")
            return 1
        after = bench(sc, proxy, "refresh", "--queue", "refresh", "--keys", "20000",
                      "--no-preload", "--connections", "8", seconds=20)
        counts = [stats(sc, c, "tokens") for c in sc.clusters]
        moved = counts[2] or 0
        print(json.dumps({"rebalance_s": round(took, 1), "tasks_per_shard": counts,
                          "tasks_moved": moved, "tasks_per_s": round(moved / took),
                          "refresh_before": refresh_figures(before),
                          "refresh_during": refresh_figures(during.get("out", {})),
                          "refresh_after": refresh_figures(after)}, indent=1))
        total = sum(x or 0 for x in counts)
        print(f"{total} of {a.tasks} tasks found on the shards their buckets name"
              + ("" if total == a.tasks else "  <-- LOST"))
        return 0 if total == a.tasks else 1
    finally:
        sc.stop()
        if not a.out:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
