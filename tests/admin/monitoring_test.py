#!/usr/bin/env python3
"""The monitoring kit (docs/monitoring.md): alert rules and Grafana dashboards.

  monitoring_test.py rules [--build build]
      promtool check rules and promtool test rules pass; every alert is tested once firing
      and once quiet; and each alert, planted to never fire and then to always fire, makes
      promtool test rules fail (so no test passes vacuously).
  monitoring_test.py grafana
      every query of contrib/grafana/*.json parses (promtool) and names only metrics
      docs/admin.md lists; a planted typo and a planted syntax error are caught.
  monitoring_test.py metrics [--build build] [--keep DIR]
      against 3 nodes: every op x code series is there at 0 before any request; an ack of a
      task 5 s late lands in dueq_refresh_margin_seconds between -10 and -1 s; a blocking
      take's wait shows in dueq_take_wait_seconds and not in its request duration; the
      process_* series; 20,000 late tasks read 20,000 in dueq_queue_late_tasks.
  monitoring_test.py live [--build build] [--keep DIR]
      a real Prometheus with the rules loaded scrapes a 3-node cluster: every dashboard
      query runs without error; no alert fires while the cluster serves; DueqNoLeader fires
      once two of the nodes are stopped, and stops once they are back.
Every process is started here and stopped by its PID; everything listens on 127.0.0.1."""
import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
RULES = os.path.join(ROOT, "contrib", "prometheus", "alerts.yml")
DASHBOARDS = os.path.join(ROOT, "contrib", "grafana")
TESTS = os.path.join(ROOT, "contrib", "prometheus", "alerts_test.yml")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.prometheus import Prometheus, scrape  # noqa: E402


def promtool(*args, cwd=None):
    r = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    return r.returncode, (r.stdout + r.stderr).strip()


def alert_names(rules):
    return [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]


def check_rules():
    problems = []
    rc, out = promtool("check", "rules", RULES)
    if rc != 0:
        problems.append(f"promtool check rules: {out}")
    rc, out = promtool("test", "rules", TESTS)
    if rc != 0:
        problems.append(f"promtool test rules: {out}")
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    with open(TESTS) as f:
        tests = yaml.safe_load(f)
    names = alert_names(rules)
    firing, quiet = set(), set()
    for t in tests["tests"]:
        for a in t.get("alert_rule_test", []):
            (firing if a.get("exp_alerts") else quiet).add(a["alertname"])
    for n in names:
        if n not in firing:
            problems.append(f"{n}: no test shows it firing")
        if n not in quiet:
            problems.append(f"{n}: no test shows it quiet")
    # Planted defects: each alert made to never fire, then to always fire, must fail.
    work = tempfile.mkdtemp(prefix="dueq-alerts-")
    try:
        shutil.copy(TESTS, work)
        for name in names:
            for plant, expr in (("never fires", "vector(0) > 1"), ("always fires", "vector(1)")):
                planted = copy.deepcopy(rules)
                for g in planted["groups"]:
                    for r in g["rules"]:
                        if r.get("alert") == name:
                            r["expr"] = expr
                with open(os.path.join(work, "alerts.yml"), "w") as f:
                    yaml.safe_dump(planted, f)
                rc, _ = promtool("test", "rules", "alerts_test.yml", cwd=work)
                if rc == 0:
                    problems.append(f"{name} planted to {plant}: promtool test rules passed")
    finally:
        shutil.rmtree(work)
    print(f"{len(names)} alerts: check and test pass; each fails when planted to never or "
          "always fire" if not problems else "")
    return problems


def dashboard_queries():
    """(dashboard, panel title, PromQL) of every panel target, variables filled in."""
    out = []
    for name in sorted(os.listdir(DASHBOARDS)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(DASHBOARDS, name)) as f:
            board = json.load(f)
        for p in board["panels"]:
            for t in p.get("targets", []):
                expr = t["expr"].replace("$cluster", "demo").replace("$queue", ".*")
                out.append((name, p["title"], expr))
    return out


def documented_metrics():
    with open(os.path.join(ROOT, "docs", "admin.md")) as f:
        text = f.read()
    table = text[text.index("| series | type |"):]
    names = set()
    for line in table.splitlines():
        if not line.startswith("|"):
            break
        names.update(re.findall(r"`((?:dueq|process)_[a-z_]+)`", line.split("|")[1]))
    return names | {"up"}


