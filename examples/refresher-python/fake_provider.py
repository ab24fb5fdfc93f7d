"""A stand-in OAuth provider for the example: it issues access tokens that expire, refreshes
them on POST /token {"refresh_token": ...}, and rate-limits like a real one (429 with
Retry-After past `rate` requests a second). It keeps score: a refresh that came while the
token it replaces was still valid is on time, one after it expired is late."""
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeProvider:
    def __init__(self, expires_in=(10.0, 30.0), rate=200, port=0):
        self.expires_in = expires_in
        self.rate = rate
        self.lock = threading.Lock()
        self.tokens = {}  # refresh token -> expiry of its current access token (s)
        self.score = dict(on_time=0, late=0, rate_limited=0, unknown=0)
        self._window, self._in_window = 0, 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)) or 0)
                code, answer = provider.handle(self.path, json.loads(body or b"{}"))
                data = json.dumps(answer).encode()
                self.send_response(code)
                if code == 429:
                    self.send_header("Retry-After", "1")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self.server.shutdown()

    def _lifetime(self):
        lo, hi = self.expires_in
        return lo + (hi - lo) * secrets.randbelow(1000) / 1000.0

    def handle(self, path, req):
        now = time.time()
        with self.lock:
            if int(now) != self._window:
                self._window, self._in_window = int(now), 0
            self._in_window += 1
            if self._in_window > self.rate:
                self.score["rate_limited"] += 1
                return 429, {"error": "slow_down"}
            if path == "/login":  # a user signs in: their first tokens
                rt = "rt-" + secrets.token_hex(8)
            elif path == "/token":
                rt = req.get("refresh_token")
                if rt not in self.tokens:
                    self.score["unknown"] += 1
                    return 400, {"error": "invalid_grant"}
                self.score["on_time" if now <= self.tokens[rt] else "late"] += 1
            else:
                return 404, {"error": "not_found"}
            lifetime = self._lifetime()
            self.tokens[rt] = now + lifetime
            return 200, {"access_token": "at-" + secrets.token_hex(8), "refresh_token": rt,
                         "expires_in": lifetime}

    def expired_now(self):
        """How many users hold an access token that has expired."""
        now = time.time()
        with self.lock:
            return sum(1 for t in self.tokens.values() if t < now)
