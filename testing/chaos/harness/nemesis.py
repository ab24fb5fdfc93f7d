"""Nemeses: faults that start, hold for a while, and heal. Each cycle of a scenario runs
one of them: start() injects the fault, stop() undoes it (restarting what it killed).
`majority` says whether a majority can still serve while the fault holds: time in windows
without one does not count against the availability and redelivery (G2) bounds.
"""
import time


class Nemesis:
    name = "?"
    majority = True
    hold = 5.0           # seconds the fault lasts
    needs = {}           # Cluster options the nemesis needs (power_cut, faketime)

    def __init__(self, rng):
        self.rng = rng

    def start(self, c):
        raise NotImplementedError

    def stop(self, c):
        pass

    def describe(self):
        return self.name

    def affected(self):
        """The nodes cut off, paused or down during the fault: the others are the
        majority side whose refresh rate the figures report."""
        node = getattr(self, "node", None)
        return [node] if node else []


class IsolateLeader(Nemesis):
    """Every link to and from the leader goes silent (a cut cable: nothing closes)."""
    name = "isolate-leader"

    def start(self, c):
        self.node = c.leader() or self.rng.choice(c.ids)
        c.isolate(self.node)

    def stop(self, c):
        c.heal_links()


class Split(Nemesis):
    """A random node (a datacenter) is cut off from the other two; clients on both sides
    keep talking to their local node."""
    name = "split"

    def start(self, c):
        self.node = self.rng.choice(c.ids)
        c.isolate(self.node)

    def stop(self, c):
        c.heal_links()


class Bridge(Nemesis):
    """The leader and one follower cannot see each other; the third node sees both."""
    name = "bridge"

    def start(self, c):
        leader = c.leader() or self.rng.choice(c.ids)
        others = [n for n in c.ids if n != leader]
        self.rng.shuffle(others)
        self.middle, far = others
        c.cut(leader, far)
        c.cut(far, leader)

    def stop(self, c):
        c.heal_links()


class OneWay(Nemesis):
    """Random one-way cuts, re-drawn every 1.5-3 s: a node can send to a peer but not hear
    it, or the reverse. At most two directions cut at once, so one pair stays whole."""
    name = "one-way"
    hold = 8.0

    def start(self, c):
        self.deadline = time.time() + self.hold
        while time.time() < self.deadline:
            c.heal_links()
            pairs = [(a, b) for a in c.ids for b in c.ids if a != b]
            for a, b in self.rng.sample(pairs, self.rng.choice([1, 2])):
                c.cut(a, b)
            if self.rng.random() < 0.3:
                a, b = self.rng.choice(pairs)
                c.proxy_cmd(f"drop {a}-{b}")  # now and then a link breaks outright
            time.sleep(self.rng.uniform(1.5, 3.0))
        self.hold = 0.0  # the cuts above were the fault's whole length

    def stop(self, c):
        c.heal_links()


class CrossDcCut(Nemesis):
    """Every link 20-100 ms each way (three datacenters), then one datacenter cut off
    while the others stay slow."""
    name = "cross-dc"
    hold = 8.0

    def start(self, c):
        c.proxy_cmd("set * both delay 20 100")
        time.sleep(2.0)
        self.node = self.rng.choice(c.ids)
        c.isolate(self.node)

    def stop(self, c):
        c.heal_links()


class KillLeader(Nemesis):
    """kill -9 of the leader every cycle, restarted after the hold (failover figures)."""
    name = "kill-leader"
    hold = 2.0

    def start(self, c):
        self.node = c.leader() or self.rng.choice(c.ids)
        c.kill(self.node)

    def stop(self, c):
        c.start_node(self.node)


class PauseLeader(Nemesis):
    """SIGSTOP of the leader for three election timeouts, then SIGCONT: it wakes up
    deposed, with its clients still connected."""
    name = "pause-leader"

    def start(self, c):
        self.node = c.leader() or self.rng.choice(c.ids)
        self.hold = 3 * c.election_ms / 1000.0
        c.pause(self.node)

    def stop(self, c):
        c.resume(self.node)


