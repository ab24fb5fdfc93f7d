#!/usr/bin/env python3
"""dueqctl's exit statuses tell a script what happened (dueqctl --help, docs/operations.md).

  exit_codes.py [--build build] [--keep DIR]

Against three dueqd (testing/chaos/harness), each case must give its own status:
  0 ok; 1 refused (an ack with the wrong lease); 2 bad usage; 3 not found (get of a key
  never put); 4 not applied (a write to a follower cut off from the others); 5 outcome
  unknown (a put to a frozen leader: sent, never answered); 6 cannot connect (a port with
  no node).
Exit 0 on pass."""
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.test_main import test_main  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(build, work):
    c = Cluster(build, work, log=lambda m: None)
    try:
        c.start(seed=1)
        leader = c.wait_leader(30)
        if not leader:
            return "no leader"
        ctl = os.path.join(build, "cmd/dueqctl/dueqctl")

        def status(addrs, *args, timeout="3s"):
            cmd = [ctl, "--timeout", timeout]
            for a in addrs:
                cmd += ["--addr", a]
            return subprocess.run(cmd + list(args), capture_output=True, text=True,
                                  timeout=120).returncode

        everyone = [f"127.0.0.1:{c.client_port[n]}" for n in c.ids]
        got = {}
        got["ok"] = status(everyone, "put", "q", "k1", "--payload", '"v"')
        got["refused"] = status(everyone, "ack", "q", "k1", "--lease", "999")
        got["usage"] = status(everyone, "put", "q")
        got["not found"] = status(everyone, "get", "q", "never-put")
        got["cannot connect"] = status([f"127.0.0.1:{free_port()}"], "get", "q", "k1")
        follower = next(n for n in c.ids if n != leader)
        c.isolate(follower)
        # Once it has heard nothing for an election timeout it knows no leader, and answers
        # not_leader with nowhere to redirect to.
        time.sleep(3)
        got["not applied"] = status([f"127.0.0.1:{c.client_port[follower]}"], "put", "q", "k2",
                                    "--payload", '"v"')
        c.heal_links()
        leader = c.wait_leader(30)
        c.pause(leader)
        try:
            got["outcome unknown"] = status([f"127.0.0.1:{c.client_port[leader]}"], "put", "q",
                                            "k3", "--payload", '"v"', timeout="1s")
        finally:
            c.resume(leader)
        want = {"ok": 0, "refused": 1, "usage": 2, "not found": 3, "not applied": 4,
                "outcome unknown": 5, "cannot connect": 6}
        if got != want:
            return f"exit statuses {got}, wanted {want}"
        print(f"exit statuses: {got}")
        return None
    finally:
        c.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "exit codes")
