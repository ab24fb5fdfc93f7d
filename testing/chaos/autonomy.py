#!/usr/bin/env python3
"""Autonomous mode under a datacenter cut (docs/autonomy.md), measured and checked.

  autonomy.py SCENARIO [--cut-seconds 60] [--keys 10000] [--seed S]
  autonomy.py all [--cut-seconds 15]

Three dueqd, each in its own "datacenter": the peer links and every client link go
through testing/faultproxy, and each datacenter's workload process (dueq-chaos-workload
run --only-node NODE --via ...) reaches the nodes only through its own links. Queue
`tokens` is autonomous, queue `strict` is not. Scenarios:

  cut-follower   a follower's datacenter is cut off for --cut-seconds
  cut-leader     the leader's datacenter is cut off
  survivor       the two other nodes are killed: one node is left
  crash          a follower's datacenter is cut off, and that node is killed (kill -9)
                 and restarted halfway through the cut
  flap           a follower's datacenter loses and regains its links again and again
                 for --cut-seconds (cut --flap-seconds, then joined for
                 --flap-heal-seconds, so its node enters and leaves autonomous mode
                 each time), and is killed (kill -9) and restarted in a cut halfway;
                 not part of `all` (its cut is meant to be minutes long)

Each run reports, as figures: how long each side took to serve again after the cut (the
cut-off node: until it reports autonomous mode, i.e. its election timeout, then
autonomy_after_ms; the others: until they agree on a leader); from then to the heal, each
side's refreshes (ok acks) per second against the rate at which tokens come due (keys /
(refresh_ms + 250 ms - lead_ms)); how long the merge took; what it merged. And it checks
(exit 1 if one fails): each side refreshed at least 90% of what came due on it from the
moment it served again (cut_off_refreshed, majority_refreshed: done / (done + owed),
refreshes_done_and_missed; the cut-off side is not judged for crash: the restart costs
autonomy_after_ms; the others not for survivor: they are dead; neither side for flap, whose
shares are reported: there the cut-off node must have entered autonomous mode at least
twice and acked refreshes in the cut); after the heal every node
is back in normal mode with an empty overlay, every node holds the same value for every
token, and no acknowledged write is lost unless a later write of that key exists (G1's
rule on the final reads, checklib/durability.py: with one clock on this machine, a later
write has the larger hlc); `strict` answered no_quorum on the cut-off node and never
handed its task out twice; after a crash the node came back with its overlay. G1's rule
over the cut-off node's answers is G4 (a write answered in autonomous mode is lost only to
a newer write). A report lands in RESULTS/autonomy-SCENARIO-SEED/.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checklib.durability import check_g1, check_replicas  # noqa: E402
from checklib.history import load  # noqa: E402
from harness.cluster import Cluster  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
SCENARIOS = ["cut-follower", "cut-leader", "survivor", "crash"]
LONG_SCENARIOS = ["flap"]  # run by name only


def refreshes_done_and_missed(events, side, t_cut, start, end, cycle, lead=0.5, late=2.0):
    """Refreshes one side of the cut completed in [start, end), and those it owed but did
    not do. The side knows each token's time from the writes before the cut and its own
    writes after it; a token comes due lead seconds before its time. Every ok ack of the
    side in the window is a refresh done; a token still due at the end, more than `late`
    seconds after it came due, is owed one refresh plus one per cycle it has waited.
    (A rate against keys / cycle would swing with where the window ends: a stall at the
    cut bunches the tokens, and they come due together cycle after cycle.)"""
    invoked, due = {}, {}
    done, lateness = 0, []
    for t, ev in events:
        if ev.get("f") not in ("put", "ack", "delete"):
            continue
        if ev["type"] == "invoke":
            invoked[ev["process"]] = (ev["key"], ev.get("time"))
            continue
        key, time_ = invoked.pop(ev["process"], (None, None))
        if ev["type"] != "ok" or key is None:
            continue
        ts = t / 1000
        if ev["node"] not in side and ts >= t_cut:
            continue
        if ev["f"] == "delete":
            due.pop(key, None)
            continue
        if ev["f"] == "ack" and ev["node"] in side and start <= ts < end:
            done += 1
            if key in due:
                lateness.append(ts - due[key])
        if time_ is not None:
            due[key] = time_ / 1000 - lead
    missed = sum(1 + int((end - late - d) // cycle) for d in due.values() if d < end - late)
    return done, missed, lateness


def refresh_figures(done, missed, lateness, lead=0.5):
    """What the report shows of one side: the judged share, and how late the refreshes
    came after their tokens came due (a refresh more than lead late is one the token's
    holder saw expire)."""
    lateness = sorted(lateness)
    n = max(1, len(lateness))
    return {"done": done, "missed": missed, "share": round(done / max(1, done + missed), 3),
            "before_expiry": round(sum(1 for x in lateness if x <= lead) / n, 3),
            "late_p50_s": round(lateness[len(lateness) // 2], 2) if lateness else None,
            "late_p90_s": round(lateness[int(len(lateness) * 0.9)], 2) if lateness else None}


class Run:
    def __init__(self, scenario, a, seed):
        self.scenario, self.a, self.seed = scenario, a, seed
        self.dir = os.path.join(a.results, f"autonomy-{scenario}-{seed}")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.t0 = time.time()
        self.findings, self.figures = [], {}
        self.workloads = {}

    def say(self, msg):
        print(f"[{self.scenario} {time.time() - self.t0:6.1f}s] {msg}", flush=True)

    def ctl(self, node, *args):
        r = subprocess.run([self.c.binary("cmd/dueqctl/dueqctl"), "--json", "--addr",
                            f"127.0.0.1:{self.c.client_port[node]}", *args],
                           capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout.strip(), r.stderr.strip()

    def status(self, node):
        rc, out, _ = self.ctl(node, "status")
        return json.loads(out) if rc == 0 else None

    def start_workloads(self, seconds):
        c, a = self.c, self.a
        for i, n in enumerate(c.ids):
            args = [c.binary("testing/chaos/dueq-chaos-workload"), "run", "--history",
                    os.path.join(self.dir, f"workload-{n}.jsonl"), "--seconds", str(seconds),
                    "--seed", str(self.seed + i), "--scenario", f"autonomy-{self.scenario}",
                    "--keys", str(a.keys), "--refresh-ms", str(a.refresh_ms), "--ttr-ms",
                    str(a.ttr_ms), "--grace-ms", "2000", "--refreshers", str(a.refreshers),
                    "--only-node", n]
            if i > 0:
                args.append("--no-seed")
            for addr in c.client_addresses():
                args += ["--node", addr]
            for route in c.dc_routes(n):
                args += ["--via", route]
            log = open(os.path.join(self.dir, f"workload-{n}.log"), "w")
            self.workloads[n] = subprocess.Popen(args, stdout=log, stderr=log,
                                                 start_new_session=True)

    def wait_seeded(self, timeout=120):
        """Until the first datacenter's workload has put every token (its last put is in
        its history; the others' front ends put and delete meanwhile)."""
        last = f'"key":"tok-{self.a.keys - 1:04d}"'
        path = os.path.join(self.dir, f"workload-{self.c.ids[0]}.jsonl")
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open(path) as f:
                    if any(last in line and '"f":"put"' in line
                           for line in (x.replace(" ", "") for x in f)):
                        time.sleep(1)  # its answer
                        return True
            except FileNotFoundError:
                pass
            time.sleep(0.5)
        return False

    def execute(self):
        a = self.a
        self.c = c = Cluster(a.build, os.path.join(self.dir, "cluster"), ttr_ms=a.ttr_ms,
                             autonomy_after_ms=a.after_ms, plant=a.plant, log=self.say)
        try:
            c.start_proxy(self.seed)
            for n in c.ids:
                c.start_node(n)
            leader = c.wait_leader(30)
            if not leader:
                raise RuntimeError("no leader within 30 s of the start")
            rc, _, err = self.ctl(leader, "put", "strict", "s1", "--payload", '"s"')
            if rc != 0:
                raise RuntimeError(f"put strict/s1: {err}")
            total = 60 + 10 + a.cut_seconds + 30
            self.start_workloads(total)
            if not self.wait_seeded():
                raise RuntimeError("the tokens were not all put within 120 s")
            others = [n for n in c.ids if n != leader]
            target = leader if self.scenario == "cut-leader" else others[0]
            self.say(f"{a.keys} tokens in; leader {leader}; baseline for 10 s, then the cut "
                     f"of {target} for {a.cut_seconds} s")
            time.sleep(10)
            t_cut = time.time()
            if self.scenario == "survivor":
                for n in c.ids:
                    if n != target:
                        c.kill(n)
            else:
                c.isolate_dc(target)
            self.hold(target, t_cut)
            # The workload stops at the heal: what the final reads show is then what the
            # merge made of the two sides' writes, not a refresh that came after it.
            for p in self.workloads.values():
                p.terminate()  # an op cut short is indeterminate to the checker
                p.wait(timeout=30)
            t_heal = time.time()
            c.heal_links()
            for n in c.down():
                c.start_node(n)
            self.say("healed; waiting for the merge")
            t_merged = self.wait_merged(60)
            self.figures["merge_seconds"] = round(t_merged - t_heal, 2) if t_merged else None
            if not t_merged:
                self.findings.append("not every node was back in normal mode with an empty "
                                     "overlay 60 s after the heal")
            s = self.status(target) or {}
            self.figures["merge"] = s.get("autonomy")
            self.check_strict(leader)
            self.say("reading every key on every node")
            final = [c.binary("testing/chaos/dueq-chaos-workload"), "final", "--history",
                     os.path.join(self.dir, "final.jsonl"), "--keys", str(a.keys),
                     "--wait-seconds", "60"]
            for addr in c.client_addresses():
                final += ["--node", addr]
            r = subprocess.run(final, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                self.findings.append("replicas never settled: " + r.stderr.strip()[-1000:])
        finally:
            for p in self.workloads.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
            c.stop()
        return self.judge(target, t_cut, t_heal)

    def hold(self, target, t_cut):
        a, c = self.a, self.c
        probed = crashed = False
        cut_now, phase_since, mode = True, t_cut, None
        self.figures["autonomous_entries"] = 0
        # The rates are judged from the moment each side serves again: the cut-off node
        # once it reports autonomous mode (a follower first waits out its election
        # timeout, then autonomy_after_ms), the majority once it has a leader of its own.
        self.t_serving = {"cut": None, "majority": None}
        while time.time() < t_cut + a.cut_seconds:
            since = time.time() - t_cut
            if self.scenario == "flap":
                cut_now, phase_since = self.flap(target, cut_now, phase_since)
            was, mode = mode, (self.status(target) or {}).get("mode")
            if mode == "autonomous" and was != "autonomous":
                self.figures["autonomous_entries"] += 1
            if self.t_serving["cut"] is None and not crashed and mode == "autonomous":
                self.t_serving["cut"] = time.time()
            if self.t_serving["majority"] is None and self.scenario != "survivor":
                leaders = {(self.status(n) or {}).get("leader_id") for n in c.ids if n != target}
                if len(leaders) == 1 and not leaders & {None, "", target}:
                    self.t_serving["majority"] = time.time()
            if not probed and since > a.after_ms / 1000 + 2:
                probed = True
                s = self.status(target) or {}
                self.figures["mode_during_cut"] = s.get("mode")
                rc, _, err = self.ctl(target, "take", "strict")
                self.figures["strict_take_on_cut_off_node"] = err or "ok"
                if rc == 0 or "no_quorum" not in err:
                    self.findings.append(f"take on strict at the cut-off node: {err or 'ok'}")
            if (self.scenario in ("crash", "flap") and not crashed and cut_now
                    and since > a.cut_seconds / 2):
                crashed = True
                before = (self.status(target) or {}).get("autonomy", {}).get("overlay")
                self.say(f"kill -9 {target} (overlay {before}) and restart it, still cut off")
                c.kill(target)
                c.start_node(target)
                after = (self.status(target) or {}).get("autonomy", {}).get("overlay")
                self.figures["overlay_before_crash"] = before
                self.figures["overlay_after_restart"] = after
                # In flap the overlay does not hold every key yet: records whose fsync had
                # not ended (writes not answered yet) may be gone, and writes after the
                # status added to it. G1 judges what was answered; here, only that the
                # overlay came back.
                lost = after != before if self.scenario == "crash" else not after
                if not before or lost:
                    self.findings.append(f"overlay {before} before the crash, {after} after")
            time.sleep(0.2)

    def flap(self, target, cut_now, phase_since):
        """The next phase of flap when this one is over: returns (cut now, since when)."""
        a, now = self.a, time.time()
        if now - phase_since < (a.flap_seconds if cut_now else a.flap_heal_seconds):
            return cut_now, phase_since
        if cut_now:
            self.c.heal_links()
        else:
            self.c.isolate_dc(target)
        self.figures["flap_phases"] = self.figures.get("flap_phases", 1) + 1
        self.say(f"{'joined' if cut_now else 'cut'} {target} again")
        return not cut_now, now

    def wait_merged(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            ss = [self.status(n) for n in self.c.ids]
            if all(s and s.get("mode") == "normal" and s["autonomy"]["overlay"] == 0
                   and s.get("leader") for s in ss):
                return time.time()
            time.sleep(0.2)
        return None

    def check_strict(self, leader):
        # strict/s1 was due before the cut and nobody took it but this probe: one take on
        # the majority hands it out, and no second lease ever existed.
        leader = self.c.wait_leader(30) or leader
        rc, out, err = self.ctl(leader, "take", "strict")
        tasks = json.loads(out).get("tasks", []) if rc == 0 else []
        rc2, out2, _ = self.ctl(leader, "get", "strict", "s1")
        attempts = json.loads(out2)["task"]["attempts"] if rc2 == 0 else None
        self.figures["strict_attempts"] = attempts
        if len(tasks) != 1 or attempts != 1:
            self.findings.append(f"strict/s1 after the heal: take gave {len(tasks)} tasks, "
                                 f"attempts {attempts} (want 1 and 1)")

    def judge(self, target, t_cut, t_heal):
        a = self.a
        events, meta = [], None
        for name in sorted(os.listdir(self.dir)):
            if name.startswith("workload-") and name.endswith(".jsonl") or name == "final.jsonl":
                with open(os.path.join(self.dir, name)) as f:
                    for line in f:
                        if not line.strip():
                            continue
                        ev = json.loads(line)
                        if ev.get("type") == "meta":
                            meta = meta or line
                            continue
                        events.append((ev["t"], line))
        events.sort(key=lambda e: e[0])
        merged = os.path.join(self.dir, "history.jsonl")
        with open(merged, "w") as f:
            f.write(meta)
            f.writelines(line for _, line in events)
        # Refreshes per second by datacenter, each side from when it served again.
        never = t_heal
        start_cut = self.t_serving["cut"] or never
        start_rest = self.t_serving["majority"] or never
        if self.t_serving["cut"] is None:
            self.findings.append(f"{target} never reported autonomous mode during the cut")
        if self.t_serving["majority"] is None and self.scenario != "survivor":
            self.findings.append("the majority never agreed on a leader during the cut")
        self.figures["cut_off_serving_after_s"] = round(start_cut - t_cut, 2)
        self.figures["majority_serving_after_s"] = round(start_rest - t_cut, 2)
        acks = {n: 0 for n in self.c.ids}
        base = 0
        for t, line in events:
            ev = json.loads(line)
            if ev.get("type") != "ok" or ev.get("f") != "ack":
                continue
            ts = t / 1000
            if t_cut - 10 <= ts < t_cut:
                base += 1
            if (start_cut if ev["node"] == target else start_rest) <= ts < t_heal:
                acks[ev["node"]] += 1
        # An ack sets the next time refresh_ms + U(0, 500) ms ahead, and a token comes due
        # lead_ms (500, harness/cluster.py) before its time.
        due_rate = a.keys / ((a.refresh_ms + 250 - 500) / 1000)
        span_cut = max(0.001, t_heal - start_cut)
        span_rest = max(0.001, t_heal - start_rest)
        self.figures["due_per_s"] = round(due_rate, 1)
        self.figures["baseline_acks_per_s"] = round(base / 10, 1)
        for n, k in acks.items():
            span = span_cut if n == target else span_rest
            self.figures[f"acks_per_s_{n}{' (cut off)' if n == target else ''}"] = round(k / span, 1)
        self.figures["cut_off_acks_per_due"] = round(acks[target] / span_cut / due_rate, 3)
        parsed = [(t, json.loads(line)) for t, line in events]
        cycle = (a.refresh_ms + 250 - 500) / 1000
        fig = refresh_figures(*refreshes_done_and_missed(parsed, {target}, t_cut, start_cut,
                                                          t_heal, cycle))
        cut_share = fig["share"]
        self.figures["cut_off_side_refreshed"] = fig
        # After a crash or a rejoin the node needs autonomy_after_ms again before it
        # serves: the figure is reported, not judged.
        rates = {}
        judged = self.scenario not in ("crash", "flap")
        if judged:
            rates["cut_off_refreshed"] = cut_share >= 0.9
        if cut_share < 0.9 and judged:
            self.findings.append(f"the cut-off side refreshed {cut_share:.0%} of what came due")
        if self.scenario == "flap":
            entries = self.figures["autonomous_entries"]
            rates["flapped"] = entries >= 2 and acks[target] > 0
            if not rates["flapped"]:
                self.findings.append(f"{target} entered autonomous mode {entries} times and "
                                     f"acked {acks[target]} refreshes in the cut (want 2 or "
                                     "more, and some)")
        if self.scenario != "survivor":
            rest_nodes = set(self.c.ids) - {target}
            self.figures["majority_acks_per_due"] = round(
                sum(acks[n] for n in rest_nodes) / span_rest / due_rate, 3)
            fig = refresh_figures(*refreshes_done_and_missed(parsed, rest_nodes, t_cut,
                                                              start_rest, t_heal, cycle))
            rest = fig["share"]
            self.figures["majority_refreshed"] = fig
            # In flap the majority does not see what the cut-off side refreshed until a
            # rejoin merges it, and then owes it no refresh: reported, not judged.
            if self.scenario != "flap":
                rates["majority_refreshed"] = rest >= 0.9
            if rest < 0.9 and self.scenario != "flap":
                self.findings.append(f"the majority refreshed {rest:.0%} of what came due")
        h = load(merged)
        checks = [check_g1(h, takes=False), check_replicas(h)]
        for c in checks:
            if not c.passed:
                self.findings.append(f"{c.name}: {c.counts} e.g. "
                                     + "; ".join(e["message"] for ex in c.examples.values()
                                                 for e in ex[:2]))
        out = {"scenario": self.scenario, "seed": self.seed, "keys": a.keys, "plant": a.plant,
               "cut_seconds": a.cut_seconds, "passed": not self.findings,
               "findings": self.findings, "figures": self.figures,
               "checks": {**{c.name: c.passed for c in checks}, **rates}}
        with open(os.path.join(self.dir, "report.json"), "w") as f:
            json.dump(out, f, indent=1, default=str)
        print(json.dumps(out, indent=1, default=str), flush=True)
        return out


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("scenario", choices=SCENARIOS + LONG_SCENARIOS + ["all"])
    p.add_argument("--cut-seconds", type=int, default=60)
    p.add_argument("--keys", type=int, default=10000)
    p.add_argument("--refresh-ms", type=int, default=4000,
                   help="an acked token comes due again this much later")
    p.add_argument("--ttr-ms", type=int, default=3000)
    p.add_argument("--refreshers", type=int, default=6,
                   help="refresher threads per datacenter (enough for one to carry every token)")
    p.add_argument("--after-ms", type=int, default=2000, help="the nodes' autonomy_after_ms")
    p.add_argument("--flap-seconds", type=float, default=30,
                   help="flap: how long each cut lasts")
    p.add_argument("--flap-heal-seconds", type=float, default=4,
                   help="flap: how long the node is joined between two cuts")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--results", default=os.path.join(ROOT, "chaos-results"))
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--plant", default=None,
                   help="run every node with dueqd --plant BUG (to show the checks catch it)")
    p.add_argument("--expect-fail", default=None, metavar="CHECK",
                   help="exit 0 only if the named check (G1, replicas, cut_off_refreshed, "
                        "majority_refreshed, flapped) FAILED in every run")
    a = p.parse_args()
    seed = a.seed if a.seed is not None else int(time.time()) % 100000
    results = []
    for s in SCENARIOS if a.scenario == "all" else [a.scenario]:
        try:
            results.append(Run(s, a, seed).execute())
        except Exception as e:  # a harness failure is a failed run
            print(f"[{s}] harness error: {e}", flush=True)
            results.append({"scenario": s, "passed": False, "findings": [str(e)]})
    print("\n== summary ==")
    for r in results:
        print(f"{r['scenario']:14} {'PASSED' if r['passed'] else 'FAILED'}  "
              + "; ".join(map(str, r["findings"]))[:400])
    if a.expect_fail:
        caught = [r for r in results if r.get("checks", {}).get(a.expect_fail) is False]
        print(f"expected {a.expect_fail} to fail: "
              f"{'caught' if len(caught) == len(results) else 'NOT caught'}")
        return 0 if len(caught) == len(results) else 1
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
