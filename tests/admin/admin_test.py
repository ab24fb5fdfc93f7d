#!/usr/bin/env python3
"""HTTP admin of a running 3-node cluster (docs/admin.md), checked from outside.

  prometheus  a real Prometheus server scrapes every node's /metrics and is queried for
              series; promtool lints each node's output
  health      /health of a leader cut off by packet drops and of a follower turns 503
              within an election timeout and back to 200 after; then the same after kill -9
  dashboard   headless Chromium loads / and the page must show the leader and the counts
              `dueqctl stats` gives; a screenshot is taken during a leader kill

Each check also runs once against a planted defect it must catch (a lint error, a
cluster with no fault, a page with a wrong count), so that none of them can pass vacuously.
Every process is started here and stopped by its PID; everything listens on 127.0.0.1.
"""
import argparse
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.cluster import Cluster, wait_line  # noqa: E402
from harness.prometheus import Prometheus  # noqa: E402

ELECTION_MS = 1000


def http(port, path, timeout=2.0):
    """(status, body) of GET http://127.0.0.1:port/path; status None if no answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError) as e:
        return None, str(e)


def dueqctl(c, *args, node=None):
    addrs = [f"127.0.0.1:{c.client_port[n]}" for n in ([node] if node else c.ids)]
    cmd = [c.binary("cmd/dueqctl/dueqctl"), "--addr", ",".join(addrs), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return r.stdout


def load(c, puts=20, take=3, bury=1):
    """Tasks in every status the page shows: ready, taken, buried."""
    for i in range(puts):
        dueqctl(c, "put", "tokens", f"tok-{i:03d}", "--payload", '"t"', "--time", "-1m")
    taken = json.loads(dueqctl(c, "--json", "take", "tokens", "--count", str(take),
                               "--ttr", "10m"))["tasks"]
    for t in taken[:bury]:
        dueqctl(c, "bury", "tokens", t["key"], "--lease", str(t["lease"]))


def start_cluster(workdir, log):
    c = Cluster(os.environ.get("DUEQ_BUILD", "build"), workdir, admin=True,
                election_ms=ELECTION_MS, heartbeat_ms=100, ttr_ms=600000, log=log)
    c.start_proxy(seed=1)
    for n in c.ids:
        c.start_node(n)
    if not c.wait_leader(30):
        raise RuntimeError("no leader within 30 s")
    return c


# ---------------------------------------------------------------- prometheus

def promtool_problems(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    return "" if r.returncode == 0 else (r.stdout + r.stderr).strip() or f"exit {r.returncode}"


def prom_query(port, q):
    status, body = http(port, "/api/v1/query?query=" + urllib.parse.quote(q))
    if status != 200:
        raise RuntimeError(f"query {q}: HTTP {status}: {body[:200]}")
    return json.loads(body)["data"]["result"]


def check_prometheus(c, workdir, log):
    problems = []
    for n in c.ids:
        status, text = http(c.admin_port[n], "/metrics")
        if status != 200:
            problems.append(f"{n}: /metrics answered {status}")
            continue
        if p := promtool_problems(text):
            problems.append(f"{n}: promtool check metrics: {p}")
    # The lint must be able to fail: a gauge named like a counter is refused.
    if not promtool_problems("# HELP dueq_x_total x\n# TYPE dueq_x_total gauge\ndueq_x_total 1\n"):
        problems.append("promtool accepted a planted lint error: the check cannot fail")

    targets = [f"127.0.0.1:{c.admin_port[n]}" for n in c.ids]
    prom = Prometheus(workdir, targets)
    port = prom.port
    try:
        deadline = time.time() + 30
        while http(port, "/-/ready")[0] != 200:
            if prom.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("prometheus did not become ready (see prometheus.log)")
            time.sleep(0.2)
        log(f"prometheus on 127.0.0.1:{port} scraping {targets}")
        want_ready = 20 - 3
        deadline = time.time() + 30
        while True:
            up = prom_query(port, 'up{job="dueq"}')
            leaders = prom_query(port, "sum(dueq_raft_is_leader)")
            ready = prom_query(port, 'dueq_queue_tasks{queue="tokens",status="ready"}')
            puts = prom_query(port, 'sum(dueq_requests_total{op="put",code="ok"})')
            fsyncs = prom_query(port, "dueq_storage_fsync_duration_seconds_count")
            seen = {
                "up": sorted(r["value"][1] for r in up),
                "leaders": [r["value"][1] for r in leaders],
                "ready": sorted(r["value"][1] for r in ready),
                "puts": [r["value"][1] for r in puts],
                "fsync series": len(fsyncs),
            }
            if (seen["up"] == ["1"] * 3 and seen["leaders"] == ["1"]
                    and seen["ready"] == [str(want_ready)] * 3 and seen["puts"] == ["20"]
                    and seen["fsync series"] == 3):
                log(f"prometheus sees {seen}")
                break
            if time.time() > deadline:
                problems.append(f"prometheus did not show the expected series in 30 s: {seen}")
                break
            time.sleep(0.5)
    finally:
        prom.stop()
    return problems


# ---------------------------------------------------------------- health

def watch_health(c, nodes, until, stop_when):
    """Polls /health of `nodes` every 20 ms; returns {node: [(t, status), ...]}."""
    seen = {n: [] for n in nodes}
    while time.time() < until:
        for n in nodes:
            status, _ = http(c.admin_port[n], "/health", timeout=0.5)
            seen[n].append((time.time(), status))
        if stop_when(seen):
            break
        time.sleep(0.02)
    return seen


def first(samples, pred, after=0.0):
    return next((t for t, s in samples if t >= after and pred(s)), None)


def check_health(c, log, planted_no_fault=False):
    problems = []
    leader = c.wait_leader(30)
    follower = next(n for n in c.ids if n != leader)
    for n in c.ids:
        if http(c.admin_port[n], "/health")[0] != 200:
            problems.append(f"{n}: /health is not 200 in a healthy cluster")
    bound = ELECTION_MS / 1000.0

    # A silent cut: the leader's packets are dropped both ways.
    t0 = time.time()
    if not planted_no_fault:
        c.isolate(leader)
    seen = watch_health(c, [leader, follower], t0 + (3 if planted_no_fault else 15), lambda s: all(
        first(v, lambda x: x != 200) for v in s.values()) and first(
        s[follower], lambda x: x == 200, after=first(s[follower], lambda x: x != 200)))
    for n, role in ((leader, "cut-off leader"), (follower, "follower")):
        t = first(seen[n], lambda s: s != 200)
        if t is None:
            problems.append(f"{role} {n}: /health never left 200 after the cut")
        else:
            log(f"{role} {n}: /health 503 {1000 * (t - t0):.0f} ms after the cut")
            if t - t0 > bound:
                problems.append(f"{role} {n}: /health turned 503 after {t - t0:.2f} s, more "
                                f"than an election timeout ({bound} s)")
    t_bad = first(seen[follower], lambda s: s != 200)
    t_back = first(seen[follower], lambda s: s == 200, after=t_bad or 0)
    if t_bad and not t_back:
        problems.append(f"follower {follower}: /health not back to 200 once the others elected")
    elif t_back:
        log(f"follower {follower}: /health 200 again {1000 * (t_back - t0):.0f} ms after the cut")
    if planted_no_fault:
        return problems
    c.heal_links()
    t1 = time.time()
    healed = watch_health(c, [leader], t1 + 15, lambda s: s[leader][-1][1] == 200)
    if healed[leader][-1][1] != 200:
        problems.append(f"old leader {leader}: /health not 200 within 15 s of the heal")
    else:
        log(f"old leader {leader}: /health 200 {1000 * (healed[leader][-1][0] - t1):.0f} ms "
            "after the heal")

    # kill -9 of the leader: its followers see the link break.
    leader = c.wait_leader(30)
    follower = next(n for n in c.ids if n != leader)
    time.sleep(1)
    t0 = time.time()
    c.kill(leader)
    seen = watch_health(c, [follower], t0 + 15, lambda s: first(
        s[follower], lambda x: x == 200, after=first(s[follower], lambda x: x != 200) or 1e18))
    t_bad = first(seen[follower], lambda s: s != 200)
    t_back = first(seen[follower], lambda s: s == 200, after=t_bad or 1e18)
    if t_bad is None:
        log(f"follower {follower}: /health never left 200 (the election was faster than a poll)")
    elif t_bad - t0 > bound:
        problems.append(f"follower {follower}: 503 only {t_bad - t0:.2f} s after the kill")
    if t_bad and not t_back:
        problems.append(f"follower {follower}: /health not back to 200 after the kill")
    elif t_bad:
        log(f"kill -9 of {leader}: follower {follower} 503 after {1000 * (t_bad - t0):.0f} ms, "
            f"200 again after {1000 * (t_back - t0):.0f} ms")
    c.start_node(leader)
    return problems


# ---------------------------------------------------------------- dashboard

class PageFacts(html.parser.HTMLParser):
    """What the rendered page says: the leader, each member's role, each queue's counts."""

    def __init__(self):
        super().__init__()
        self.leader, self.members, self.queues, self.loaded = None, {}, {}, False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-leader" in a and a.get("id") == "leader":
            self.leader = a["data-leader"]
        if "data-member" in a and "${" not in a["data-member"]:
            self.members[a["data-member"]] = a.get("data-role")
        if "data-queue" in a and "${" not in a["data-queue"]:
            self.queues[a["data-queue"]] = {k: int(a[f"data-{k}"])
                                            for k in ("ready", "taken", "buried", "done")}
        if tag == "body" and a.get("data-loaded") == "1":
            self.loaded = True


def chromium(*args):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        raise RuntimeError("chromium is not installed (scripts/install-deps.sh installs it)")
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", f"--user-data-dir={profile}",
                            "--virtual-time-budget=5000", *args],
                           capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"chromium failed: {r.stderr[-500:]}")
    return r.stdout


def page_problems(facts, leader, stats, members):
    problems = []
    if not facts.loaded:
        problems.append("the page never loaded its data")
    if facts.leader != leader:
        problems.append(f"the page shows leader {facts.leader!r}, the cluster says {leader!r}")
    for n, role in members.items():
        if facts.members.get(n) != role:
            problems.append(f"the page shows {n} as {facts.members.get(n)!r}, not {role!r}")
    want = {k: stats[k] for k in ("ready", "taken", "buried", "done")}
    if facts.queues.get("tokens") != want:
        problems.append(f"the page shows tokens {facts.queues.get('tokens')}, "
                        f"dueqctl stats says {want}")
    return problems


def refresher(c, seconds, log):
    """A reference worker refreshing `tokens` for `seconds`, so the chart has a rate."""
    addrs = ",".join(f"127.0.0.1:{c.client_port[n]}" for n in c.ids)
    for i in range(20, 500):
        dueqctl(c, "put", "tokens", f"tok-{i:03d}", "--payload", '"t"', "--time", f"+{i % 30}s")
    log(f"refreshing 500 tokens for {seconds} s before the kill")
    return subprocess.Popen(
        [c.binary("cmd/dueqctl/dueqctl"), "--addr", addrs, "worker", "tokens",
         "--builtin-refresh", "--next-in", "20s", "--concurrency", "2",
         "--duration", f"{seconds + 15}s", "--progress-every", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def check_dashboard(c, workdir, log, screenshot, warm_seconds=0):
    problems = []
    leader = c.wait_leader(30)
    viewer = next(n for n in c.ids if n != leader)
    stats = json.loads(dueqctl(c, "--json", "stats", "tokens", node=leader))
    facts = PageFacts()
    facts.feed(chromium("--dump-dom", f"http://127.0.0.1:{c.admin_port[viewer]}/"))
    roles = {n: ("leader" if n == leader else "follower") for n in c.ids}
    problems += page_problems(facts, leader, stats, roles)
    log(f"page from {viewer}: leader {facts.leader}, members {facts.members}, "
        f"tokens {facts.queues.get('tokens')}")
    # The comparison must be able to fail: the same facts against a planted wrong count.
    planted = dict(stats, ready=stats["ready"] + 1)
    if not page_problems(facts, leader, planted, roles):
        problems.append("the page check accepted a planted wrong count: it cannot fail")

    worker = refresher(c, warm_seconds, log) if warm_seconds else None
    if worker:
        time.sleep(warm_seconds)
    # During a leader kill: the shot shows the dead member and the election.
    c.kill(leader)
    time.sleep(0.3)
    shot = screenshot or os.path.join(workdir, "dashboard.png")
    chromium("--window-size=1366,768", f"--screenshot={shot}",
             f"http://127.0.0.1:{c.admin_port[viewer]}/")
    log(f"screenshot during the kill of {leader}: {shot}")
    new_leader = c.wait_leader(30)
    if worker:
        worker.wait(timeout=120)  # its --duration ends it; then the counts hold still
        stats = json.loads(dueqctl(c, "--json", "stats", "tokens", node=new_leader))
    facts = PageFacts()
    facts.feed(chromium("--dump-dom", f"http://127.0.0.1:{c.admin_port[viewer]}/"))
    roles = {n: ("leader" if n == new_leader else "follower") for n in c.ids if n != leader}
    roles[leader] = "unreachable"
    problems += page_problems(facts, new_leader, stats, roles)
    log(f"after the kill: leader {facts.leader}, members {facts.members}")
    c.start_node(leader)
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("check", choices=["prometheus", "health", "dashboard", "all"])
    ap.add_argument("--build", default="build", help="the CMake build directory")
    ap.add_argument("--results", help="keep the cluster's files here (default: a temp dir)")
    ap.add_argument("--screenshot", help="dashboard: write the screenshot here (PNG)")
    ap.add_argument("--warm", type=int, default=0, metavar="SECONDS",
                    help="dashboard: run a refresher this long before the kill, so the "
                         "screenshot shows a refresh rate (docs/dashboard.png: 120)")
    args = ap.parse_args()
    os.environ["DUEQ_BUILD"] = os.path.abspath(args.build)
    workdir = os.path.abspath(args.results) if args.results else tempfile.mkdtemp(
        prefix="dueq-admin-")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)

    def log(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    checks = ["prometheus", "health", "dashboard"] if args.check == "all" else [args.check]
    problems = []
    for check in checks:
        c = start_cluster(os.path.join(workdir, check), log)
        try:
            if check == "prometheus":
                load(c)
                problems += check_prometheus(c, os.path.join(workdir, check), log)
            elif check == "health":
                # Planted: with no fault at all the "turns 503" check must fail.
                planted = check_health(c, lambda m: None, planted_no_fault=True)
                if not any("never left 200" in p for p in planted):
                    problems.append("the health check passed with no fault: it cannot fail")
                problems += check_health(c, log)
            else:
                load(c)
                problems += check_dashboard(c, os.path.join(workdir, check), log,
                                            args.screenshot, args.warm)
        except Exception as e:  # noqa: BLE001 - reported as a failure with the logs kept
            problems.append(f"{check}: {e}")
        finally:
            c.stop()
    if problems:
        print("FAIL:\n  " + "\n  ".join(problems))
        print(f"files kept in {workdir}")
        return 1
    print(f"PASS: {', '.join(checks)}")
    if not args.results:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
