#!/usr/bin/env python3
"""A token refresher on dueq: every user's OAuth token is a task whose time is the token's
expiry; the queue hands each to a worker `lead` seconds before that, and the worker acks it
with the new token and its new expiry. The OAuth provider is a local fake
(fake_provider.py) that issues short-lived tokens and rate-limits.

  refresher.py --seeds 127.0.0.1:7701,127.0.0.1:7702,127.0.0.1:7703 [--cacert data/tls/ca.pem]
               [--users 200] [--seconds 60] [--lead 5] [--json]

It signs the users in, puts their tokens, refreshes until --seconds have passed, and prints
a summary: refreshes, the share made before the old token expired, rate-limited calls."""
import argparse
import json
import os
import signal
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
import dueq  # noqa: E402
from fake_provider import FakeProvider  # noqa: E402

QUEUE = "oauth-tokens"


class RateLimited(Exception):
    pass


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        if e.code == 429:
            raise RateLimited() from e
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="127.0.0.1:7701,127.0.0.1:7702,127.0.0.1:7703")
    ap.add_argument("--cacert", help="the cluster's CA, when its client port speaks TLS")
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--lead", type=float, default=5, help="refresh this long before expiry")
    ap.add_argument("--json", action="store_true", help="the summary as one JSON line")
    a = ap.parse_args()
    ctx = ssl.create_default_context(cafile=a.cacert) if a.cacert else None
    provider = FakeProvider(expires_in=(max(a.lead * 2, 8), max(a.lead * 6, 30))).start()
    client = dueq.Client(a.seeds, ssl_context=ctx)
    client.declare(QUEUE, lead_ms=int(a.lead * 1000), ttr_ms=10_000, late_share=0.1)
    for u in range(a.users):
        t = post(provider.url + "/login", {"user": u})
        expires = int((time.time() + t["expires_in"]) * 1000)
        client.put(QUEUE, f"user-{u:05d}", {"access_token": t["access_token"],
                                             "refresh_token": t["refresh_token"]}, time=expires)

    def refresh(task):
        t = post(provider.url + "/token", {"refresh_token": task.payload["refresh_token"]})
        return dueq.Result({"access_token": t["access_token"],
                            "refresh_token": t["refresh_token"]},
                           time=int((time.time() + t["expires_in"]) * 1000))

    worker = dueq.Worker(client, QUEUE, refresh, concurrency=8, ttr_ms=10_000,
                         take_timeout_ms=500, grace=5.0, release_delay_ms=1000)
    # SIGTERM or Ctrl-C, or --seconds: stop taking, finish what is held (within the
    # worker's grace), release the rest.
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    signal.signal(signal.SIGINT, lambda *_: worker.stop())
    stopper = threading.Timer(a.seconds, worker.stop)
    stopper.daemon = True
    stopper.start()
    started = time.time()
    worker.run()
    stopper.cancel()
    s = provider.score
    refreshed = s["on_time"] + s["late"]
    summary = dict(users=a.users, seconds=round(time.time() - started, 1), refreshed=refreshed,
                   on_time=s["on_time"], late=s["late"],
                   on_time_share=round(s["on_time"] / refreshed, 4) if refreshed else None,
                   rate_limited=s["rate_limited"], unknown=s["unknown"],
                   expired_at_end=provider.expired_now(), worker=dict(worker.counts),
                   taken_at_end=client.stats(QUEUE, consistency="leader")["taken"])
    provider.stop()
    client.close()
    if a.json:
        print(json.dumps(summary))
    else:
        print(f"refresher: {refreshed} refreshes of {a.users} users in {summary['seconds']} s; "
              f"{s['on_time']} before the old token expired ({summary['on_time_share']}), "
              f"{s['late']} after; {s['rate_limited']} calls rate-limited; "
              f"{summary['expired_at_end']} tokens expired at the end; worker {summary['worker']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
