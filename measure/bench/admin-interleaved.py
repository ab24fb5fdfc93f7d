#!/usr/bin/env python3
"""The cost of being scraped, measured inside one run (measure/bench/admin-cost.sh calls it).

One dueq-bench run against a node that serves HTTP admin. The run is cut into windows of
--window seconds. In every other window this script scrapes /metrics and /status once a
second, and in the windows between it scrapes nothing. dueq-bench's progress line gives
the ops done in each window. Each scraped window is compared with the mean of the quiet
windows on either side of it, so the slow drift of a run (RocksDB flushes and
compactions, the store growing) cancels out. What this prints is the median of those
ratios, scraped / quiet. An idle listener has no work on the event loop, so this is the
difference between a listener that is scraped and one that is off.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

PROGRESS = re.compile(r"([\d.]+)s measuring,\s+\d+ ops/s, (\d+) ops")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bench", required=True, help="dueq-bench binary")
    ap.add_argument("--scenario", default="put", choices=["put", "refresh"])
    ap.add_argument("--addr", required=True, help="the node's client host:port")
    ap.add_argument("--admin", required=True, help="the node's admin host:port")
    ap.add_argument("--windows", type=int, default=20, help="windows (half of them scraped)")
    ap.add_argument("--window", type=float, default=5.0, help="seconds per window")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--client-cpu", default="", help="taskset -c list for dueq-bench")
    ap.add_argument("--paths", default="/metrics,/status", help="what each scrape asks for")
    ap.add_argument("--per-second", type=int, default=1,
                    help="scrapes a second in scraped windows; more than 1 magnifies the cost "
                         "(one curl on one kept-alive connection, on --client-cpu)")
    args = ap.parse_args()

    seconds = args.windows * args.window
    cmd = [args.bench, args.scenario, "--addr", args.addr, "-c", str(args.connections),
           "-d", "1", "--keys", "10000", "--warmup", "2", "--seconds", str(seconds)]
    if args.client_cpu:
        cmd = ["taskset", "-c", args.client_cpu] + cmd
    bench = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples = []  # (seconds into the measurement, cumulative ops)
    scraping = threading.Event()
    done = threading.Event()

    def scraper():
        while not done.is_set():
            if scraping.is_set() and args.per_second > 1:
                urls = []
                for _ in range(args.per_second):
                    for path in args.paths.split(","):
                        urls += ["-o", "/dev/null", f"http://{args.admin}{path}"]
                pin = ["taskset", "-c", args.client_cpu] if args.client_cpu else []
                subprocess.run(pin + ["curl", "-fs"] + urls, check=False)
            elif scraping.is_set():
                for path in args.paths.split(","):
                    try:
                        urllib.request.urlopen(f"http://{args.admin}{path}", timeout=2).read()
                    except OSError as e:
                        print(f"admin-interleaved: scrape failed: {e}", file=sys.stderr)
            done.wait(1.0)

    def windows_driver():
        # Windows start when measuring starts (the first progress line).
        while not samples and not done.is_set():
            time.sleep(0.01)
        start = time.time() - samples[0][0] if samples else time.time()
        for w in range(args.windows):
            (scraping.set if w % 2 == 1 else scraping.clear)()
            end = start + (w + 1) * args.window
            while time.time() < end and not done.is_set():
                time.sleep(0.05)
        scraping.clear()

    threads = [threading.Thread(target=scraper), threading.Thread(target=windows_driver)]
    for t in threads:
        t.start()
    for line in bench.stderr:
        m = PROGRESS.search(line)
        if m:
            samples.append((float(m.group(1)), int(m.group(2))))
    bench.wait()
    done.set()
    for t in threads:
        t.join()
    if bench.returncode != 0 or len(samples) < args.windows:
        print(f"admin-interleaved: dueq-bench failed or printed too little ({len(samples)} "
              "progress lines)", file=sys.stderr)
        return 1

    def ops_at(t):
        """Cumulative ops at time t, interpolated between progress lines."""
        prev = (0.0, 0)
        for s in samples:
            if s[0] >= t:
                span = s[0] - prev[0]
                return prev[1] + (s[1] - prev[1]) * ((t - prev[0]) / span if span else 1)
            prev = s
        return samples[-1][1]

    rate = [(ops_at((w + 1) * args.window) - ops_at(w * args.window)) / args.window
            for w in range(args.windows)]
    # Scraped windows are the odd ones; each against the quiet windows around it.
    ratios = [rate[w] / ((rate[w - 1] + rate[w + 1]) / 2)
              for w in range(1, args.windows - 1, 2)]
    result = {"scenario": args.scenario, "window_s": args.window,
              "scrapes_per_second": args.per_second, "rates": rate,
              "ratios": ratios, "median_ratio": statistics.median(ratios)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
