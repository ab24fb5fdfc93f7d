#!/usr/bin/env python3
"""The membership ops against real processes (docs/operations.md, docs/protocol.md).

  membership_ops.py [--build build] [--keep DIR]

Three dueqd (testing/chaos/harness) and a spare. Checks that bad requests are refused with
the documented codes and change nothing; that a learner too far behind is not promoted;
that a member restarted under its old id with a wiped data dir is refused by its peers
(it cannot vote or join) and says what to do, and that the runbook then replaces it; that a
new member joins (dueqd --join), is promoted and counts; that a removed member stops by
itself with exit status 78 and says why, and stops again if restarted on its data dir; and
that a data dir is refused under another Raft id (--join with the wrong id); and that a
flipped byte in a WAL or a table file is refused with the runbook. Exit 0 on pass."""
import glob
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.cluster import Cluster, free_port  # noqa: E402
from harness.test_main import test_main  # noqa: E402

REMOVED_EXIT = 78


def expect_refused(c, code, *args):
    rc, _, err = c.ctl(*args)
    if rc == 0 or code not in err:
        raise AssertionError(f"dueqctl {' '.join(args)}: wanted {code}, got exit {rc}: {err}")


def names(c):
    return sorted(m["name"] for m in c.members()["members"])


def refused_with_flipped_wal(c, work, n):
    """Flips a byte a third of the way into the written part of n's newest WAL, checks that
    dueqd refuses to start with the runbook, and puts the byte back."""
    wals = sorted(glob.glob(os.path.join(work, n, "data", "*.log")))
    if not wals:
        return f"{n} left no WAL file after kill -9"
    data = bytearray(open(wals[-1], "rb").read())
    written = len(data.rstrip(b"\0"))
    at = written // 3
    while at < written and data[at] == 0:  # a block's zero trailer is not a record
        at += 1
    if written < 20000:
        return f"{n}'s WAL holds only {written} bytes after the puts"
    data[at] ^= 0x40
    open(wals[-1], "wb").write(data)
    conf = os.path.join(work, n, "dueqd.toml")
    r = subprocess.run([c.binary("cmd/dueqd/dueqd"), "--config", conf],
                       capture_output=True, text=True, timeout=60)
    data[at] ^= 0x40
    open(wals[-1], "wb").write(data)
    if r.returncode == 0 or "WAL file" not in r.stderr or "member remove" not in r.stderr:
        return f"{n} with a flipped WAL byte: exit {r.returncode}: {r.stderr[-600:]}"
    return None