def query_problems(queries, documented):
    """Queries that do not parse (promtool, as recording rules) or name an unknown metric."""
    problems = []
    for board, title, expr in queries:
        for m in re.findall(r"\b((?:dueq|process)_[a-z_]+)", expr):
            base = re.sub(r"_(bucket|sum|count)$", "", m)
            if m not in documented and base not in documented:
                problems.append(f"{board}, {title}: {m} is not a metric (docs/admin.md)")
    work = tempfile.mkdtemp(prefix="dueq-grafana-")
    try:
        rules = {"groups": [{"name": "dashboards", "rules": [
            {"record": f"dashboard:query{i}", "expr": e} for i, (_, _, e) in enumerate(queries)]}]}
        path = os.path.join(work, "queries.yml")
        with open(path, "w") as f:
            yaml.safe_dump(rules, f)
        rc, out = promtool("check", "rules", path)
        if rc != 0:
            problems.append(f"a dashboard query does not parse: {out[-500:]}")
    finally:
        shutil.rmtree(work)
    return problems


def check_grafana():
    queries = dashboard_queries()
    documented = documented_metrics()
    problems = query_problems(queries, documented)
    if len(queries) < 30:
        problems.append(f"only {len(queries)} dashboard queries found")
    # Planted defects the check must catch.
    if not query_problems([("planted", "typo", "rate(dueq_queue_akcs_total[1m])")], documented):
        problems.append("a planted metric typo passed")
    if not query_problems([("planted", "syntax", "sum by (queue (dueq_tasks)")], documented):
        problems.append("a planted syntax error passed")
    if not problems:
        print(f"{len(queries)} dashboard queries parse and name documented metrics")
    return problems


