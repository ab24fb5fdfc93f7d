"""One TCP (or TLS) connection to one node: requests written in order, answers matched by
id as they come (docs/protocol.md §6), by a reader thread."""
import socket
import struct
import threading

import msgpack

from .errors import Error, UNKNOWN


class Pending:
    """A request in flight: the answer, or the connection's end, completes it."""

    __slots__ = ("event", "frame", "error", "written")

    def __init__(self):
        self.event = threading.Event()
        self.frame = None
        self.error = None
        self.written = False


class Connection:
    def __init__(self, address, connect_timeout, ssl_context=None, max_frame_bytes=1 << 26):
        host, _, port = address.rpartition(":")
        self.address = address
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=host.strip("[]"))
        sock.settimeout(None)
        self._sock = sock
        self._max = max_frame_bytes
        self._lock = threading.Lock()  # the pending map, ids, counters
        self._write_lock = threading.Lock()
        self._pending = {}
        self._next_id = 1
        self.closed = False
        self.heard = 0  # answers received: a deadline with none since a write means silence
        self._reader = threading.Thread(target=self._read_loop, daemon=True,
                                        name=f"dueq-reader-{address}")
        self._reader.start()

    def send(self, request):
        """Writes `request` (a dict without id); returns its Pending."""
        p = Pending()
        with self._lock:
            if self.closed:
                p.error = Error("unavailable", f"connection to {self.address} is closed",
                                outcome="not_applied")
                p.event.set()
                return p
            rid = self._next_id
            self._next_id += 1
            self._pending[rid] = p
        body = msgpack.packb({"id": rid, **request}, use_bin_type=True)
        # Writes have their own lock: a write that blocks (the node stopped reading until
        # its answers are read) must not keep the reader from taking answers.
        with self._write_lock:
            try:
                self._sock.sendall(struct.pack(">I", len(body)) + body)
                p.written = True
            except OSError as e:
                with self._lock:
                    self._pending.pop(rid, None)
                p.error = Error("unavailable", f"writing to {self.address}: {e}",
                                outcome="not_applied")
                p.event.set()
        return p

    def idle(self):
        """Nothing in flight: a connection left for the leader may close."""
        with self._lock:
            return not self._pending

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise OSError("connection closed by the server")
            buf += chunk
        return bytes(buf)

    def _read_loop(self):
        why = "connection closed"
        try:
            while True:
                (n,) = struct.unpack(">I", self._recv_exact(4))
                if n == 0 or n > self._max:
                    why = f"frame of {n} bytes from {self.address}"
                    break
                frame = msgpack.unpackb(self._recv_exact(n), raw=False, strict_map_key=False)
                rid = frame.get("id") if isinstance(frame, dict) else None
                with self._lock:
                    self.heard += 1
                    p = self._pending.pop(rid, None)
                if p is not None:
                    p.frame = frame
                    p.event.set()
                elif rid == 0 and isinstance(frame, dict) and not frame.get("ok", True):
                    err = frame.get("error") or {}
                    why = f"{err.get('code')}: {err.get('message')}"
        except (OSError, ValueError, msgpack.UnpackException, struct.error) as e:
            why = str(e) or type(e).__name__
        self._fail_all(why)

    def _fail_all(self, why):
        with self._lock:
            self.closed = True
            pending, self._pending = self._pending, {}
        for p in pending.values():
            # Written and unanswered: it may have been applied.
            p.error = Error("unavailable", f"{self.address}: {why}; the outcome is unknown",
                            outcome=UNKNOWN)
            p.event.set()
        try:
            self._sock.close()
        except OSError:
            pass

    def close(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._fail_all("closed by the client")
