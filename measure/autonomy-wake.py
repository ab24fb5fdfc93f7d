#!/usr/bin/env python3
"""In autonomous mode, how long a blocking take waits after a put makes a task due
(issue 44): a node of a 3-node cluster is cut off until it serves queue `tokens` alone
(docs/autonomy.md); then, --samples times, a take parks on it and a put of a task due now
follows; the time from the put's send to the take's answer is reported (p50, p99, max).

  measure/autonomy-wake.py [--build build] [--samples 200]"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
import dueq  # noqa: E402
from harness.cluster import Cluster  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--samples", type=int, default=200)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dueq-autonomy-wake-")
    c = Cluster(os.path.abspath(a.build), work, log=lambda m: None, autonomy_after_ms=1000)
    try:
        c.start(seed=1)
        assert c.wait_leader(30)
        node = next(n for n in c.ids if n != c.leader())
        c.isolate(node)
        client = dueq.Client([f"127.0.0.1:{c.client_port[node]}"], idle_ping=0)
        deadline = time.time() + 30
        while client.status().get("mode") != "autonomous":
            assert time.time() < deadline, "the cut-off node never went autonomous"
            time.sleep(0.1)
        waits = []
        for i in range(a.samples):
            answered = {}

            def take():
                r = client.take("tokens", timeout_ms=5000)
                answered["at"] = time.monotonic()
                answered["tasks"] = len(r)
                for t in r:
                    t.ack()
            th = threading.Thread(target=take)
            th.start()
            time.sleep(0.02)  # the take is parked by now
            sent = time.monotonic()
            client.put("tokens", f"wake-{i}", {"i": i}, time=int(time.time() * 1000) - 1)
            th.join(10)
            assert answered.get("tasks") == 1, f"sample {i}: {answered}"
            waits.append((answered["at"] - sent) * 1000)
        waits.sort()
        p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
        print(f"autonomous node {node}, {len(waits)} samples: put sent -> waiting take answered: "
              f"p50 {statistics.median(waits):.2f} ms, p99 {p99:.2f} ms, max {waits[-1]:.2f} ms")
        client.close()
    finally:
        c.stop()


if __name__ == "__main__":
    main()
