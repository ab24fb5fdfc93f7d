#!/usr/bin/env python3
"""Buckets move between live shards, tasks and leases included (docs/sharding.md,
"Moving buckets").

  bucket_moves.py [--build build] [--keep DIR]

Shards a and b of three dueqd each, and a third shard c that starts with no buckets, all
sharing one map file that is never edited, and one dueq-proxy. Keys are written through the
proxy into shard a's first buckets; some are taken (their leases held by this test, as a
refresher holds a token's lease while it calls the provider), one is deleted. Then:
- `dueqctl shard move --buckets 0-7 --to c`, while a writer keeps putting keys of those
  buckets through the proxy (it may be told `moving`, and its client retries);
- the move ends with shard c owning buckets 0-7 in the `shards` answer of every shard's
  nodes and of the proxy, and no move left in progress;
- every key reads back through the proxy, a node of a and a node of c, with its payload;
  shard c's leader counts them all and shard a's none of them;
- every lease taken before the move acks through the proxy, and the deleted key stays gone;
- a move step with a wrong HMAC is refused (`unauthorized`) and changes nothing.
Exit 0 on pass."""
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
from harness.shards import ShardedCluster, bucket_of as bucket  # noqa: E402
from harness.test_main import test_main  # noqa: E402
import dueq  # noqa: E402

MOVED = range(0, 8)  # the buckets moved from a to c
QUEUE = "tokens"
FOLLOW_S = 30


def keys_in(buckets, n, prefix):
    out, i = [], 0
    while len(out) < n:
        k = f"{prefix}{i}"
        if bucket(QUEUE, k) in buckets:
            out.append(k)
        i += 1
    return out


def ctl(sc, addr, *args, timeout=120):
    cmd = [sc.binary("cmd/dueqctl/dueqctl"), "--timeout", "5s", "--addr", addr]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout)


def owners(sc, addr):
    r = ctl(sc, addr, "--json", "shards")
    if r.returncode != 0:
        return None, None
    out = json.loads(r.stdout)
    owner = {}
    for s in out["shards"]:
        for lo, hi in s["buckets"]:
            for b in range(lo, hi + 1):
                owner[b] = s["name"]
    return owner, out.get("moves", [])


def wait_owner(sc, addr, want):
    deadline = time.time() + FOLLOW_S
    seen = None
    while time.time() < deadline:
        seen, moves = owners(sc, addr)
        if seen and all(seen[b] == want for b in MOVED) and not moves:
            return None
        time.sleep(0.3)
    return f"{addr}: buckets {list(MOVED)} owned by {[seen and seen[b] for b in MOVED]}"


def leader_count(sc, shard_index, keys):
    """How many of `keys` shard `shard_index`'s leader holds (a local get on its leader)."""
    c = sc.clusters[shard_index]
    leader = c.leader()
    client = dueq.Client([f"127.0.0.1:{c.client_port[leader]}"], call_timeout=5.0)
    n = 0
    try:
        for k in keys:
            try:
                client.call("get", {"queue": QUEUE, "key": k, "redirect": True})
                n += 1
            except dueq.Error:
                pass
    finally:
        client.close()
    return n


def run(build, work):
    sc = ShardedCluster(build, work, shards=3, proxies=1, empty=1, log=lambda m: None)
    try:
        sc.start(seed=1)
        if not sc.wait_leader(30):
            return "no leader in every shard"
        proxy = f"127.0.0.1:{sc.proxy_port['p1']}"
        a_node = f"127.0.0.1:{sc.clusters[0].client_port['a1']}"
        c_node = f"127.0.0.1:{sc.clusters[2].client_port['c1']}"
        client = dueq.Client([proxy], call_timeout=10.0)
        keys = keys_in(set(MOVED), 200, "k")
        due = int(time.time() * 1000) + 3_600_000
        for k in keys:
            client.put(QUEUE, k, {"v": k}, time=due)
        held = {}
        for k in keys[:20]:
            client.put(QUEUE, k, {"v": k}, time=int(time.time() * 1000) - 1000)
        while len(held) < 20:
            for t in client.take(QUEUE, count=20, ttr_ms=120_000):
                held[t.key] = t.lease
        client.call("delete", {"queue": QUEUE, "key": keys[-1]})
        kept = keys[:-1]

        written = {}
        stop = threading.Event()
        errors = []

        def writer():
            w = dueq.Client([proxy], call_timeout=15.0)
            i = 0
            try:
                for k in keys_in(set(MOVED), 400, "w"):
                    if stop.is_set():
                        break
                    try:
                        w.put(QUEUE, k, {"v": k}, time=due)
                        written[k] = True
                    except dueq.Error as e:
                        errors.append(f"put {k}: {e}")
                    i += 1
            finally:
                w.close()

        t = threading.Thread(target=writer)
        t.start()
        r = ctl(sc, a_node, "shard", "move", "--buckets", f"{MOVED[0]}-{MOVED[-1]}", "--to", "c")
        stop.set()
        t.join(60)
        if r.returncode != 0:
            return f"shard move: exit {r.returncode}: {r.stderr[-2000:]}"
        print(r.stderr.strip().splitlines()[-1])
        if errors:
            return f"{len(errors)} writes failed during the move, first: {errors[0]}"
        for addr in (a_node, c_node, f"127.0.0.1:{sc.clusters[1].client_port['b1']}", proxy):
            if why := wait_owner(sc, addr, "c"):
                return why

        everything = kept + list(written)
        for addr in (proxy, a_node, c_node):
            reader = dueq.Client([addr], call_timeout=10.0)
            try:
                for k in everything:
                    task = reader.get(QUEUE, k)
                    if task is None or task["payload"] != {"v": k}:
                        return f"get {k} through {addr}: {task}"
            except dueq.Error as e:
                return f"get {k} through {addr}: {e}"
            finally:
                reader.close()
        on_c, on_a = leader_count(sc, 2, everything), leader_count(sc, 0, everything)
        if on_c != len(everything) or on_a != 0:
            return f"of {len(everything)} keys, shard c's leader holds {on_c}, shard a's {on_a}"
        print(f"{len(everything)} keys ({len(written)} written during the move) on shard c")

        if client.get(QUEUE, keys[-1]) is not None:
            return f"the deleted key {keys[-1]} came back"
        for k, lease in held.items():
            client.ack(QUEUE, k, lease)
        print(f"{len(held)} leases taken before the move acked after it")

        forged = dueq.Client([c_node], call_timeout=5.0)
        try:
            forged.call("move_step", {"step": b"\x93\x0d\x00\x00", "mac": b"x" * 32})
            return "a forged move step was accepted"
        except dueq.Error as e:
            if e.code != "unauthorized":
                return f"a forged move step: {e.code} {e}"
        finally:
            forged.close()
        client.close()
        return None
    finally:
        sc.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "bucket moves")
