#!/usr/bin/env python3
"""Each client's throughput against the C++ client's, in one run on one 3-node cluster
(testing/chaos/harness), as ratios (these machines are noisy: only ratios measured side by
side mean anything):

  measure/clients/throughput.py [--build build] [--rounds 3] [--seconds 8]

put: pipelined puts of 100-byte payloads on one connection, 64 in flight (C++:
`dueq-bench put -c 1 -d 64`; Go: dueq-client-bench put; Python: clients/python/bench.py
put, 64 threads on one client). cycle: take+ack of tasks due again at once, 16 at a time
(C++: `dueq-bench refresh -c 16 -d 1`, 16 connections; Go and Python: their Worker with
concurrency 16 on one client). The clients take turns, round after round; the table gives
each one's median ops/s and its median ratio to C++ of the same round."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.go import go_build  # noqa: E402


def commands(build, seeds, mode, seconds, rnd):
    bench = os.path.join(build, "measure/bench/dueq-bench")
    leader_first = seeds
    q = f"tp-{mode}-{rnd}"
    out = {}
    if mode == "put":
        out["cpp"] = [bench, "put", "-q", "--json", "-a", leader_first, "-c", "1", "-d", "64",
                      "-p", "100", "-s", str(seconds), "--queue", q + "-cpp", "--warmup", "1"]
        out["python"] = [sys.executable, os.path.join(ROOT, "clients/python/bench.py"), "put",
                         "--seeds", seeds, "--count", "20000", "--queue", q + "-py"]
        out["go"] = [os.path.join(build, "clients/dueq-client-bench"), "put", "--seeds", seeds,
                     "--count", "100000", "--inflight", "64", "--payload-bytes", "100",
                     "--queue", q + "-go"]
    else:
        out["cpp"] = [bench, "refresh", "-q", "--json", "-a", leader_first, "-c", "16", "-d",
                      "1", "-k", "10000", "-p", "100", "-s", str(seconds), "--queue",
                      q + "-cpp"]
        out["python"] = [sys.executable, os.path.join(ROOT, "clients/python/bench.py"), "cycle",
                         "--seeds", seeds, "--tasks", "10000", "--concurrency", "16",
                         "--seconds", str(seconds), "--queue", q + "-py"]
        out["go"] = [os.path.join(build, "clients/dueq-client-bench"), "cycle", "--seeds",
                     seeds, "--tasks", "10000", "--concurrency", "16", "--seconds",
                     str(seconds), "--payload-bytes", "100", "--queue", q + "-go"]
    return out


def ops_per_s(out):
    # dueq-bench's top-level ops_per_s is its main op's: put, or the whole refresh cycle.
    j = json.loads(out.strip().splitlines()[-1])
    # dueq-bench lists its preload first: the scenario measured is the last.
    return (j["results"][-1] if "results" in j else j)["ops_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    # The Go client's bench, built from clients/go into the build tree (if Go is installed).
    go_build(build, os.path.join(ROOT, "clients", "go"), "./cmd/dueq-client-bench",
             os.path.join(build, "clients/dueq-client-bench"))
    work = tempfile.mkdtemp(prefix="dueq-client-throughput-")
    c = Cluster(build, work, log=lambda m: None, snapshot_entries=10000, log_keep=1000)
    rates = {}
    try:
        c.start(seed=1)
        assert c.wait_leader(30)
        leader = c.leader()
        seeds = f"127.0.0.1:{c.client_port[leader]}"
        for rnd in range(a.rounds):
            for mode in ("put", "cycle"):
                for name, cmd in commands(build, seeds, mode, a.seconds, rnd).items():
                    if not os.path.exists(cmd[0]):
                        continue
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                    if r.returncode != 0:
                        print(f"{name} {mode}: exit {r.returncode}: {r.stderr[-300:]}")
                        continue
                    v = ops_per_s(r.stdout)
                    rates.setdefault((mode, name), []).append(v)
                    print(f"round {rnd + 1} {mode:5} {name:6} {v:10.0f} ops/s", flush=True)
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("\n| mode | client | ops/s (median) | ratio to C++ (median of rounds) |")
    print("|---|---|---|---|")
    for mode in ("put", "cycle"):
        base = rates.get((mode, "cpp"), [])
        for name in ("cpp", "go", "python"):
            got = rates.get((mode, name))
            if not got:
                continue
            ratios = [g / b for g, b in zip(got, base)] if base else []
            print(f"| {mode} | {name} | {statistics.median(got):,.0f} | "
                  f"{statistics.median(ratios):.2f} |" if ratios else "| - |")


if __name__ == "__main__":
    main()
