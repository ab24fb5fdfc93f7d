#!/usr/bin/env python3
"""Checks a dueq chaos history (JSON lines) Jepsen-style.

  check.py HISTORY.jsonl [--slack-ms N] [--json OUT.json] [--summary OUT.txt]

Checks (each passes or fails on its own):
  G1        nothing lost, nothing resurrected, failed ops not applied (final reads)
  replicas  every node ends at the same applied index with the same state of every key
  G3        no two live leases on one task; no ack/release accepted on a superseded lease
  G2        an abandoned lease is handed out again within --slack-ms of its deadline
Figures (no verdict): availability around each nemesis window, op counts.

Exit status: 0 every check passed, 1 some check failed, 2 the history could not be read.
The summary goes to stdout (and --summary); --json writes the machine-readable report.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checklib import figures  # noqa: E402
from checklib.durability import check_g1, check_replicas  # noqa: E402
from checklib.history import HistoryError, load  # noqa: E402
from checklib.leader_reads import check_leader_reads  # noqa: E402
from checklib.leases import check_g3  # noqa: E402
from checklib.redelivery import check_g2  # noqa: E402
from checklib.report import fetch_lines, render_check  # noqa: E402


def _finite(x):
    """JSON has no infinity: an unbounded time is written as null."""
    if isinstance(x, float) and x in (float("inf"), float("-inf")):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def run(path, slack_ms=5000, lease_slew=0.01):
    """Checks the history at `path`; returns (report dict, summary text). Raises
    HistoryError when the history cannot be read."""
    h = load(path)
    checks = [check_g1(h), check_replicas(h), check_g3(h, lease_slew), check_g2(h, slack_ms),
              check_leader_reads(h)]
    avail = figures.availability(h)
    cnt = figures.counts(h)
    wanted = set()
    for c in checks:
        wanted |= c.line_numbers()
    text_of = fetch_lines(path, wanted)
    passed = all(c.passed for c in checks)
    meta = {k: v for k, v in h.meta.items() if k not in ("keys", "line", "type")}
    report = {
        "history": path,
        "passed": passed,
        "failed": [c.name for c in checks if not c.passed],
        "meta": meta,
        "slack_ms": slack_ms,
        "lease_slew": lease_slew,
        "checks": {c.name: _finite(c.to_json(text_of)) for c in checks},
        "availability": avail,
        "counts": cnt,
        "warnings": {k: {"count": n, "examples": ex} for k, (n, ex) in h.warnings.items()},
    }
    lines = [f"dueq history check: {path}",
             f"scenario {meta.get('scenario', '?')}, seed {meta.get('seed', '?')}, "
             f"nodes {' '.join(meta.get('nodes') or [])}, ttr {meta.get('ttr_ms')} ms, "
             f"grace {meta.get('grace_ms')} ms, slack {slack_ms} ms",
             "RESULT: " + ("PASSED" if passed else "FAILED (" + ", ".join(report["failed"])
                           + ")"), ""]
    for c in checks:
        lines += render_check(c, text_of)
    lines += figures.render(avail, cnt)
    if h.warnings:
        lines += ["", "Warnings about the history:"]
        for k, (n, ex) in h.warnings.items():
            lines.append(f"  {k}: {n}" + ("; " + "; ".join(ex[:2]) if ex else ""))
    return report, "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("history", help="the history, JSON lines")
    p.add_argument("--slack-ms", type=int, default=5000,
                   help="G2: how long after its deadline an abandoned task may take to be "
                        "handed out again (default 5000)")
    p.add_argument("--lease-slew", type=float, default=0.01,
                   help="G3: the share of its ttr a lease may lose to the node's clock "
                        "absorbing a step (src/node/clock.h; default 0.01)")
    p.add_argument("--json", metavar="OUT.json", help="write the report as JSON here")
    p.add_argument("--summary", metavar="OUT.txt", help="write the summary here too")
    a = p.parse_args(argv)
    try:
        report, text = run(a.history, a.slack_ms, a.lease_slew)
    except HistoryError as e:
        print(f"check.py: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    if a.summary:
        with open(a.summary, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
