"""A leased task, and the list `take` returns (a context manager)."""
from .errors import Error


class Task:
    """A task `take` leased: queue, key, payload (the msgpack value), time, lease,
    lease_until, attempts. ack/release/bury/touch act on its lease."""

    def __init__(self, client, queue, key, payload, time, lease, lease_until, attempts):
        self.client, self.queue, self.key = client, queue, key
        self.payload, self.time = payload, time
        self.lease, self.lease_until, self.attempts = lease, lease_until, attempts
        self.finished = False
        self._result = None  # (payload, time) to ack with

    @classmethod
    def from_answer(cls, client, queue, t):
        return cls(client, queue, t["key"], t.get("payload"), t.get("time"), t["lease"],
                   t.get("lease_until"), t.get("attempts", 0))

    def set_result(self, payload=None, time=None):
        """What the context manager acks with: the new payload and due time."""
        self._result = (payload, time)

    def ack(self, payload=None, time=None):
        self.finished = True
        return self.client.ack(self.queue, self.key, self.lease, payload, time)

    def release(self, delay_ms=None):
        self.finished = True
        return self.client.release(self.queue, self.key, self.lease, delay_ms)

    def bury(self):
        self.finished = True
        return self.client.bury(self.queue, self.key, self.lease)

    def touch(self, ttr_ms=None):
        self.lease_until = self.client.touch(self.queue, self.key, self.lease, ttr_ms)
        return self.lease_until

    def __repr__(self):
        return f"Task({self.queue!r}, {self.key!r}, lease={self.lease}, attempts={self.attempts})"


class Taken(list):
    """The tasks of one take. `with client.take(...) as tasks:` acks each task not finished
    when the block ends normally, and releases them when it raises."""

    def __init__(self, client, tasks):
        super().__init__(tasks)
        self.client = client

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        first = None
        for t in self:
            if t.finished:
                continue
            try:
                if exc_type is None:
                    t.ack(*(t._result or (None, None)))
                else:
                    t.release()
            except Error as e:
                first = first or e
        if first is not None and exc_type is None:
            raise first
        return False
