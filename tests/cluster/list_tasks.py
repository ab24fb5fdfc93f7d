#!/usr/bin/env python3
"""dueqctl list pages through a queue's tasks by status (the `list` op, docs/protocol.md).

  list_tasks.py [--build build] [--keep DIR]

Three dueqd (testing/chaos/harness); 20,000 tasks already late are put in queue `tokens`
while dueq-bench runs the refresh load on another queue. Then:
  - `dueqctl list tokens --status late --limit 100` gives 100 late tasks, the earliest
    first, and says where the next page starts; it prints how long the call took;
  - `--after KEY` (the task is still late, so no --after-time) resumes right after it;
  - `--all --limit 1000` pages through every one of the 20,000 keys, each once;
  - a bad status is refused as bad usage (exit 2).
Exit 0 on pass."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.test_main import test_main  # noqa: E402

TASKS = 20000


def run(build, work):
    c = Cluster(build, work, log=lambda m: None)
    load = None
    try:
        c.start(seed=1)
        if not c.wait_leader(30):
            return "no leader"
        addrs = ",".join(f"127.0.0.1:{c.client_port[n]}" for n in c.ids)
        bench = os.path.join(build, "measure/bench/dueq-bench")
        r = subprocess.run([bench, "preload", "-q", "-a", addrs, "--keys", str(TASKS),
                            "--queue", "tokens", "--payload-bytes", "100",
                            "--time-offset-ms", "-600000", "--spread-ms", "60000",
                            "-c", "4", "-d", "32"], capture_output=True, text=True, timeout=240)
        if r.returncode != 0:
            return f"preload: {r.stderr[-300:]}"
        # The refresh load runs meanwhile (bounded: 40 s at most).
        load = subprocess.Popen([bench, "refresh", "-q", "-a", addrs, "--keys", "20000",
                                 "--queue", "bench", "-c", "16", "-d", "1", "-s", "40"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(8)  # its own preload, then refreshes
        timings = []
        for _ in range(5):
            t0 = time.time()
            rc, page, err = c.ctl("list", "tokens", "--status", "late", "--limit", "100")
            timings.append((time.time() - t0) * 1000)
        if rc != 0 or not page:
            return f"list: exit {rc}, {err}"
        print(f"dueqctl list --limit 100 under the refresh load, whole command: "
              f"{', '.join(f'{t:.1f}' for t in timings)} ms")
        tasks = page["tasks"]
        times = [t["time"] for t in tasks]
        if len(tasks) != 100 or times != sorted(times) or "after" not in page:
            return f"first page: {len(tasks)} tasks, sorted {times == sorted(times)}, {page.keys()}"
        if any(t["status"] != "ready" or t["time"] >= time.time() * 1000 for t in tasks):
            return f"a listed task is not late: {tasks[:3]}"
        rc, nxt, err = c.ctl("list", "tokens", "--status", "late", "--limit", "5",
                             "--after", tasks[49]["key"])
        if rc != 0 or [t["key"] for t in nxt["tasks"]] != [t["key"] for t in tasks[50:55]]:
            return f"--after {tasks[49]['key']}: exit {rc} {err} {nxt}"
        t0 = time.time()
        rc, every, err = c.ctl("list", "tokens", "--status", "late", "--limit", "1000", "--all",
                               timeout="30s")
        took = time.time() - t0
        if rc != 0:
            return f"list --all: exit {rc}, {err}"
        keys = [t["key"] for t in every["tasks"]]
        print(f"list --all --limit 1000: {len(keys)} keys in {took * 1000:.0f} ms, "
              f"{len(set(keys))} distinct")
        if len(keys) != TASKS or len(set(keys)) != TASKS or "after" in every:
            return f"--all gave {len(keys)} keys ({len(set(keys))} distinct), wanted {TASKS}"
        rc, _, _ = c.ctl("list", "tokens", "--status", "lost")
        if rc != 2:
            return f"a bad status: exit {rc}, wanted 2"
        return None
    finally:
        if load:
            load.kill()
            load.wait()
        c.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "list tasks")
