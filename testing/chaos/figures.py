#!/usr/bin/env python3
"""Tabulates chaos reports for docs/reliability.md.

  figures.py RESULTS_DIR...     every */report.json below the given directories

Prints two markdown tables: the verdict of every run (violations by check), and, per
kind of fault window (over every run), the time from the fault to the first ok take
and from the heal to the first ok take (median, p99), and refreshes per second during
the fault against the healthy rate measured before the first fault of the same run:
on the majority side (the nodes the fault did not cut off, pause or kill, from the
`affected` list in the run's nemesis.jsonl) and in all.
"""
import glob
import json
import os
import sys


def pct(xs, p):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def affected_by_start(run_dir):
    out = {}
    try:
        with open(os.path.join(run_dir, "nemesis.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if e.get("action") == "start":
                    out[e["t"]] = e.get("affected", [])
    except FileNotFoundError:
        pass
    return out


def majority_rate(w, healthy, affected):
    """Refreshes/s of the nodes outside `affected`, as a share of their healthy rate."""
    by_node, base = w.get("acks_per_s_by_node") or {}, healthy.get("acks_per_s_by_node") or {}
    nodes = [n for n in base if n not in affected]
    denominator = sum(base[n] for n in nodes)
    return sum(by_node.get(n, 0) for n in nodes) / denominator if denominator else None


def fmt(x):
    return "—" if x is None else f"{x:,}"


def main(dirs):
    reports = []
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "**", "report.json"), recursive=True)):
            with open(path) as f:
                r = json.load(f)
            r["affected"] = affected_by_start(os.path.dirname(path))
            reports.append(r)
    if not reports:
        print("no report.json found", file=sys.stderr)
        return 1
    print("| run | s | verdict | G1 lost / resurrected | G3 overlaps | G2 late / never | "
          "G2 delay p99 ms | replicas | fault cycles |")
    print("|---|---|---|---|---|---|---|---|---|")
    windows = {}
    for r in reports:
        checks = r.get("checks", {}).get("checks", {})
        v = lambda name, kind: checks.get(name, {}).get("violations", {}).get(kind, 0)
        g2 = checks.get("G2", {}).get("stats", {}).get("redelivery_delay_ms", {})
        av = r.get("checks", {}).get("availability", {})
        healthy = av.get("healthy") or {}
        wins = av.get("windows", [])
        for w in wins:
            side = majority_rate(w, healthy, r["affected"].get(w["start"], []))
            windows.setdefault(w["name"], []).append((w, healthy.get("acks_per_s"), side))
        verdict = "passed" if r.get("passed") else "FAILED"
        print(f"| {r['scenario']} (seed {r['seed']}) | {r.get('seconds', '?')} | {verdict} | "
              f"{v('G1', 'lost')} / {v('G1', 'resurrected')} | "
              f"{v('G3', 'overlapping_leases') + v('G3', 'stale_lease_accepted')} | "
              f"{v('G2', 'late_redelivery')} / {v('G2', 'never_redelivered')} | "
              f"{fmt(g2.get('p99'))} | "
              f"{'agree' if checks.get('replicas', {}).get('passed') else 'DISAGREE'} | "
              f"{len(wins)} |")
        for finding in r.get("findings", []):
            print(f"|  | | finding: {finding[:200]} | | | | | | |")
    print()
    print("| fault | windows | majority left | first ok take after fault, median / p99 ms | "
          "first ok take after heal, median / p99 ms | refreshes/s during fault vs healthy: "
          "majority side / all |")
    print("|---|---|---|---|---|---|")
    share = lambda xs: f"{sum(xs) / len(xs):.0%}" if xs else "—"
    for name, ws in sorted(windows.items()):
        first = [w["first_ok_take_ms"] for w, _, _ in ws]
        after = [w.get("first_ok_take_after_stop_ms") for w, _, _ in ws]
        rates = [w["acks_per_s"] / h for w, h, _ in ws if h and w.get("acks_per_s") is not None]
        sides = [x for _, _, x in ws if x is not None]
        maj = "yes" if all(w["majority"] for w, _, _ in ws) else "no"
        print(f"| {name} | {len(ws)} | {maj} | {fmt(pct(first, 50))} / {fmt(pct(first, 99))} | "
              f"{fmt(pct(after, 50))} / {fmt(pct(after, 99))} | "
              f"{share(sides) if maj == 'yes' else '—'} / {share(rates)} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    sys.exit(main(sys.argv[1:]))
