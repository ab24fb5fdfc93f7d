#!/usr/bin/env python3
"""The example refreshers (examples/refresher-python, examples/refresher-go) against a
3-node cluster, with a kill -9 of the leader in the middle of the run.

  example_refreshers.py [--build build] [--keep DIR] [--seconds 20] [--users 200] [--only python|go]

Each refresher signs its users in with its fake OAuth provider, puts their tokens, and
refreshes them for --seconds; the leader is killed at a third of the run and started again
at two thirds, and the refresher gets SIGTERM at the end. Each must make at least 95% of
its refreshes before the old token expired, end with no user's token expired, send the
provider no token it did not issue, and exit within its grace leaving no task taken.
Prints each summary. The Go one runs when `go` is installed."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.go import go_build  # noqa: E402
from harness.test_main import test_main  # noqa: E402

SECONDS = 20
USERS = 200


def commands(build):
    py = [sys.executable, os.path.join(ROOT, "examples", "refresher-python", "refresher.py")]
    out = [("python", py, None, {})]
    # Built first, and the binary run: `go run` would not pass SIGTERM on.
    binary = os.path.join(build, "examples", "refresher-go")
    if go_build(build, os.path.join(ROOT, "examples", "refresher-go"), ".", binary):
        out.append(("go", [binary], None, {}))
    return out


def run_one(c, name, cmd, cwd, env, seconds, users):
    seeds = ",".join(f"127.0.0.1:{c.client_port[n]}" for n in c.ids)
    # Stopped by SIGTERM at `seconds` (its own --seconds is later): it must end within its
    # worker's grace (5 s) and leave no task taken.
    proc = subprocess.Popen(cmd + ["--seeds", seeds, "--seconds", str(seconds + 120), "--users",
                                   str(users), "--json"], cwd=cwd, env=dict(os.environ, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.time()
    # Signing in and putting the tokens takes a moment: time the kill from the first take.
    time.sleep(seconds / 3 + 2)
    leader = c.leader()
    c.kill(leader)
    time.sleep(seconds / 3)
    c.restart(leader)
    time.sleep(max(0.0, started + seconds + 2 - time.time()))
    proc.terminate()
    term = time.time()
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, f"{name}: did not end"
    if proc.returncode != 0:
        return None, f"{name}: exit {proc.returncode}: {err[-500:]}"
    summary = json.loads(out.strip().splitlines()[-1])
    summary["exit_after_sigterm_s"] = round(time.time() - term, 2)
    print(f"{name} refresher, {leader} killed at {seconds / 3 + 2:.0f} s: {json.dumps(summary)}")
    return summary, None


def run(build, work, seconds=SECONDS, users=USERS, only=None):
    for name, cmd, cwd, env in commands(build):
        if only and name != only:
            continue
        c = Cluster(build, os.path.join(work, name), log=lambda m: None)
        try:
            c.start(seed=1)
            if not c.wait_leader(30):
                return "no leader"
            s, why = run_one(c, name, cmd, cwd, env, seconds, users)
            if why:
                return why
            if (not s["refreshed"] or s["unknown"] or s["expired_at_end"] or s["taken_at_end"]
                    or s["on_time_share"] < 0.95 or s["exit_after_sigterm_s"] > 5 + 3):
                return f"{name}: {s}"
        finally:
            c.stop()
    return None


if __name__ == "__main__":
    args = dict(seconds=SECONDS, users=USERS, only=None)
    for flag, conv in (("--seconds", float), ("--users", int), ("--only", str)):
        if flag in sys.argv:
            i = sys.argv.index(flag)
            args[flag[2:]] = conv(sys.argv[i + 1])
            del sys.argv[i:i + 2]
    test_main(__doc__, lambda b, w: run(b, w, **args), "example refreshers")
