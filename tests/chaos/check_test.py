#!/usr/bin/env python3
"""Tests of testing/chaos/check.py on small synthetic histories: a clean history passes, and
each planted defect is caught by the right check with the right violation kind."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "testing", "chaos", "check.py")
sys.path.insert(0, os.path.dirname(CHECK))
import check  # noqa: E402

NODES = ["n1", "n2", "n3"]
TTR = 3000
GRACE = 2000


class Hist:
    """Builds a history: op() writes an invoke and its completion (none when outcome is
    None); write() sorts by t (stably, as the harness does) and writes JSON lines."""

    def __init__(self, keys=("k1", "k2", "k3", "k4")):
        self.events = [{"t": 0, "type": "meta", "scenario": "test", "seed": 1,
                        "grace_ms": GRACE, "ttr_ms": TTR, "nodes": NODES, "keys": list(keys)}]

    def op(self, t, t2, p, f, outcome="ok", node="n1", error=None, done=None, **inv):
        self.events.append(dict({"t": t, "type": "invoke", "process": p, "f": f,
                                 "node": node}, **inv))
        if outcome is not None:
            e = {"t": t2, "type": outcome, "process": p, "f": f, "node": node}
            if "key" in inv:
                e["key"] = inv["key"]
            if outcome != "ok":
                e["error"] = error or ("not_leader" if outcome == "fail" else "timeout")
            e.update(done or {})
            self.events.append(e)

    def put(self, t, t2, p, key, value, outcome="ok", **kw):
        self.op(t, t2, p, "put", outcome, key=key, value=value, time=t, done={"version": 1}
                if outcome == "ok" else None, **kw)

    def leader_get(self, t, t2, p, key, value, consistency="leader"):
        self.op(t, t2, p, "get", key=key, consistency=consistency,
                done={"value": value, "status": "ready", "time": t, "version": 1})

    def delete(self, t, t2, p, key, outcome="ok"):
        self.op(t, t2, p, "delete", outcome, key=key)

    def take(self, t, t2, p, tasks, rod=False, outcome="ok", ttr=TTR, node="n1"):
        done = {"tasks": [{"key": k, "value": v, "lease": lease, "lease_until": t2 + ttr,
                           "time": t} for k, v, lease in tasks]} if outcome == "ok" else None
        self.op(t, t2, p, "take", outcome, node=node, ttr=ttr, rod=rod, done=done)

    def ack(self, t, t2, p, key, lease, value, outcome="ok", node="n1"):
        self.op(t, t2, p, "ack", outcome, node=node, key=key, lease=lease, value=value,
                time=t + 2000, done={"version": 2} if outcome == "ok" else None)

    def release(self, t, t2, p, key, lease, outcome="ok"):
        self.op(t, t2, p, "release", outcome, key=key, lease=lease)

    def abandon(self, t, p, key, lease, rod=False, disconnect_t=None):
        e = {"t": t, "type": "abandon", "process": p, "key": key, "lease": lease, "rod": rod}
        if disconnect_t is not None:
            e["disconnect_t"] = disconnect_t
        self.events.append(e)

    def nemesis(self, t, t2, name="partition", majority=True, **kw):
        self.events.append(dict({"t": t, "type": "nemesis", "name": name, "action": "start",
                                 "majority": majority}, **kw))
        self.events.append({"t": t2, "type": "nemesis", "name": name, "action": "stop",
                            "majority": majority, "started": t})

    def finals(self, state, t=30000, applied=None):
        """state: key -> value (None: absent), the same on every node unless overridden
        by per-node dicts in `state` as {key: {node: value}}."""
        for n in NODES:
            for key, v in state.items():
                if isinstance(v, dict):
                    v = v[n]
                e = {"t": t, "type": "final", "node": n, "key": key, "present": v is not None}
                if v is not None:
                    e.update(value=v, status="ready", time=1000, version=2)
                self.events.append(e)
        for n in NODES:
            self.events.append({"t": t + 1, "type": "final_node", "node": n,
                                "applied_index": (applied or {}).get(n, 100),
                                "commit_index": 100})

    def write(self, d):
        path = os.path.join(d, "history.jsonl")
        with open(path, "w") as f:
            for e in sorted(self.events, key=lambda e: e["t"]):
                f.write(json.dumps(e) + "\n")
        return path


def clean(redeliver=True, final=True, ack6="ok"):
    """Puts, takes, acks, a release, an abandoned lease handed out again after its ttr,
    a delete, a get, a nemesis window; takes go on until 16 s."""
    h = Hist()
    h.put(100, 110, 1, "k1", "v1")
    h.put(120, 130, 1, "k2", "v2")
    h.put(140, 150, 1, "k3", "v3")
    h.put(160, 170, 1, "k4", "v4")
    h.op(200, 205, 1, "get", key="k1", done={"value": "v1", "status": "ready", "time": 100,
                                              "version": 1})
    h.delete(300, 310, 1, "k4")
    h.take(1000, 1010, 2, [("k1", "v1", 1)])
    h.ack(1020, 1030, 2, "k1", 1, "a1")
    h.take(1000, 1012, 3, [("k2", "v2", 2)], rod=True)
    h.release(1020, 1025, 3, "k2", 2)
    h.take(3000, 3010, 2, [("k2", "v2", 3)])
    h.ack(3020, 3030, 2, "k2", 3, "a2")
    h.leader_get(3100, 3105, 1, "k2", "a2")
    h.take(3000, 3015, 3, [("k3", "v3", 4)])
    h.abandon(3016, 3, "k3", 4)                 # deadline 3015 + 3000 = 6015
    if redeliver:
        h.take(6100, 6110, 2, [("k3", "v3", 5)])
        h.ack(6120, 6130, 2, "k3", 5, "a3")
    h.nemesis(4000, 5000)
    h.take(9000, 9010, 2, [("k1", "a1", 6)])
    h.ack(9020, 9030, 2, "k1", 6, "a4", outcome=ack6)
    for t in (12000, 14000, 16000):              # workers keep taking, nothing due
        h.take(t, t + 5, 3, [])
    if final:
        h.finals({"k1": "a4" if ack6 == "ok" else "a1", "k2": "a2",
                  "k3": "a3" if redeliver else "v3", "k4": None})
    return h


class CheckerTest(unittest.TestCase):
    def run_check(self, h, slack_ms=5000):
        with tempfile.TemporaryDirectory() as d:
            report, text = check.run(h.write(d), slack_ms)
        self.text = text
        return report

    def assertPasses(self, report, name):
        c = report["checks"][name]
        self.assertTrue(c["passed"], f"{name} should pass:\n{self.text}")

    def assertCaught(self, report, name, kind):
        c = report["checks"][name]
        self.assertFalse(c["passed"], f"{name} should fail:\n{self.text}")
        self.assertIn(kind, c["violations"], self.text)
        ex = c["examples"][kind][0]
        self.assertTrue(ex["events"] and all(ex["events"]), "examples quote event lines")
        self.assertFalse(report["passed"])

    def test_clean_history_passes(self):
        r = self.run_check(clean())
        self.assertTrue(r["passed"], self.text)
        # 12 final reads (4 keys x 3 nodes) and 6 tasks handed out by takes.
        self.assertEqual(r["checks"]["G1"]["checked"], 18)
        self.assertEqual(r["checks"]["G2"]["stats"]["redelivery_delay_ms"]["max"], 6110 - 6015)
        self.assertEqual(r["counts"]["ok_acks"], 4)
        w = r["availability"]["windows"][0]
        self.assertEqual(w["first_ok_take_ms"], 6110 - 4000)   # k3 handed out again
        self.assertEqual(w["first_ok_take_after_stop_ms"], 6110 - 5000)

    def test_lost_ok_put(self):
        h = clean()
        h.put(10000, 10010, 1, "k1", "v9")      # ok, after every other write: must survive
        r = self.run_check(h)
        self.assertCaught(r, "G1", "lost")
        self.assertEqual(r["checks"]["G1"]["examples"]["lost"][0]["expected"], "v9")
        self.assertPasses(r, "replicas")

    def test_lost_ack_seen_by_a_later_take(self):
        # The ack of a1 was answered ok but lost (never committed): the next take, invoked
        # after the ack's answer, still hands out the older value v1. The final state is
        # fine (a later ack overwrote it), so only the take shows the loss.
        h = Hist()
        h.put(100, 110, 1, "k1", "v1")
        h.take(1000, 1010, 2, [("k1", "v1", 1)])
        h.ack(1020, 1030, 2, "k1", 1, "a1")
        h.take(5000, 5010, 2, [("k1", "v1", 2)])
        h.ack(5020, 5030, 2, "k1", 2, "a2")
        h.finals({"k1": "a2"})
        self.assertCaught(self.run_check(h), "G1", "lost")

    def test_take_may_see_a_concurrent_write(self):
        # The take was invoked before the ack completed: it may see either value.
        h = Hist()
        h.put(100, 110, 1, "k1", "v1")
        h.take(1000, 1010, 2, [("k1", "v1", 1)])
        h.ack(1020, 1030, 2, "k1", 1, "a1")
        h.take(1025, 4100, 3, [("k1", "v1", 2)])
        h.finals({"k1": "a1"})
        r = self.run_check(h)
        self.assertPasses(r, "G1")

    def test_lost_when_absent(self):
        h = clean(final=False)
        h.finals({"k1": None, "k2": "a2", "k3": "a3", "k4": None})
        self.assertCaught(self.run_check(h), "G1", "lost")
        # k4 was deleted, then put again ok after the delete completed
        h = clean(final=False)
        h.put(10000, 10010, 1, "k4", "v11")
        h.finals({"k1": "a4", "k2": "a2", "k3": "a3", "k4": None})
        self.assertCaught(self.run_check(h), "G1", "lost")

    def test_resurrected_delete(self):
        h = clean(final=False)
        h.finals({"k1": "a4", "k2": "a2", "k3": "a3", "k4": "v4"})
        self.assertCaught(self.run_check(h), "G1", "resurrected")

    def test_failed_put_applied(self):
        h = clean(final=False)
        h.put(10000, 10010, 1, "k2", "vf", outcome="fail")
        h.finals({"k1": "a4", "k2": "vf", "k3": "a3", "k4": None})
        self.assertCaught(self.run_check(h), "G1", "failed_op_applied")

    def test_unknown_value(self):
        h = clean(final=False)
        h.finals({"k1": "a4", "k2": "a3", "k3": "a3", "k4": None})   # a3 was k3's
        self.assertCaught(self.run_check(h), "G1", "unknown_value")

    def test_indeterminate_write_may_be_final(self):
        for final in ("vi", "a4"):               # applied, or not
            h = clean(final=False)
            h.put(10000, 12000, 1, "k1", "vi", outcome="info", error="timeout")
            h.put(13000, 13010, 1, "k2", "vj", outcome=None)   # the history ended first
            h.finals({"k1": final, "k2": "vj", "k3": "a3", "k4": None})
            r = self.run_check(h)
            self.assertTrue(r["passed"], self.text)

    def test_indeterminate_delete_may_leave_key_absent(self):
        h = clean(final=False)
        h.delete(10000, 12000, 1, "k1", outcome="info")
        h.finals({"k1": None, "k2": "a2", "k3": "a3", "k4": None})
        self.assertTrue(self.run_check(h)["passed"], self.text)

    def test_concurrent_write_may_win(self):
        # v8 and v9 overlap in time: either may be the last one applied.
        h = clean(final=False)
        h.put(10000, 10050, 1, "k1", "v8")
        h.put(10010, 10020, 4, "k1", "v9")
        h.finals({"k1": "v8", "k2": "a2", "k3": "a3", "k4": None})
        self.assertTrue(self.run_check(h)["passed"], self.text)

    def test_stale_leader_read(self):
        # k2: v2, then a2 acked at 3030; a leader read begun at 3100 returns v2.
        h = clean()
        h.leader_get(3200, 3205, 4, "k2", "v2")
        r = self.run_check(h)
        self.assertCaught(r, "leader_reads", "stale")
        self.assertPasses(r, "G1")

    def test_leader_read_may_return_what_a_concurrent_write_replaces(self):
        h = clean()
        h.leader_get(3025, 3028, 4, "k2", "v2")   # begun before a2's answer (3030)
        r = self.run_check(h)
        self.assertPasses(r, "leader_reads")
        self.assertEqual(r["checks"]["leader_reads"]["checked"], 2)

    def test_local_read_may_be_stale(self):
        h = clean()
        h.leader_get(3200, 3205, 4, "k2", "v2", consistency="local")
        self.assertPasses(self.run_check(h), "leader_reads")

    def test_leader_read_of_a_value_never_written(self):
        h = clean()
        h.leader_get(3200, 3205, 4, "k2", "zz")
        self.assertCaught(self.run_check(h), "leader_reads", "value_never_written")

    def test_replicas_disagree(self):
        h = clean(final=False)
        h.finals({"k1": {"n1": "a4", "n2": "a4", "n3": "a1"}, "k2": "a2", "k3": "a3",
                  "k4": None}, applied={"n3": 99})
        r = self.run_check(h)
        self.assertCaught(r, "replicas", "state")
        self.assertCaught(r, "replicas", "applied_index")

    def test_members_line_names_the_nodes_that_must_agree(self):
        # After a replace (n3 out, n4 in): the final members are read, n3 no longer is.
        h = clean()
        h.events.append({"t": 29000, "type": "members", "nodes": ["n1", "n2", "n4"]})
        r = self.run_check(h)
        c = r["checks"]["replicas"]
        self.assertFalse(c["passed"], self.text)  # nothing was read on n4
        self.assertIn("missing", c["violations"], self.text)
        self.assertIn("n4", self.text)
        self.assertNotIn("no final read on n3", self.text)
        self.assertPasses(self.run_check(clean()), "replicas")

    def test_final_read_failed(self):
        h = clean(final=False)
        h.events.append({"t": 30000, "type": "final_failed", "reason": "no common index"})
        r = self.run_check(h)
        self.assertCaught(r, "replicas", "final_failed")
        self.assertPasses(r, "G1")

    def test_overlapping_leases(self):
        h = clean()
        # lease 6 (k1) was taken at 9000 and acked only at 9020: lease 7 is granted
        # while 6 is certainly live
        h.take(9012, 9018, 3, [("k1", "a1", 7)])
        r = self.run_check(h)
        self.assertCaught(r, "G3", "overlapping_leases")
        self.assertEqual(r["checks"]["G3"]["examples"]["overlapping_leases"][0]["leases"],
                         [6, 7])

    def test_overlap_in_g3_exempt_window_is_excluded(self):
        h = clean(ack6="fail")
        h.take(9012, 9018, 3, [("k1", "a1", 7)])
        h.nemesis(8500, 9500, name="clock", g3_exempt=True)
        r = self.run_check(h)
        self.assertPasses(r, "G3")
        self.assertEqual(r["checks"]["G3"]["stats"]["excluded_g3_exempt"], 1)

    def test_lease_ended_by_put_is_no_overlap(self):
        h = clean(final=False, ack6="fail")       # lease_mismatch: the put voided lease 6
        h.put(9011, 9013, 1, "k1", "v7")
        h.take(9014, 9018, 3, [("k1", "v7", 7)])
        h.finals({"k1": "v7", "k2": "a2", "k3": "a3", "k4": None})
        self.assertTrue(self.run_check(h)["passed"], self.text)

    def test_ack_after_voiding_put_is_stale(self):
        h = clean(final=False)                   # lease 6 acked ok after the put voided it
        h.put(9011, 9013, 1, "k1", "v7")
        h.finals({"k1": "a4", "k2": "a2", "k3": "a3", "k4": None})
        self.assertCaught(self.run_check(h), "G3", "stale_lease_accepted")

    def test_stale_lease_accepted(self):
        h = clean()
        h.take(9040, 9050, 3, [("k1", "a4", 7)])
        h.ack(9060, 9070, 2, "k1", 6, "a6")      # lease 6 was superseded by 7 at 9050
        self.assertCaught(self.run_check(h), "G3", "stale_lease_accepted")

    def test_rod_lease_of_a_broken_connection_may_end_early(self):
        h = clean()
        # process 5 takes k2 (rod) and then times out: its connection may be gone, so
        # another worker may get k2 after the grace, before the ttr ran out
        h.take(10000, 10010, 5, [("k2", "a2", 8), ("k4", "x", 9)], rod=True)
        h.ack(10020, 12020, 5, "k4", 9, "a9", outcome="info")
        h.take(12100, 12110, 2, [("k2", "a2", 10)])
        r = self.run_check(h)
        self.assertPasses(r, "G3")

    def test_abandoned_lease_never_handed_out(self):
        r = self.run_check(clean(redeliver=False))
        self.assertCaught(r, "G2", "never_redelivered")

    def test_abandoned_rod_lease_late(self):
        h = clean()
        # rod and disconnected at 10020: deadline 12020 (before ttr 13010), bound 17020
        h.take(10000, 10010, 4, [("k2", "a2", 8)], rod=True)
        h.abandon(10015, 4, "k2", 8, rod=True, disconnect_t=10020)
        h.take(18000, 18010, 2, [("k2", "a2", 9)])
        h.take(19000, 19010, 3, [])
        r = self.run_check(h)
        self.assertCaught(r, "G2", "late_redelivery")
        self.assertEqual(r["checks"]["G2"]["examples"]["late_redelivery"][0]["delay_ms"],
                         18010 - 12020)

    def test_majority_false_window_extends_the_bound(self):
        h = clean()
        h.take(10000, 10010, 4, [("k2", "a2", 8)], rod=True)
        h.abandon(10015, 4, "k2", 8, rod=True, disconnect_t=10020)
        h.nemesis(13000, 16000, name="kill-all", majority=False)   # bound 17020 + 3000
        h.take(19000, 19010, 2, [("k2", "a2", 9)])
        h.take(21000, 21010, 3, [])
        self.assertPasses(self.run_check(h), "G2")

    def test_not_checkable_is_not_flagged(self):
        # The workers stop before the bound: no verdict either way.
        h = clean()
        h.take(15000, 15010, 4, [("k2", "a2", 8)])
        h.abandon(15015, 4, "k2", 8)
        r = self.run_check(h)
        self.assertPasses(r, "G2")
        self.assertEqual(r["checks"]["G2"]["stats"]["not_checkable"], {"workers_stopped": 1})
        # A put replaced the task (it is due again at the put's time, not at once).
        h = clean(final=False)
        h.take(10000, 10010, 4, [("k2", "a2", 8)])
        h.abandon(10015, 4, "k2", 8)
        h.put(11000, 11010, 1, "k2", "v10")
        h.take(20000, 20010, 3, [])
        h.finals({"k1": "a4", "k2": "v10", "k3": "a3", "k4": None})
        r = self.run_check(h)
        self.assertTrue(r["passed"], self.text)
        self.assertEqual(r["checks"]["G2"]["stats"]["not_checkable"], {"replaced": 1})

    def test_indeterminate_take_may_hide_the_task(self):
        h = clean()
        h.take(10000, 10010, 4, [("k2", "a2", 8)])
        h.abandon(10015, 4, "k2", 8)              # deadline 13010, bound 18010
        h.take(13100, 15600, 3, [], outcome="info")   # may have leased k2 until 18600
        h.take(22000, 22010, 2, [("k2", "a2", 9)])
        h.take(25000, 25010, 3, [])
        r = self.run_check(h)
        self.assertPasses(r, "G2")
        self.assertEqual(r["checks"]["G2"]["stats"]["not_checkable"],
                         {"indeterminate_take": 1})

    def test_cli_exit_codes_and_outputs(self):
        with tempfile.TemporaryDirectory() as d:
            good = clean().write(d)
            out, summ = os.path.join(d, "r.json"), os.path.join(d, "s.txt")
            r = subprocess.run([sys.executable, CHECK, good, "--json", out, "--summary", summ,
                                "--slack-ms", "5000"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(out) as f:
                rep = json.load(f)
            self.assertEqual(set(rep["checks"]), {"G1", "replicas", "G3", "G2", "leader_reads"})
            with open(summ) as f:
                self.assertEqual(f.read(), r.stdout)
            bad = os.path.join(d, "bad.jsonl")
            clean(redeliver=False).write(d)
            os.rename(os.path.join(d, "history.jsonl"), bad)
            r = subprocess.run([sys.executable, CHECK, bad], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, r.stdout)
            with open(bad, "a") as f:
                f.write("{not json\n")
                f.write("{}\n")
            r = subprocess.run([sys.executable, CHECK, bad], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stdout)
            r = subprocess.run([sys.executable, CHECK, os.path.join(d, "none.jsonl")],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2)


SHARD_OF = {"k1": "a", "k2": "a", "k3": "b", "k4": "b"}


def sharded(lease_k3=1, applied_b2=57, final_k3=True):
    """A run on two shards behind proxies p1 and p2: each shard counts its own leases and
    applied indexes, and its nodes read only its keys. Clean with the defaults."""
    h = Hist()
    h.events[0].update(nodes=["p1", "p2"], key_shards=SHARD_OF)
    for i, key in enumerate(SHARD_OF):
        h.put(100 + 20 * i, 110 + 20 * i, 1, key, f"v{i + 1}", node="p1")
    h.take(1000, 1010, 2, [("k1", "v1", 1)], node="p2")
    h.ack(1020, 1030, 2, "k1", 1, "a1", node="p2")
    h.take(1000, 1012, 3, [("k3", "v3", lease_k3)], node="p1")
    h.ack(1020, 1030, 3, "k3", lease_k3, "a3", node="p1")
    finals = {"k1": "a1", "k2": "v2", "k3": "a3", "k4": "v4"}
    for shard, applied in (("a", {}), ("b", {"b2": applied_b2})):
        for n in (f"{shard}1", f"{shard}2", f"{shard}3"):
            for key in (k for k, s in SHARD_OF.items() if s == shard):
                if key == "k3" and n == "b3" and not final_k3:
                    continue
                h.events.append({"t": 30000, "type": "final", "node": n, "key": key,
                                 "shard": shard, "present": True, "value": finals[key],
                                 "status": "ready", "time": 1000, "version": 2})
            h.events.append({"t": 30001, "type": "final_node", "node": n, "shard": shard,
                             "applied_index": applied.get(n, 100 if shard == "a" else 57),
                             "commit_index": 100})
    return h


class ShardedCheckerTest(unittest.TestCase):
    run_check = CheckerTest.run_check
    assertPasses = CheckerTest.assertPasses
    assertCaught = CheckerTest.assertCaught

    def test_clean_sharded_history_passes(self):
        r = self.run_check(sharded())
        self.assertTrue(r["passed"], self.text)
        self.assertEqual(r["checks"]["replicas"]["stats"], {"nodes": 6, "keys": 4, "shards": 2})

    def test_lease_id_twice_in_one_shard(self):
        r = self.run_check(sharded(lease_k3=1))
        self.assertPasses(r, "G3")   # k1 and k3: lease 1 of shards a and b
        h = sharded()
        h.take(2000, 2010, 4, [("k2", "v2", 1)], node="p2")   # lease 1 of shard a again
        self.assertCaught(self.run_check(h), "G3", "duplicate_lease")

    def test_applied_index_differs_within_a_shard(self):
        self.assertCaught(self.run_check(sharded(applied_b2=56)), "replicas", "applied_index")

    def test_key_missing_on_a_node_of_its_shard(self):
        self.assertCaught(self.run_check(sharded(final_k3=False)), "replicas", "missing")

    def test_key_read_on_two_shards(self):
        h = sharded()
        h.events.append({"t": 30000, "type": "final", "node": "b1", "key": "k1", "shard": "b",
                         "present": True, "value": "a1", "status": "ready", "time": 1000,
                         "version": 2})
        self.assertCaught(self.run_check(h), "replicas", "two_shards")


if __name__ == "__main__":
    unittest.main(verbosity=1)
