#!/usr/bin/env python3
"""Runs one client's conformance driver against a real 3-node dueqd cluster
(clients/conformance/README.md).

  run.py --build build --driver "COMMAND" [--scenarios FILE] [--keep DIR] [--name NAME]

Exit 0 when every scenario passed (or was skipped by a driver that says why), 1 otherwise."""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--driver", required=True, help="the driver's command line")
    ap.add_argument("--scenarios", default=os.path.join(HERE, "scenarios.json"))
    ap.add_argument("--keep", help="keep the cluster's files here")
    ap.add_argument("--name", default="client")
    ap.add_argument("--expect-fail", action="store_true",
                    help="pass only if the driver fails every scenario (planted.json)")
    a = ap.parse_args()
    with open(a.scenarios) as f:
        names = [s["name"] for s in json.load(f)["scenarios"]]
    work = a.keep or tempfile.mkdtemp(prefix="dueq-conformance-")
    c = Cluster(os.path.abspath(a.build), work, log=lambda m: None)
    killed, results, driver = [], {}, None
    try:
        c.start(seed=1)
        if not c.wait_leader(30):
            print("FAIL: no leader")
            return 1
        env = dict(os.environ,
                   DUEQ_SEEDS=",".join(f"127.0.0.1:{c.client_port[n]}" for n in c.ids))
        driver = subprocess.Popen(shlex.split(a.driver) + [a.scenarios], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        deadline = time.time() + 600
        for line in driver.stdout:
            line = line.rstrip("\n")
            print(f"[{a.name}] {line}", flush=True)
            if line.startswith("ACTION "):
                why = act(c, line.split(" ", 1)[1], killed)
                driver.stdin.write("DONE\n" if why is None else f"FAILED {why}\n")
                driver.stdin.flush()
            elif line.split(" ", 1)[0] in ("PASS", "FAIL", "SKIP"):
                verdict, rest = line.split(" ", 1)
                name = next((n for n in names if rest == n or rest.startswith(n + ": ")), rest)
                results[name] = (verdict, rest)
            if time.time() > deadline:
                print("FAIL: the driver ran past 600 s")
                return 1
        rc = driver.wait(timeout=30)
    finally:
        if driver and driver.poll() is None:
            driver.kill()
            driver.wait()
        c.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    missing = [n for n in names if n not in results]
    failed = [r for v, r in results.values() if v == "FAIL"]
    skipped = [r for v, r in results.values() if v == "SKIP"]
    print(f"[{a.name}] {sum(v == 'PASS' for v, _ in results.values())} passed, {len(failed)} "
          f"failed, {len(skipped)} skipped, {len(missing)} not run; driver exit {rc}")
    for s in skipped:
        print(f"[{a.name}] skipped: {s}")
    if a.expect_fail:
        caught = len(failed) == len(names) and not missing
        print(f"[{a.name}] the driver {'failed' if caught else 'did NOT fail'} every planted "
              "scenario")
        return 0 if rc == 0 and caught else 1
    return 0 if rc == 0 and not failed and not missing else 1


def act(c, name, killed):
    if name == "kill_leader":
        leader = c.leader()
        if leader is None:
            return "no leader to kill"
        c.kill(leader)
        killed.append(leader)
        return None if c.wait_leader(30) else "no new leader within 30 s"
    if name == "restart_killed":
        for n in killed:
            c.restart(n)
        killed.clear()
        return None
    if name == "wait_leader":
        return None if c.wait_leader(30) else "no leader within 30 s"
    return f"unknown action {name}"


if __name__ == "__main__":
    sys.exit(main())
