"""Worker: the take -> handle -> ack loop of a refresher, with lease heartbeats and a
graceful stop."""
import collections
import concurrent.futures
import threading
import time

from .errors import Bury, Error

Result = collections.namedtuple("Result", ["payload", "time"], defaults=[None, None])


class _Held:
    """A task a handler runs on: when its lease is touched next, and whether the worker gave
    up on it (released at a stop or a handler timeout, or lost to lease_mismatch)."""

    __slots__ = ("task", "started", "next_touch", "abandoned")

    def __init__(self, task, now, ttr_ms):
        self.task, self.started = task, now
        self.next_touch = now + ttr_ms / 2000.0
        self.abandoned = False


class Worker:
    """Worker(client, queue, handler, concurrency=4, ttr_ms=30000, ...).

    `handler(task)` returns None (ack as is), a Result(payload, time) to ack with, or
    raises: Bury buries the task, anything else releases it after `release_delay_ms`.
    While a handler runs, its lease is touched every ttr/2. A task whose lease turned out
    stale (lease_mismatch: it expired and went to another worker) is dropped, never acked.
    A handler that runs past `handler_timeout` seconds (if set) is given up on: its task is
    released and its result dropped. stop() stops taking, lets running handlers finish
    within `grace` seconds, releases what is still held, and makes run() return."""

    def __init__(self, client, queue, handler, concurrency=4, batch=None, ttr_ms=30000,
                 take_timeout_ms=1000, grace=10.0, release_delay_ms=0, handler_timeout=None):
        self.client, self.queue, self.handler = client, queue, handler
        self.concurrency = concurrency
        self.batch = batch or concurrency
        self.ttr_ms = ttr_ms
        self.take_timeout_ms = take_timeout_ms
        self.grace = grace
        self.release_delay_ms = release_delay_ms
        # A handler that runs longer is given up on: its task is released for another
        # worker (the handler's thread runs on; its result is dropped).
        self.handler_timeout = handler_timeout
        self.counts = collections.Counter()  # acked, released, buried, dropped, errors
        self._count_lock = threading.Lock()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._held = {}  # key -> _Held
        self._free = threading.Semaphore(concurrency)

    def _count(self, what):
        with self._count_lock:
            self.counts[what] += 1

    def stop(self):
        self._stopping.set()

    def run(self):
        pool = concurrent.futures.ThreadPoolExecutor(self.concurrency,
                                                     thread_name_prefix="dueq-worker")
        toucher = threading.Thread(target=self._touch_loop, daemon=True)
        toucher.start()
        try:
            while not self._stopping.is_set():
                if not self._free.acquire(timeout=0.1):
                    continue
                n = 1
                while n < self.batch and self._free.acquire(blocking=False):
                    n += 1
                try:
                    tasks = self.client.take(self.queue, count=n, ttr_ms=self.ttr_ms,
                                             timeout_ms=self.take_timeout_ms)
                except Error:
                    self._count("errors")
                    tasks = []
                    time.sleep(0.1)
                for _ in range(n - len(tasks)):
                    self._free.release()
                for t in tasks:
                    with self._lock:
                        self._held[t.key] = _Held(t, time.monotonic(), self.ttr_ms)
                    pool.submit(self._handle, t)
        finally:
            self._stopping.set()
            pool.shutdown(wait=False)
            deadline = time.monotonic() + self.grace
            while time.monotonic() < deadline:
                with self._lock:
                    if all(e.abandoned for e in self._held.values()):  # abandoned ones run on
                        break
                time.sleep(0.02)
            self._release_held()
            toucher.join(timeout=1)

    def _handle(self, task):
        try:
            outcome = self._run_handler(task)
            with self._lock:
                entry = self._held.pop(task.key, None)
            if entry is None or entry.abandoned:
                return  # released by the stop, or dropped by the toucher
            self._finish(task, *outcome)
        finally:
            self._free.release()

    def _run_handler(self, task):
        try:
            r = self.handler(task)
            return ("ack", r)
        except Bury:
            return ("bury", None)
        except Exception:  # a handler's failure is the task's retry, not the worker's end
            return ("release", None)

    def _finish(self, task, action, result):
        try:
            if action == "ack":
                payload, when = (result or Result())
                task.ack(payload, when)
                self._count("acked")
            elif action == "bury":
                task.bury()
                self._count("buried")
            else:
                task.release(self.release_delay_ms or None)
                self._count("released")
        except Error as e:
            self._count("dropped" if e.code == "lease_mismatch" else "errors")

    def _touch_loop(self):
        while not self._stopping.is_set() or any(not e.abandoned for e in self._held.values()):
            now = time.monotonic()
            with self._lock:
                due = [e for e in self._held.values() if e.next_touch <= now and not e.abandoned]
                late = [e for e in self._held.values() if not e.abandoned and self.handler_timeout
                        and now - e.started > self.handler_timeout]
                for e in late:
                    e.abandoned = True
            for e in late:
                try:
                    e.task.release(self.release_delay_ms or None)
                    self._count("timed_out")
                except Error as err:
                    self._count("dropped" if err.code == "lease_mismatch" else "errors")
            for e in due:
                if e.abandoned:
                    continue
                try:
                    e.task.touch(self.ttr_ms)
                    e.next_touch = time.monotonic() + self.ttr_ms / 2000.0
                except Error as err:
                    if err.code == "lease_mismatch":
                        e.abandoned = True
                        self._count("dropped")
            time.sleep(0.05)

    def _release_held(self):
        with self._lock:
            left = [e for e in self._held.values() if not e.abandoned]
            for e in self._held.values():
                e.abandoned = True
        for e in left:
            try:
                e.task.release()
                self._count("released")
            except Error as err:
                self._count("dropped" if err.code == "lease_mismatch" else "errors")
