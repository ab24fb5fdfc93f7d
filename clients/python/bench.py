#!/usr/bin/env python3
"""Throughput of the Python client (measure/clients/throughput.py compares it with the C++
and Go clients in one run):

  bench.py put   --seeds S [--count 20000] [--inflight 64] [--payload-bytes 100] [--queue Q]
  bench.py cycle --seeds S [--tasks 10000] [--concurrency 16] [--seconds 8] [--queue Q]

put: --count puts from --inflight threads sharing one client (pipelined on its connection).
cycle: --tasks tasks due now, then a Worker whose handler acks each at once, due again at
once, for --seconds: take+ack cycles. Prints one JSON line with ops_per_s."""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dueq  # noqa: E402


def put(client, a):
    payload = "x" * a.payload_bytes
    expires = int(time.time() * 1000) + 3_600_000
    counter = iter(range(a.count))
    lock = threading.Lock()

    def loop():
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            client.put(a.queue, f"bench-put-{i}", payload, time=expires)
    threads = [threading.Thread(target=loop) for _ in range(a.inflight)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return a.count, time.monotonic() - t0


def cycle(client, a):
    payload = "x" * a.payload_bytes
    now = int(time.time() * 1000)
    for i in range(a.tasks):
        client.put(a.queue, f"bench-cycle-{i}", payload, time=now - 1)
    w = dueq.Worker(client, a.queue, lambda t: dueq.Result(None, int(time.time() * 1000)),
                    concurrency=a.concurrency, ttr_ms=30000, take_timeout_ms=200, grace=5)
    threading.Timer(a.seconds, w.stop).start()
    t0 = time.monotonic()
    w.run()
    return w.counts["acked"], time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["put", "cycle"])
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--queue", default="bench-python")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--payload-bytes", type=int, default=100)
    ap.add_argument("--tasks", type=int, default=10000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8)
    a = ap.parse_args()
    client = dueq.Client(a.seeds, idle_ping=0)
    ops, secs = (put if a.mode == "put" else cycle)(client, a)
    client.close()
    print(json.dumps(dict(client="python", mode=a.mode, ops=ops, seconds=round(secs, 3),
                          ops_per_s=round(ops / secs, 1))))


if __name__ == "__main__":
    main()