class ClockJump(Nemesis):
    """The leader's wall clock jumps 30 s ahead (libfaketime), then back."""
    name = "clock-jump"
    needs = {"faketime": True}
    hold = 6.0

    def start(self, c):
        self.node = c.leader() or self.rng.choice(c.ids)
        c.set_clock_offset(self.node, 30)

    def affected(self):
        return []  # its clock is wrong, but it stays connected

    def stop(self, c):
        c.set_clock_offset(self.node, 0)


class ClockFast(Nemesis):
    """The leader's wall clock runs three times too fast for 8 s (a step of +1 s every
    0.5 s: libfaketime's own speed factor also scales sleeps), then is set right."""
    name = "clock-fast"
    needs = {"faketime": True}
    hold = 8.0

    def start(self, c):
        self.node = c.leader() or self.rng.choice(c.ids)
        offset, deadline = 0, time.time() + self.hold
        while time.time() < deadline:
            offset += 1
            c.set_clock_offset(self.node, offset)
            time.sleep(0.5)
        self.hold = 0.0

    def stop(self, c):
        c.set_clock_offset(self.node, 0)

    def affected(self):
        return []


class Kill(Nemesis):
    """kill -9 in turn of the leader, a follower, two nodes, and all nodes; restart."""
    name = "kill"
    hold = 2.0
    round = 0

    def start(self, c):
        kind = ["leader", "follower", "two", "all"][Kill.round % 4]
        Kill.round += 1
        leader = c.leader() or self.rng.choice(c.ids)
        followers = [n for n in c.ids if n != leader]
        victims = {"leader": [leader], "follower": [self.rng.choice(followers)],
                   "two": [leader, self.rng.choice(followers)], "all": list(c.ids)}[kind]
        self.kind = kind
        self.victims = victims
        self.majority = len(victims) <= (len(c.ids) - 1) // 2
        for n in victims:
            c.kill(n)

    def stop(self, c):
        for n in c.down():
            c.start_node(n)

    def describe(self):
        return f"kill-{self.kind}"

    def affected(self):
        return self.victims


class RollingKill(Nemesis):
    """kill -9 of every node in turn, each restarted before the next dies."""
    name = "kill-rolling"
    hold = 0.0

    def start(self, c):
        for n in c.ids:
            c.wait_leader(timeout=30)
            c.kill(n)
            time.sleep(self.rng.uniform(0.5, 2.0))
            c.start_node(n)


class PowerLoss(Nemesis):
    """Every node loses power at once: what it had not fsynced is gone. Then all restart."""
    name = "power-loss"
    needs = {"power_cut": True}
    majority = False
    hold = 1.0

    def start(self, c):
        self.all = list(c.ids)
        c.power_cut_all()

    def affected(self):
        return self.all

    def stop(self, c):
        for n in c.down():
            c.start_node(n)


class Replace(Nemesis):
    """The runbook "replace a datacenter's node" under load: a voter's machine is lost for
    good (kill -9, data dir wiped), a fresh machine is added under a new id (member add,
    dueqd --join), caught up and promoted, and the old id removed."""
    name = "replace"
    needs = {"spares": 1}
    hold = 0.0

    def start(self, c):
        self.node = self.rng.choice(c.ids)
        c.lose_for_good(self.node)
        self.new = c.next_spare()
        self.seconds = c.add_member(self.new)
        c.remove_member(self.node)
        c.log(f"  replaced {self.node} by {self.new} (raft id {c.raft_ids[self.new]}): "
              f"added to promoted in {self.seconds:.1f} s")


class RemoveLeader(Nemesis):
    """The leader is removed while it serves (it hands over once the change commits, then
    stops), and a fresh machine takes its place (add, join, promote)."""
    name = "remove-leader"
    needs = {"spares": 1}
    hold = 0.0

    def start(self, c):
        self.node = c.wait_leader(30) or self.rng.choice(c.ids)
        c.remove_member(self.node)
        self.new = c.next_spare()
        self.seconds = c.add_member(self.new)
        c.log(f"  removed leader {self.node}; {self.new} (raft id {c.raft_ids[self.new]}) "
              f"added to promoted in {self.seconds:.1f} s")

    def affected(self):
        return []  # the cluster keeps a majority throughout


ALL = [IsolateLeader, Split, Bridge, OneWay, CrossDcCut, PauseLeader, ClockJump, ClockFast,
       Kill, KillLeader, RollingKill, PowerLoss, Replace, RemoveLeader]
BY_NAME = {n.name: n for n in ALL}
