#!/usr/bin/env python3
"""dueqctl backup under load, and dueqd --restore into a fresh cluster (docs/operations.md,
"Backing up").

  backup_restore.py [--build build] [--keep DIR] [--tasks N]

Cluster `source` (three dueqd, testing/chaos/harness) holds N tasks in queue `tokens`, and
dueq-bench runs the refresh load on queue `bench` meanwhile. Then:
  - `dueqctl backup` from a follower completes; the file, read by an independent Python
    reader (harness/backup_file.py), holds every key of both queues, its end record agrees,
    and its header names the index, the term and the cluster;
  - a copy with one flipped byte is refused by dueqd --restore, and so is a data dir that
    is not empty;
  - a fresh cluster `restored` (other ports, other data dirs), every node restored from the
    file, elects a leader, and a backup of it taken at once holds every record of the first
    one unchanged, but for what time alone does to a task (an expired lease, an ended
    delay, retention); `dueqctl get` agrees on a sample; it takes writes.
Exit 0 on pass."""
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness import backup_file  # noqa: E402
from harness.cluster import Cluster  # noqa: E402
from harness.test_main import test_main  # noqa: E402

TASKS = 20000
REFRESH_KEYS = 5000


def backup(c, node, path):
    """dueqctl --addr NODE backup PATH --json: (exit status, summary, stderr)."""
    r = subprocess.run([c.binary("cmd/dueqctl/dueqctl"), "--json", "--timeout", "30s",
                        "--addr", f"127.0.0.1:{c.client_port[node]}", "backup", path],
                       capture_output=True, text=True, timeout=300)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr


def check_restored(first, second, now_ms):
    """Every record of backup `first` in `second`, as time alone may have changed it."""
    wrong = []
    for k, before in first.items():
        why = backup_file.same_but_for_time(before, second.get(k), now_ms)
        if why:
            wrong.append(f"{k}: {why}")
    extra = [k for k in second if k not in first]
    if extra:
        wrong.append(f"{len(extra)} keys the backup did not have, e.g. {extra[0]}")
    return wrong