def http(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
            return r.status, r.read().decode()
    except OSError as e:
        return None, str(e)


def firing(port):
    """Names of the alerts Prometheus says are firing."""
    status, body = http(port, "/api/v1/alerts")
    if status != 200:
        return None
    return sorted({a["labels"]["alertname"] for a in json.loads(body)["data"]["alerts"]
                   if a["state"] == "firing"})


def wait_for(what, until, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = until()
        if got is not None:
            return got
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not within {timeout} s")


def check_metrics(build, workdir):
    c = Cluster(build, workdir, admin=True, log=lambda m: None)
    try:
        c.start(seed=1)
        leader = c.wait_leader(30)
        if not leader:
            return ["no leader"]
        port = c.admin_port[leader]
        problems = []
        m = scrape(port)
        for series in ('dueq_requests_total{op="put",code="store_full"}',
                       'dueq_requests_total{op="ack",code="lease_mismatch"}',
                       'dueq_requests_total{op="invalid",code="bad_request"}'):
            if m.get(series) != 0:
                problems.append(f"before any request, {series} is {m.get(series)}, wanted 0")
        for series in ("process_resident_memory_bytes", "process_cpu_seconds_total",
                       "process_open_fds", "process_max_fds", "process_start_time_seconds",
                       "dueq_storage_size_bytes"):
            if not m.get(series, 0) > 0:
                problems.append(f"{series} is {m.get(series)}, wanted > 0")
        # An ack 5 s after the task's time: a margin between -10 and -1 s.
        rc, _, err = c.ctl("put", "tokens", "late-one", "--payload", '"t"', "--time", "-5s")
        rc2, taken, err2 = c.ctl("take", "tokens")
        if rc or rc2 or not taken or not taken.get("tasks"):
            return problems + [f"put and take: {err} {err2} {taken}"]
        lease = taken["tasks"][0]["lease"]
        rc, _, err = c.ctl("ack", "tokens", "late-one", "--lease", str(lease), "--time", "+1h")
        if rc:
            return problems + [f"ack: {err}"]
        # A blocking take that waits 1 s for nothing.
        t0 = time.time()
        c.ctl("take", "empty-queue", "--wait", "1s")
        waited = time.time() - t0
        m = scrape(port)
        margin = {le: m.get(f'dueq_refresh_margin_seconds_bucket{{le="{le}"}}') for le in ("-10", "-1")}
        if margin != {"-10": 0, "-1": 1}:
            problems.append(f"refresh margin buckets {margin}: wanted the ack in (-10, -1]")
        waits = m.get("dueq_take_wait_seconds_count", 0)
        short_waits = m.get('dueq_take_wait_seconds_bucket{le="0.5"}', 1)
        if waits < 1 or short_waits > 0:
            problems.append(f"take wait: {waits} waits, {short_waits} of them <= 0.5 s; wanted "
                            f"one of about 1 s (dueqctl took {waited:.1f} s)")
        slow_takes = (m.get('dueq_request_duration_seconds_count{op="take"}', 0)
                      - m.get('dueq_request_duration_seconds_bucket{op="take",le="0.5"}', 0))
        if slow_takes:
            problems.append(f"{slow_takes:.0f} takes took over 0.5 s: the wait is counted in")
        # 20,000 late tasks are counted, not capped at 10,000.
        bench = os.path.join(build, "measure/bench/dueq-bench")
        r = subprocess.run([bench, "preload", "-q", "-a",
                            ",".join(f"127.0.0.1:{c.client_port[n]}" for n in c.ids),
                            "--keys", "20000", "--queue", "late", "--payload-bytes", "50",
                            "--time-offset-ms", "-600000", "-c", "4", "-d", "32"],
                           capture_output=True, text=True, timeout=240)
        if r.returncode != 0:
            return problems + [f"preload: {r.stderr[-300:]}"]
        m = scrape(port)
        late = m.get('dueq_queue_late_tasks{queue="late"}')
        capped = m.get('dueq_queue_count_capped{queue="late",figure="late"}')
        print(f"after 20,000 late puts: dueq_queue_late_tasks {late}, capped {capped}")
        if late != 20000 or capped != 0:
            problems.append(f"dueq_queue_late_tasks {late} (capped {capped}), wanted 20000 (0)")
        if not problems:
            print("metrics: zero series from the start, process_*, refresh margin, take wait "
                  "apart, 20,000 late tasks counted")
        return problems
    finally:
        c.stop()


def check_live(build, workdir):
    c = Cluster(build, workdir, admin=True, log=lambda m: None)
    prom = None
    try:
        c.start(seed=1)
        if not c.wait_leader(30):
            return ["no leader"]
        prom = Prometheus(workdir, [f"127.0.0.1:{c.admin_port[n]}" for n in c.ids], [RULES],
                          {"cluster": "demo"})
        port = prom.port
        prom.wait_ready()
        # Serving: scraped, and no alert about the cluster after the rules' 15 s.
        wait_for("three nodes scraped", lambda: True if http(
            port, "/api/v1/query?query=" + urllib.parse.quote("count(up == 1) == 3"))[1].count(
                '"value"') else None, 30)
        time.sleep(20)
        problems = []
        queries = dashboard_queries()
        for board, title, expr in queries:
            status, body = http(port, "/api/v1/query?query=" + urllib.parse.quote(expr))
            if status != 200:
                problems.append(f"{board}, {title}: Prometheus answered {status}: {body[:200]}")
        print(f"{len(queries)} dashboard queries answered by Prometheus")
        before = firing(port)
        print(f"serving: firing {before}")
        if before is None or "DueqNoLeader" in before:
            problems.append(f"alerts firing while the cluster serves: {before}")
        leader = c.wait_leader(10)
        stopped = [n for n in c.ids if n != leader][:1] + [leader]
        for n in stopped:
            c.kill(n)
        t0 = time.time()
        fired = wait_for("DueqNoLeader firing", lambda: (
            True if "DueqNoLeader" in (firing(port) or []) else None), 90)
        print(f"majority stopped ({', '.join(stopped)}): DueqNoLeader firing after "
              f"{time.time() - t0:.1f} s; firing {firing(port)}")
        for n in stopped:
            c.start_node(n)
        def resolved():
            now = firing(port)
            return True if now is not None and "DueqNoLeader" not in now else None
        wait_for("DueqNoLeader resolved", resolved, 90)
        print(f"members back: DueqNoLeader no longer firing; firing {firing(port)}")
        return problems if fired else ["DueqNoLeader never fired"]
    finally:
        if prom:
            prom.stop()
        c.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("check", choices=["rules", "grafana", "metrics", "live"])
    ap.add_argument("--build", default="build")
    ap.add_argument("--keep", help="work in this directory and keep it")
    a = ap.parse_args()
    if not shutil.which("promtool") or (a.check == "live" and not shutil.which("prometheus")):
        print("SKIP: needs Debian's prometheus (scripts/install-deps.sh --test)")
        sys.exit(77)
    if a.check == "rules":
        problems = check_rules()
    elif a.check == "grafana":
        problems = check_grafana()
    else:
        work = a.keep or tempfile.mkdtemp(prefix=f"dueq-monitoring-{a.check}-")
        os.makedirs(work, exist_ok=True)
        run = check_live if a.check == "live" else check_metrics
        try:
            problems = run(os.path.abspath(a.build), work)
        finally:
            if not a.keep:
                shutil.rmtree(work, ignore_errors=True)
    for p in problems:
        print(f"FAIL: {p}")
    print(f"monitoring {a.check}: {'FAIL' if problems else 'pass'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
