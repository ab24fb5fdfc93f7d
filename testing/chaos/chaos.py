#!/usr/bin/env python3
"""dueq under partitions, pauses, clock jumps and crashes, judged by a history checker.

  chaos.py SCENARIO [--seconds N] [--seed S]     one scenario (see --list)
  chaos.py --all [--seconds N]                   every scenario in turn
  chaos.py mix --seconds 1800                    a random nemesis each cycle
  chaos.py SCENARIO --shards 2                   on two shards of three nodes each
  chaos.py SCENARIO --shards 3 --moves           ... while buckets move between shards

Each run starts three dueqd behind testing/faultproxy, runs the token refresh workload
(dueq-chaos-workload) on every node, injects the scenario's fault again and again (each
cycle: fault, hold, heal, wait for a leader), heals everything, reads every key on every
node, and checks the history (check.py). With --shards N: N shards of three nodes (each
behind its own faultproxy), one shard map and two dueq-proxy that the workload talks to;
each cycle's fault hits one shard, drawn at random, and the final reads go shard by
shard. A report (report.json, summary.txt, the history
and every log) lands in RESULTS/SCENARIO-SEED/. Exit status 0 when every check passed.
docs/reliability.md describes the scenarios and the checks.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import nemesis  # noqa: E402
from harness.cluster import Cluster  # noqa: E402
from harness.shards import ShardedCluster  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


class Run:
    def __init__(self, scenario, args, seed):
        self.scenario = scenario
        self.args = args
        self.seed = seed
        self.rng = random.Random(seed)
        self.dir = os.path.join(args.results, f"{scenario}-{seed}")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.t0 = time.time()
        self.findings = []
        self.windows = []
        self.nemesis_log = open(os.path.join(self.dir, "nemesis.jsonl"), "w")
        self.node_dirs = []

    def say(self, msg):
        print(f"[{self.scenario} {time.time() - self.t0:7.1f}s] {msg}", flush=True)

    def event(self, **e):
        e.setdefault("t", int(time.time() * 1000))
        self.nemesis_log.write(json.dumps(e) + "\n")
        self.nemesis_log.flush()

    def kinds(self):
        if self.scenario == "mix":
            return list(nemesis.ALL)
        return [nemesis.BY_NAME[self.scenario]]

    def execute(self):
        needs = {}
        for k in self.kinds():
            needs.update(k.needs)
        a = self.args
        options = dict(plant=a.plant, power_cut=needs.get("power_cut", False),
                       faketime=needs.get("faketime", False), grace_ms=a.grace_ms,
                       ttr_ms=a.ttr_ms, log=self.say, tls=a.tls)
        if a.moves:
            options["moves"] = True
        if needs.get("spares"):
            options["spares"] = needs["spares"]  # each shard's own, with --shards
        where = os.path.join(self.dir, "cluster")
        c = (ShardedCluster(a.build, where, a.shards, **options) if a.shards > 1
             else Cluster(a.build, where, **options))
        self.node_dirs = c.node_dirs()
        workload = None
        try:
            c.start(self.seed)
            leader = c.wait_leader(30)
            if not leader:
                raise RuntimeError("no leader within 30 s of the start")
            self.say(f"cluster up, leader {leader}; workload for {a.seconds} s")
            history = os.path.join(self.dir, "workload.jsonl")
            wl = [c.binary("testing/chaos/dueq-chaos-workload"), "run", "--history", history,
                  "--seconds", str(a.seconds), "--seed", str(self.seed), "--scenario",
                  self.scenario, "--grace-ms", str(a.grace_ms), "--ttr-ms", str(a.ttr_ms),
                  "--keys", str(a.keys), *c.workload_args()]
            for addr in c.client_addresses():
                wl += ["--node", addr]
            with open(os.path.join(self.dir, "workload.log"), "w") as log:
                workload = subprocess.Popen(wl, stderr=log, stdout=log, start_new_session=True)
            end = time.time() + a.seconds
            mover = None
            if a.moves:
                mover = threading.Thread(target=self.move_buckets, args=(c, end - 6),
                                         daemon=True)
                mover.start()
            time.sleep(min(8.0, max(3.0, a.seconds * 0.15)))
            cycle = 0
            while time.time() < end - 4:
                self.check_processes(c)
                kind = self.rng.choice(self.kinds())
                nem = kind(self.rng)
                shard = c.pick(self.rng)
                cycle += 1
                start = int(time.time() * 1000)
                where = {"shard": shard.shard[0]} if shard.shard else {}
                self.say(f"cycle {cycle}: {nem.name}"
                         + (f" on shard {where['shard']}" if where else ""))
                nem.start(shard)
                # Written once start() decided what it hit (a kill knows then whether a
                # majority is left), stamped with the moment the fault began.
                self.event(t=start, type="nemesis", name=nem.describe(), action="start",
                           majority=nem.majority, affected=nem.affected(), **where)
                target = getattr(nem, "node", "") or getattr(nem, "middle", "")
                self.say(f"  {nem.describe()} {target}, holding {nem.hold:.1f} s more")
                time.sleep(max(0.0, min(nem.hold, end - time.time())))
                nem.stop(shard)
                self.event(type="nemesis", name=nem.describe(), action="stop",
                           majority=nem.majority, started=start)
                leader = c.wait_leader(30)
                self.say(f"healed; leader {leader}")
                if not leader:
                    self.findings.append(f"cycle {cycle} ({nem.describe()}): no leader 30 s "
                                         "after healing")
                time.sleep(self.rng.uniform(2.0, 3.0))
            self.check_processes(c)
            if mover:
                mover.join(timeout=200)
            self.say("waiting for the workload to finish")
            workload.wait(timeout=a.seconds + 120)
            workload = None
            c.heal_all()
            if not c.wait_leader(30):
                self.findings.append("no leader 30 s after the final heal")
            if a.shards <= 1 and c.ids != c.first_ids:
                self.event(type="members", nodes=list(c.ids))
            self.say("reading every key on every node")
            for shard, final in c.final_reads(history, a.keys):
                r = subprocess.run(final, capture_output=True, text=True, timeout=300)
                if r.returncode != 0:
                    self.findings.append(
                        (f"shard {shard}: " if shard else "") +
                        "replicas never settled on one applied index: " +
                        r.stderr.strip()[-2000:])
            self.check_processes(c)
        finally:
            if workload and workload.poll() is None:
                workload.kill()
                workload.wait()
            c.stop()
            self.nemesis_log.close()
        return self.judge()

    def move_buckets(self, c, until):
        """Moves buckets that hold the workload's keys to another shard, one after another,
        until `until`: each move overlaps the nemesis's faults. A move that does not finish
        is a finding (it must finish once the faults heal)."""
        from harness.shards import bucket_of
        rng = random.Random(self.seed * 7919)
        held = sorted({bucket_of("tokens", f"tok-{k:04d}") for k in range(self.args.keys)})
        names = [x.shard[0] for x in c.clusters]
        moved = 0
        while time.time() < until:
            owner = c.owners()
            if owner is None:
                time.sleep(1)
                continue
            b = rng.choice(held)
            to = rng.choice([n for n in names if n != owner[b]])
            self.event(type="move", bucket=b, frm=owner[b], to=to, action="start")
            rc = c.move([b], to, self.say)
            self.event(type="move", bucket=b, to=to, action="end", exit=rc)
            if rc:
                self.findings.append(f"moving bucket {b} to {to}: dueqctl exit {rc}")
            moved += 1
        self.say(f"{moved} bucket moves")

    def check_processes(self, c):
        for n, code in c.unexpected_exits().items():
            self.findings.append(f"{n} exited by itself with status {code} (see its dueqd.log)")
            self.say(f"{n} exited with {code}; restarting it")
            c.restart(n)

    def judge(self):
        merged = os.path.join(self.dir, "history.jsonl")
        events = []
        for name in ("workload.jsonl", "nemesis.jsonl"):
            with open(os.path.join(self.dir, name)) as f:
                events += [line for line in f if line.strip()]
        # Stable sort by time: each process's events keep their order.
        events.sort(key=lambda line: json.loads(line)["t"])
        with open(merged, "w") as f:
            f.writelines(events)
        report = os.path.join(self.dir, "check.json")
        summary = os.path.join(self.dir, "check.txt")
        r = subprocess.run([sys.executable, os.path.join(HERE, "check.py"), merged,
                            "--json", report, "--summary", summary,
                            "--slack-ms", str(self.args.slack_ms)],
                           capture_output=True, text=True)
        checks = {}
        if os.path.exists(report):
            with open(report) as f:
                checks = json.load(f)
        passed = r.returncode == 0 and not self.findings
        out = {"scenario": self.scenario, "seed": self.seed, "seconds": self.args.seconds,
               "shards": self.args.shards,
               "plant": self.args.plant, "passed": passed, "findings": self.findings,
               "checker_exit": r.returncode, "checks": checks}
        with open(os.path.join(self.dir, "report.json"), "w") as f:
            json.dump(out, f, indent=1)
        text = [f"scenario {self.scenario}, seed {self.seed}, {self.args.seconds} s"
                + (f", {self.args.shards} shards" if self.args.shards > 1 else "")
                + (f", planted {self.args.plant}" if self.args.plant else ""),
                "PASSED" if passed else "FAILED"]
        text += [f"finding: {x}" for x in self.findings]
        text.append(r.stdout.strip())
        if r.returncode == 2:
            text.append("checker could not read the history: " + r.stderr.strip())
        with open(os.path.join(self.dir, "summary.txt"), "w") as f:
            f.write("\n".join(text) + "\n")
        print("\n".join(text), flush=True)
        if not self.args.keep:
            for d in self.node_dirs:
                shutil.rmtree(os.path.join(d, "data"), ignore_errors=True)
        return out


def main():
    # A SIGTERM unwinds like Ctrl-C, so every run's `finally` stops its processes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    names = [k.name for k in nemesis.ALL] + ["mix"]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("scenario", nargs="?", choices=names, help="the nemesis to run")
    p.add_argument("--all", action="store_true", help="run every scenario but mix in turn")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--seconds", type=int, default=60, help="workload length per scenario")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: from time)")
    p.add_argument("--results", default=os.path.join(ROOT, "chaos-results"),
                   help="directory for reports (default: chaos-results/)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory")
    p.add_argument("--plant", default=None,
                   help="run every node with dueqd --plant BUG (to show the checks catch it)")
    p.add_argument("--expect-fail", default=None, metavar="CHECK",
                   help="exit 0 only if the named check FAILED (planted-defect runs)")
    p.add_argument("--keys", type=int, default=200, help="number of tokens")
    p.add_argument("--ttr-ms", type=int, default=3000, help="lease length of every take")
    p.add_argument("--grace-ms", type=int, default=2000, help="the nodes' session grace")
    p.add_argument("--slack-ms", type=int, default=5000,
                   help="G2: how long after a lease ends its task may wait to be handed out")
    p.add_argument("--keep", action="store_true", help="keep the nodes' data directories")
    p.add_argument("--tls", action="store_true",
                   help="TLS on every link: mutual between members, to clients and proxies "
                        "(a CA made for the run; docs/security.md)")
    p.add_argument("--moves", action="store_true",
                   help="with --shards: move buckets holding the workload's keys between shards "
                        "all through the run (dueqctl shard move)")
    p.add_argument("--shards", type=int, default=1,
                   help="shards of three nodes, behind two dueq-proxy (default 1: one cluster, "
                        "no proxy)")
    a = p.parse_args()
    if a.list:
        for k in nemesis.ALL:
            print(f"{k.name:16} {' '.join((k.__doc__ or '').split())}")
        print(f"{'mix':16} a random one of the above each cycle")
        return 0
    if not a.all and not a.scenario:
        p.error("name a scenario, or --all (see --list)")
    seed = a.seed if a.seed is not None else int(time.time()) % 100000
    scenarios = [k.name for k in nemesis.ALL] if a.all else [a.scenario]
    results = []
    for s in scenarios:
        try:
            results.append(Run(s, a, seed).execute())
        except Exception as e:  # a harness failure is a failed run, reported as such
            print(f"[{s}] harness error: {e}", flush=True)
            results.append({"scenario": s, "seed": seed, "passed": False,
                            "findings": [f"harness error: {e}"], "checks": {}})
    if len(results) > 1:
        print("\n== summary ==")
        for r in results:
            print(f"{r['scenario']:16} {'PASSED' if r['passed'] else 'FAILED'}  "
                  + "; ".join(r["findings"])[:300])
    if a.expect_fail:
        caught = [r for r in results
                  if r.get("checks", {}).get("checks", {}).get(a.expect_fail, {}).get("passed")
                  is False]
        print(f"expected {a.expect_fail} to fail: "
              f"{'caught' if len(caught) == len(results) else 'NOT caught'}")
        return 0 if len(caught) == len(results) else 1
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