def run(build, work, tasks=TASKS):
    src = Cluster(build, os.path.join(work, "source"), cluster_id="source", log=lambda m: None)
    dst = Cluster(build, os.path.join(work, "restored"), cluster_id="restored",
                  log=lambda m: None)
    load = None
    try:
        src.start(seed=1)
        if not src.wait_leader(30):
            return "no leader"
        addrs = ",".join(f"127.0.0.1:{src.client_port[n]}" for n in src.ids)
        bench = os.path.join(build, "measure/bench/dueq-bench")
        t0 = time.time()
        r = subprocess.run([bench, "preload", "-q", "-a", addrs, "--keys", str(tasks),
                            "--queue", "tokens", "--payload-bytes", "200",
                            "--time-offset-ms", "3600000", "--spread-ms", "3600000",
                            "-c", "4", "-d", "32"], capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            return f"preload: {r.stderr[-300:]}"
        print(f"preloaded {tasks} tasks in {time.time() - t0:.1f} s")
        load = subprocess.Popen([bench, "refresh", "-q", "-a", addrs, "--keys",
                                 str(REFRESH_KEYS), "--queue", "bench", "-c", "6", "-d", "2",
                                 "-s", "120"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(6)  # its own preload, then refreshes
        leader = src.leader()
        follower = next(n for n in src.ids if n != leader)
        path = os.path.join(work, "dueq.bak")
        t0 = time.time()
        rc, summary, err = backup(src, follower, path)
        took = time.time() - t0
        if rc != 0:
            return f"backup: exit {rc}: {err[-400:]}"
        print(f"backup of {follower} under the refresh load: {summary['tasks']} tasks, "
              f"{summary['bytes'] / 2**20:.1f} MiB, index {summary['index']}, {took:.2f} s")
        load.kill()
        load.wait()
        load = None
        header, _, first = backup_file.read(path)
        if (header["index"], header["cluster"], header["node"]) != (
                summary["index"], "source", follower) or header["index"] == 0:
            return f"the file's header {header} does not match the summary {summary}"
        queues = {}
        for (q, _k) in first:
            queues[q] = queues.get(q, 0) + 1
        if queues.get(b"tokens") != tasks or queues.get(b"bench") != REFRESH_KEYS:
            return f"the backup holds {queues}, wanted {tasks} tokens, {REFRESH_KEYS} bench"
        if len(first) != summary["tasks"]:
            return f"{len(first)} records, the summary says {summary['tasks']}"
        src.stop()

        # A damaged copy is refused before anything is written.
        with open(path, "rb") as f:
            data = bytearray(f.read())
        data[len(data) // 2] ^= 0x10
        bad = os.path.join(work, "damaged.bak")
        with open(bad, "wb") as f:
            f.write(data)
        dst.start_proxy(seed=2)
        r = dst.restore_node(dst.ids[0], bad)
        if r.returncode == 0 or "damaged" not in r.stderr:
            return f"a damaged backup: exit {r.returncode}, {r.stderr[-300:]}"
        t0 = time.time()
        for n in dst.ids:
            r = dst.restore_node(n, path)
            if r.returncode != 0 or f"restored {len(first)} tasks" not in r.stdout:
                return f"restore {n}: exit {r.returncode}: {r.stdout} {r.stderr[-300:]}"
        print(f"restored three nodes in {time.time() - t0:.1f} s: {r.stdout.strip()}")
        r = dst.restore_node(dst.ids[0], path)
        if r.returncode == 0 or "not empty" not in r.stderr:
            return f"a restore into a used data dir: exit {r.returncode}, {r.stderr[-300:]}"
        for n in dst.ids:
            dst.start_node(n)
        if not dst.wait_leader(30):
            return "the restored cluster elects no leader"
        second_path = os.path.join(work, "restored.bak")
        rc, summary2, err = backup(dst, dst.leader(), second_path)
        now_ms = time.time() * 1000
        if rc != 0:
            return f"backup of the restored cluster: exit {rc}: {err[-300:]}"
        header2, _, second = backup_file.read(second_path)
        if header2["index"] <= header["index"] or header2["cluster"] != "restored":
            return f"the restored cluster's backup: {header2}, the first: {header}"
        wrong = check_restored(first, second, now_ms)
        if wrong:
            return f"{len(wrong)} records differ after the restore, e.g. {wrong[:3]}"
        print(f"the restored cluster holds all {len(first)} records (index {header2['index']})")
        # The check itself catches a lost task, a changed payload and a stray key.
        planted = dict(second)
        lost, changed = [k for k in sorted(first) if k[0] == b"tokens"][:2]
        del planted[lost]
        planted[changed] = planted[changed][:7] + [b"other"] + planted[changed][8:]
        planted[(b"tokens", b"stray")] = second[changed]
        if len(check_restored(first, planted, now_ms)) != 3:
            return f"the check missed a planted defect: {check_restored(first, planted, now_ms)}"
        rng = random.Random(7)
        for (q, k) in rng.sample(sorted(k for k in first if k[0] == b"tokens"), 20):
            rc, got, err = dst.ctl("get", q.decode(), k.decode())
            rec = first[(q, k)]
            got = got["task"] if rc == 0 else None
            if rc != 0 or got["time"] != rec[2] or got["attempts"] != rec[6]:
                return f"get {k}: exit {rc} {err} {got}, the backup has {rec[:7]}"
        rc, _, err = dst.ctl("put", "tokens", "after-restore", "--payload", '{"t": 1}')
        if rc != 0:
            return f"a put on the restored cluster: exit {rc}: {err}"
        return None
    finally:
        if load:
            load.kill()
            load.wait()
        src.stop()
        dst.stop()


if __name__ == "__main__":
    if "--tasks" in sys.argv:
        i = sys.argv.index("--tasks")
        count = int(sys.argv[i + 1])
        del sys.argv[i:i + 2]
        test_main(__doc__, lambda b, w: run(b, w, count), "backup restore")
    test_main(__doc__, run, "backup restore")
