#!/usr/bin/env python3
"""Routing follows a shard's membership changes (docs/sharding.md, "Members follow").

  members_follow.py [--build build] [--keep DIR]

Two shards of three dueqd and one dueq-proxy, all routing by one map file that is never
edited. Every member of shard a is replaced in turn (a new member added and promoted, the
old one removed and its machine lost for good), so that none of the members the map file
lists for shard a is left. Then:
- the proxy and a node of shard b list shard a's new members (`shards`), with the index of
  the membership they came from;
- every key written before is read back through the proxy and through shard b's node, and
  new keys of shard a are written through both;
- a proxy restarted from the stale map file finds shard a again (shard b's nodes pass on
  what they learned) and serves its keys;
- a machine that joins shard b now, started from the stale map file, finds shard a again
  (its own shard's members pass on what they learned) and forwards to it.
Exit 0 on pass."""
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.shards import BUCKETS, ShardedCluster, bucket_of as bucket  # noqa: E402
from harness.test_main import test_main  # noqa: E402

FOLLOW_S = 30  # how long routers may take to learn: a few discovery rounds (2 s each)


def in_shard_a(key):
    return bucket("q", key) < BUCKETS // 2


def ctl(sc, addr, *args):
    cmd = [sc.binary("cmd/dueqctl/dueqctl"), "--json", "--timeout", "5s", "--addr", addr]
    r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60)
    out = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None
    return r.returncode, out, r.stderr.strip()


def shard_a_members(sc, addr):
    rc, out, _ = ctl(sc, addr, "shards")
    if rc != 0:
        return None, 0
    a = next(s for s in out["shards"] if s["name"] == "a")
    return sorted(m["id"] for m in a["members"]), a.get("membership_index", 0)


def wait_members(sc, addr, want):
    deadline = time.time() + FOLLOW_S
    while time.time() < deadline:
        names, index = shard_a_members(sc, addr)
        if names == want and index > 0:
            return None
        time.sleep(0.5)
    return f"{addr} lists shard a as {shard_a_members(sc, addr)}, not {want}"


def read_all(sc, addr, written):
    for key, value in written.items():
        rc, out, err = ctl(sc, addr, "get", "q", key)
        if rc != 0 or out["task"]["payload"] != value:
            return f"get {key} through {addr}: exit {rc} {out} {err}"
    return None


def run(build, work):
    sc = ShardedCluster(build, work, shards=2, proxies=1, spares=3, log=lambda m: None)
    try:
        sc.start(seed=1)
        if not sc.wait_leader(30):
            return "no leaders"
        a, b = sc.clusters
        proxy = f"127.0.0.1:{sc.proxy_port['p1']}"
        b_node = f"127.0.0.1:{b.client_port['b1']}"
        written = {}
        for i in range(40):
            key = f"k{i}"
            rc, _, err = ctl(sc, proxy, "put", "q", key, "--payload", f'"v{i}"')
            if rc != 0:
                return f"put {key} through the proxy: {err}"
            written[key] = f"v{i}"
        if sum(in_shard_a(k) for k in written) < 5:
            return "too few keys in shard a to judge"
        # Replace every member of shard a: the map file's list for it is then all gone.
        for old, new in zip(list(a.first_ids), list(a.spare_ids)):
            a.add_member(new)
            a.remove_member(old)
            a.lose_for_good(old)
        want = sorted(a.ids)
        if set(want) & set(a.first_ids):
            return f"shard a still has an original member: {want}"
        for addr in (proxy, b_node):
            if problem := wait_members(sc, addr, want):
                return problem
        for addr in (proxy, b_node):
            if problem := read_all(sc, addr, written):
                return problem
        for i, addr in enumerate((proxy, b_node)):
            key = next(f"new{i}-{j}" for j in range(1000) if in_shard_a(f"new{i}-{j}"))
            rc, _, err = ctl(sc, addr, "put", "q", key, "--payload", '"after"')
            if rc != 0:
                return f"put {key} (shard a) through {addr}: {err}"
            written[key] = "after"
        # A proxy restarted from the map file alone learns shard a from shard b's nodes.
        p = sc.proxy_procs["p1"]
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
        sc.restart("p1")
        if problem := wait_members(sc, proxy, want):
            return "restarted proxy: " + problem
        if problem := read_all(sc, proxy, written):
            return problem
        # Every seed the file lists for shard a is gone, so only shard b's members can tell
        # a new member of b where shard a is now.
        joined = b.next_spare()
        b.add_member(joined)
        joined_addr = f"127.0.0.1:{b.client_port[joined]}"
        if problem := wait_members(sc, joined_addr, want):
            return f"new member {joined} of shard b: " + problem
        return read_all(sc, joined_addr, written)
    finally:
        sc.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "members follow")
