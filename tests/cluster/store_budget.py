#!/usr/bin/env python3
"""A full store refuses writes and keeps the cluster up (docs/config.md, "Sizing the store").

  store_budget.py [--build build] [--keep DIR]

Three dueqd (testing/chaos/harness) with a store budget of 4 MiB ([limits]
max_store_bytes). A client puts fresh keys of 500 bytes until the leader refuses them:
  - the refusal is `store_full` (dueqctl exit 4), and no node stops;
  - the leader's dueq_store_bytes stays at or under dueq_store_limit_bytes, and came within
    15 % of it; /health stays 200 with a warning about the budget;
  - gets, takes and deletes work while full; after deleting some tasks a put is accepted;
  - every node killed and restarted comes back, elects a leader and serves a get, and
    still refuses puts past the budget.
Exit 0 on pass."""
import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.prometheus import scrape  # noqa: E402
from harness.test_main import test_main  # noqa: E402

BUDGET = 4 << 20
KEYS = 20000  # of 500 bytes: about three times the budget


def health(port):
    try:
        r = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
        return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def run(build, work):
    c = Cluster(build, work, admin=True, log=lambda m: None, limits={"max_store_bytes": BUDGET})
    try:
        c.start(seed=1)
        leader = c.wait_leader(30)
        if not leader:
            return "no leader"
        bench = os.path.join(build, "measure/bench/dueq-bench")
        fill = subprocess.run(
            [bench, "preload", "--json", "-q", "-a",
             ",".join(f"127.0.0.1:{c.client_port[n]}" for n in c.ids),
             "--keys", str(KEYS), "--payload-bytes", "500", "--queue", "fill",
             "-c", "4", "-d", "16", "--time-offset-ms", "3600000"],
            capture_output=True, text=True, timeout=240)
        try:
            res = json.loads(fill.stdout)["results"][0]
            print(f"fill: {res['ops']} puts, errors {res['errors']}")
        except (ValueError, KeyError, IndexError):
            return f"the fill: exit {fill.returncode}, {fill.stdout[:300]} {fill.stderr[-300:]}"
        if "put: store_full" not in res["errors"]:
            return f"the fill of {KEYS} puts of 500 bytes was never refused: {res['errors']}"
        if c.unexpected_exits():
            return f"nodes stopped while the store filled: {c.unexpected_exits()}"
        # The fill's last puts were refused while others were still in flight, so a few
        # more may fit; a handful more must not.
        for i in range(20):
            rc, _, err = c.ctl("put", "fill", f"one-more-{i}", "--payload", '"' + "v" * 500 + '"')
            if rc != 0:
                break
        if rc != 4 or "store_full" not in err:
            return f"puts past the budget: exit {rc}, {err!r}; wanted 4 and store_full"
        print(f"refused: {err}")
        m = scrape(c.admin_port[leader])
        used, limit = m["dueq_store_bytes"], m["dueq_store_limit_bytes"]
        print(f"leader: dueq_store_bytes {used:.0f} of dueq_store_limit_bytes {limit:.0f}")
        if limit != BUDGET or used > limit or used < 0.85 * limit:
            return f"store bytes {used} of limit {limit}: wanted within 15 % under {BUDGET}"
        code, body = health(c.admin_port[leader])
        if code != 200 or "budget" not in body.get("warning", ""):
            return f"/health {code} {body}: wanted 200 with a warning about the budget"
        # Full, and everything but growth still works.
        rc, got, err = c.ctl("get", "fill", "k000000000000001")
        if rc != 0:
            return f"a get while full: exit {rc}, {err}"
        for i in range(1, 101):
            rc, _, err = c.ctl("delete", "fill", f"k{i:015d}")
            if rc != 0:
                return f"a delete while full: exit {rc}, {err}"
        rc, _, err = c.ctl("put", "fill", "after-deletes", "--payload", '"v"')
        if rc != 0:
            return f"a put after deleting 100 tasks: exit {rc}, {err}"
        # Every node restarts with the same tasks and serves again.
        for n in c.ids:
            c.kill(n)
        for n in c.ids:
            c.start_node(n)
        leader = c.wait_leader(60)
        if not leader:
            return "no leader after restarting every node"
        rc, got, err = c.ctl("get", "fill", "after-deletes", timeout="10s")
        if rc != 0:
            return f"a get after the restart: exit {rc}, {err}"
        # The deletions' tombstones are not reloaded: a few more puts fit, then no more.
        for i in range(200):
            rc, _, err = c.ctl("put", "fill", f"after-restart-{i}", "--payload",
                               '"' + "v" * 500 + '"', timeout="10s")
            if rc != 0:
                break
        if rc != 4 or "store_full" not in err:
            return f"puts after the restart: exit {rc}, {err!r}; wanted 4 and store_full"
        print(f"after the restart: {i} more puts fitted, then store_full")
        if c.unexpected_exits():
            return f"nodes stopped: {c.unexpected_exits()}"
        print("full store: refused with store_full, no node stopped, deletes made room, "
              "a full restart serves")
        return None
    finally:
        c.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "store budget")