def run(build, work):
    c = Cluster(build, work, spares=1, log=lambda m: None)
    try:
        c.start(seed=1)
        if not c.wait_leader(30):
            return "no leader"
        # The leader records the members' data ids in the membership by itself soon after
        # the start (a directory-only change): wait for that, so that it is not taken for a
        # change a refused request made.
        before, deadline = c.members(), time.time() + 15
        while time.time() < deadline:
            time.sleep(1)
            now = c.members()
            if now["membership_index"] == before["membership_index"] != 0:
                break
            before = now
        # Bad requests change nothing.
        expect_refused(c, "bad_request", "member", "add", "n9", "--peer", "not-an-address",
                       "--client", "127.0.0.1:1")
        expect_refused(c, "exists", "member", "add", "n2", "--peer", "127.0.0.1:1",
                       "--client", "127.0.0.1:2")
        expect_refused(c, "not_found", "member", "promote", "n9")
        expect_refused(c, "not_found", "member", "remove", "n9")
        expect_refused(c, "bad_request", "member", "promote", "n2")  # a voter already
        after = c.members()
        if before["membership_index"] != after["membership_index"] or names(c) != ["n1", "n2", "n3"]:
            return f"a refused change changed the membership: {before} -> {after}"
        # A member whose data dir is wiped comes back under its old id: refused by its peers
        # (the leader recorded every member's data id in the membership when it first saw it).
        time.sleep(3)
        leader = c.wait_leader(30)
        wiped = next(n for n in ("n1", "n2", "n3") if n != leader)
        c.lose_for_good(wiped)
        c.start_node(wiped)
        c.ids.remove(wiped)  # clients go to the others (the wiped node answers no_quorum)
        deadline = time.time() + 15
        log = os.path.join(work, wiped, "dueqd.log")
        while time.time() < deadline and "knows this node" not in open(log).read():
            time.sleep(0.2)
        text = open(log).read()
        if "knows this node" not in text or "dueqctl member remove" not in text:
            return f"wiped {wiped} restarted under its old id was not told it is refused: {text[-800:]}"
        peers_said = "".join(open(os.path.join(work, n, "dueqd.log")).read()
                             for n in ("n1", "n2", "n3") if n != wiped)
        if "data dir was wiped or replaced" not in peers_said:
            return "no peer logged why it refused the wiped member"
        links = {m["name"]: m["connected"] for m in c.members()["members"]}
        if links.get(wiped):
            return f"the leader has a link to the wiped {wiped}: {links}"
        rc, _, err = c.ctl("put", "q", "k0", "--payload", '"v"')
        if rc != 0:
            return f"put with the wiped member refused: {err}"
        # The runbook: remove it, add the machine back as a new member.
        c.kill(wiped)
        c.ctl_until(60, "member", "remove", wiped, done_if=f"no member {wiped}")
        c.add_member(wiped)
        if c.raft_ids[wiped] <= 3:
            return f"{wiped} came back under an old id {c.raft_ids[wiped]}"
        # A learner that never started cannot be promoted.
        c.client_port["n4"] = free_port()  # fresh: one picked at the start may be taken now
        rc, out, err = c.ctl("member", "add", "n4", "--peer", f"127.0.0.1:{c.peer_port['n4']}",
                             "--client", f"127.0.0.1:{c.client_port['n4']}")
        if rc != 0:
            return f"member add n4 failed: {err}"
        expect_refused(c, "unavailable", "member", "promote", "n4")
        # A --join under another id is refused once the data dir has one.
        c.ids.append("n4")
        c.start_node("n4", join=out["raft_id"])
        c.ctl_until(60, "member", "promote", "n4")
        roles = {m["name"]: m["role"] for m in c.members()["members"]}
        if roles != {"n1": "voter", "n2": "voter", "n3": "voter", "n4": "voter"}:
            return f"after promote: {roles}"
        c.kill("n4")
        conf = os.path.join(work, "n4", "dueqd.toml")
        r = subprocess.run([c.binary("cmd/dueqd/dueqd"), "--config", conf, "--join",
                            str(out["raft_id"] + 7)], capture_output=True, text=True, timeout=60)
        if r.returncode == 0 or "refusing to serve" not in r.stderr:
            return f"--join with another id on n4's data dir: exit {r.returncode}: {r.stderr[-500:]}"
        c.start_node("n4")  # its own id again, from its member record
        # Remove a follower: it stops by itself, with status 78, and says why.
        leader = c.wait_leader(30)
        victim = next(n for n in ("n1", "n2", "n3") if n != leader)
        proc = c.procs[victim]
        c.ctl_until(60, "member", "remove", victim, done_if=f"no member {victim}")
        c.ids.remove(victim)
        try:
            status = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            return f"removed {victim} did not stop within 30 s"
        c.procs[victim] = None
        log = open(os.path.join(work, victim, "dueqd.log")).read()
        if status != REMOVED_EXIT or "was removed from the cluster" not in log:
            return f"removed {victim} exited {status}; its log ends: {log[-500:]}"
        # Restarted on its data dir, it stops again.
        conf = os.path.join(work, victim, "dueqd.toml")
        r = subprocess.run([c.binary("cmd/dueqd/dueqd"), "--config", conf],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != REMOVED_EXIT:
            return f"restarted removed {victim}: exit {r.returncode}: {r.stderr[-500:]}"
        # A member killed with a flipped byte inside the written part of its WAL is refused
        # (storage/wal_check.h); RocksDB alone would open it with a shorter log.
        damaged = next(n for n in c.ids if n != c.wait_leader(30))
        for i in range(60):
            c.ctl("put", "q", f"w{i}", "--payload", '"' + "x" * 400 + '"')
        c.kill(damaged)
        problem = refused_with_flipped_wal(c, work, damaged)
        if problem:
            return problem
        c.start_node(damaged)
        # A task or log file (*.sst) with a flipped byte is refused at start, with the
        # runbook (RocksDB's block checksums; the files are flushed by a clean stop).
        c.signal(damaged, signal.SIGTERM)
        c.procs[damaged].wait(timeout=30)
        c.procs[damaged] = None
        ssts = sorted(glob.glob(os.path.join(work, damaged, "data", "*.sst")), key=os.path.getsize)
        if not ssts:
            return f"{damaged} left no table file after a clean stop"
        data = bytearray(open(ssts[-1], "rb").read())
        data[len(data) // 3] ^= 0x40
        open(ssts[-1], "wb").write(data)
        conf = os.path.join(work, damaged, "dueqd.toml")
        r = subprocess.run([c.binary("cmd/dueqd/dueqd"), "--config", conf],
                           capture_output=True, text=True, timeout=60)
        if r.returncode == 0 or "damaged" not in r.stderr or "member remove" not in r.stderr:
            return f"{damaged} with a flipped byte: exit {r.returncode}: {r.stderr[-600:]}"
        c.ctl_until(60, "member", "remove", damaged, done_if=f"no member {damaged}")
        c.ids.remove(damaged)
        victim2 = damaged
        # The rest still serve.
        rc, _, err = c.ctl("put", "q", "k", "--payload", '"v"')
        if rc != 0:
            return f"put after the changes: {err}"
        if names(c) != sorted(n for n in ("n1", "n2", "n3", "n4") if n not in (victim, victim2)):
            return f"members at the end: {names(c)}"
        return None
    finally:
        c.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "membership ops")
