"""The Python client against a real 3-node dueqd cluster (testing/chaos/harness), and
against a fake node for what a real one will not do on demand (close mid-request).

  DUEQ_BUILD=build python3 -m unittest discover -s clients/python/tests -t clients/python
"""
import collections
import os
import socket
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
import dueq  # noqa: E402
import msgpack  # noqa: E402
from harness.cluster import Cluster  # noqa: E402

BUILD = os.path.abspath(os.environ.get("DUEQ_BUILD", os.path.join(ROOT, "build")))
WORKER_TASKS = int(os.environ.get("DUEQ_WORKER_TASKS", "1000"))


def now_ms():
    return int(time.time() * 1000)


class FakeNode:
    """Accepts connections, answers hello, reads one more frame on each, and closes
    without answering it. With `refuse` (an error dict), it answers that instead."""

    def __init__(self, refuse=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests = 0
        self.hellos = []
        self.refuse = refuse
        threading.Thread(target=self._serve, daemon=True).start()

    @staticmethod
    def _read(conn):
        n = int.from_bytes(conn.recv(4), "big")
        body = b""
        while len(body) < n:
            chunk = conn.recv(n - len(body))
            if not chunk:
                return None
            body += chunk
        return msgpack.unpackb(body) if n else None

    @staticmethod
    def _send(conn, frame):
        body = msgpack.packb(frame)
        conn.sendall(len(body).to_bytes(4, "big") + body)

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                while True:
                    req = self._read(conn)
                    if req is None:
                        break
                    if req.get("op") == "hello":
                        self.hellos.append(req.get("session"))
                        self._send(conn, {"id": req["id"], "ok": True, "session": 5})
                        continue
                    self.requests += 1
                    if self.refuse:
                        self._send(conn, {"id": req["id"], "ok": False, "error": self.refuse})
                        continue
                    break
            except OSError:
                pass
            finally:
                conn.close()

    def close(self):
        self.sock.close()


class WithoutServer(unittest.TestCase):
    def test_a_broken_connection_leaves_a_write_unknown_and_a_read_retried(self):
        fake = FakeNode()
        try:
            c = dueq.Client([fake.address], call_timeout=1.0, idle_ping=0)
            with self.assertRaises(dueq.Error) as e:
                c.put("q", "k", 1)
            self.assertEqual(e.exception.outcome, dueq.UNKNOWN)
            self.assertEqual(fake.requests, 1)  # never resent
            before = fake.requests
            with self.assertRaises(dueq.Error):
                c.get("q", "k")
            self.assertGreater(fake.requests - before, 1)  # a get is resent
            c.close()
        finally:
            fake.close()

    def test_no_quorum_goes_to_the_leader_named_or_the_next_node(self):
        leader = FakeNode(refuse={"code": "exists", "message": "the leader's answer"})
        cut_off = FakeNode(refuse={"code": "no_quorum", "message": "cut off",
                                   "leader": leader.address})
        lost = FakeNode(refuse={"code": "no_quorum", "message": "cut off"})
        try:
            for seeds in ([cut_off.address], [lost.address, leader.address]):
                c = dueq.Client(seeds, call_timeout=2.0, idle_ping=0)
                with self.assertRaises(dueq.Error) as e:
                    c.put("q", "k", 1, mode="insert")
                self.assertEqual(e.exception.code, "exists")  # answered by the leader
                self.assertEqual(c.current_address(), leader.address)
                c.close()
            # The session the first node gave is offered to the others (sessions are the
            # cluster's).
            self.assertIn(5, leader.hellos)
        finally:
            for f in (leader, cut_off, lost):
                f.close()

    def test_moving_is_retried_on_the_same_node(self):
        node = FakeNode(refuse={"code": "moving", "message": "bucket 3 is sending"})
        other = FakeNode(refuse={"code": "not_leader", "message": "a follower"})
        try:
            c = dueq.Client([node.address, other.address], call_timeout=0.6, idle_ping=0)
            with self.assertRaises(dueq.Error) as e:
                c.put("q", "k", 1)
            self.assertEqual(e.exception.code, "moving")  # still moving at the deadline
            self.assertEqual(e.exception.outcome, dueq.NOT_APPLIED)
            self.assertGreater(node.requests, 2)
            self.assertEqual(other.requests, 0)  # the same node, not the next seed
            # The move ends meanwhile: the node's answer comes through.
            threading.Timer(0.2, lambda: setattr(
                node, "refuse", {"code": "exists", "message": "served"})).start()
            with self.assertRaises(dueq.Error) as e:
                c.put("q", "k", 1, mode="insert")
            self.assertEqual(e.exception.code, "exists")
            c.close()
        finally:
            for f in (node, other):
                f.close()

    def test_no_node_reachable_is_not_applied(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        s.close()
        c = dueq.Client([address], call_timeout=0.5, idle_ping=0)
        with self.assertRaises(dueq.Error) as e:
            c.put("q", "k", 1)
        self.assertEqual((e.exception.code, e.exception.outcome), ("unavailable",
                                                                   dueq.NOT_APPLIED))


@unittest.skipUnless(os.path.exists(os.path.join(BUILD, "cmd/dueqd/dueqd")),
                     "no dueqd built (set DUEQ_BUILD)")
class AgainstCluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory(prefix="dueq-python-client-")
        cls.cluster = Cluster(BUILD, cls.work.name, log=lambda m: None, ttr_ms=3000)
        cls.cluster.start(seed=1)
        assert cls.cluster.wait_leader(30)
        cls.seeds = [f"127.0.0.1:{cls.cluster.client_port[n]}" for n in cls.cluster.ids]
        cls.client = dueq.Client(cls.seeds)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.stop()
        cls.work.cleanup()

    def test_put_take_ack(self):
        c = self.client
        self.assertEqual(c.put("py-basic", "k1", {"token": "a"}, time=now_ms() - 1), 1)
        self.assertEqual(c.get("py-basic", "k1")["payload"], {"token": "a"})
        self.assertIsNone(c.get("py-basic", "nothing"))
        [t] = c.take("py-basic")
        self.assertEqual((t.key, t.payload, t.attempts), ("k1", {"token": "a"}, 1))
        t.touch(10000)
        t.ack({"token": "b"}, now_ms() + 3_600_000)
        with self.assertRaises(dueq.Error) as e:
            t.ack({"token": "stale"})
        self.assertEqual(e.exception.code, "lease_mismatch")
        self.assertTrue(e.exception.not_applied)
        self.assertEqual(c.get("py-basic", "k1")["payload"], {"token": "b"})

    def test_take_as_a_context_manager(self):
        c = self.client
        c.put("py-ctx", "ok", 1, time=now_ms() - 1)
        with c.take("py-ctx") as tasks:
            tasks[0].set_result({"new": True}, now_ms() + 3_600_000)
        self.assertEqual(c.get("py-ctx", "ok")["payload"], {"new": True})
        c.put("py-ctx", "fails", 1, time=now_ms() - 1)
        with self.assertRaises(RuntimeError):
            with c.take("py-ctx") as tasks:
                self.assertEqual(tasks[0].key, "fails")
                raise RuntimeError("the refresh failed")
        self.assertEqual(c.get("py-ctx", "fails")["status"], "ready")  # released

    def test_a_follower_redirects_to_the_leader(self):
        leader = self.cluster.leader()
        follower = next(n for n in self.cluster.ids if n != leader)
        with dueq.Client([f"127.0.0.1:{self.cluster.client_port[follower]}"]) as c:
            c.put("py-redirect", "k", 1)
            self.assertEqual(c.current_address(),
                             f"127.0.0.1:{self.cluster.client_port[leader]}")

    def test_pipelined_puts_from_threads(self):
        c = self.client
        errors = []

        def put(t):
            try:
                for i in range(125):
                    c.put("py-pipe", f"t{t}-{i}", i, time=now_ms() + 3_600_000)
            except dueq.Error as e:
                errors.append(e)
        threads = [threading.Thread(target=put, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(c.stats("py-pipe")["ready"], 1000)

    def test_worker_acks_each_task_once_and_stops_clean(self):
        c = self.client
        queue, n, ttr = "py-worker", WORKER_TASKS, 1500
        for i in range(n):
            c.put(queue, f"w{i}", {"i": i}, time=now_ms() - 1)
        acked = collections.Counter()
        seen = collections.Counter()
        lock = threading.Lock()

        def handler(task):
            with lock:
                seen[task.key] += 1
                first = seen[task.key] == 1
            i = task.payload["i"]
            if first and i % 10 == 3:
                raise RuntimeError("a refresh that fails once")
            if first and i % 331 == 11:
                time.sleep(ttr / 1000 * 3)  # hangs past the ttr: given up on, handed out again
                return dueq.Result({"i": i, "hung": True})
            if i % 97 == 5:
                time.sleep(ttr / 1000 * 0.8)  # past half the ttr: touched, kept
            if i % 250 == 7:
                raise dueq.Bury()
            with lock:
                acked[task.key] += 1
            return dueq.Result({"i": i, "done": True}, now_ms() + 3_600_000)

        w = dueq.Worker(c, queue, handler, concurrency=16, ttr_ms=ttr, take_timeout_ms=200,
                        grace=5.0, handler_timeout=ttr / 1000 * 2)
        runner = threading.Thread(target=w.run)
        runner.start()
        deadline = time.time() + 120
        while time.time() < deadline:
            s = c.stats(queue)
            if s["due_now"] == 0 and s["taken"] == 0:
                break
            time.sleep(0.2)
        t0 = time.time()
        w.stop()
        runner.join(30)
        self.assertFalse(runner.is_alive())
        self.assertLess(time.time() - t0, 5.0 + 2)
        s = c.stats(queue, consistency="leader")
        buried = sum(1 for i in range(n) if i % 250 == 7)
        # Acked tasks are ready again, due in an hour.
        self.assertEqual((s["due_now"], s["taken"], s["buried"], s["ready"]),
                         (0, 0, buried, n - buried))
        self.assertEqual(w.counts["acked"], n - buried)
        self.assertEqual(w.counts["buried"], buried)
        hung = sum(1 for i in range(n) if i % 331 == 11 and i % 10 != 3)
        self.assertEqual(w.counts["timed_out"], hung)
        for i in range(n):
            if i % 331 == 11 and i % 10 != 3:  # the hung handler's late result was dropped
                self.assertNotIn("hung", c.get(queue, f"w{i}")["payload"])
        print(f"worker, {n} tasks: {dict(w.counts)}", file=sys.stderr)
        self.assertEqual(sum(1 for v in acked.values() if v != 1), 0)  # each acked once
        for i in range(0, n, max(1, n // 50)):
            task = c.get(queue, f"w{i}")
            self.assertEqual(task["status"], "buried" if i % 250 == 7 else "ready")

    def test_worker_stop_releases_what_it_holds(self):
        c = self.client
        queue = "py-stop"
        for i in range(20):
            c.put(queue, f"s{i}", i, time=now_ms() - 1)
        started = threading.Event()

        def hang(task):
            started.set()
            time.sleep(30)  # outlives the grace

        w = dueq.Worker(c, queue, hang, concurrency=4, ttr_ms=10000, take_timeout_ms=200,
                        grace=0.5)
        runner = threading.Thread(target=w.run)
        runner.start()
        self.assertTrue(started.wait(10))
        t0 = time.time()
        w.stop()
        runner.join(10)
        self.assertFalse(runner.is_alive())
        self.assertLess(time.time() - t0, 0.5 + 1.5)
        s = c.stats(queue, consistency="leader")
        self.assertEqual((s["taken"], s["ready"]), (0, 20))
        self.assertEqual(w.counts["released"], 4)


if __name__ == "__main__":
    unittest.main()
