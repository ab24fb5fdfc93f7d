#!/usr/bin/env python3
"""The HTTP admin over TLS ([admin] tls = "on", docs/admin.md), certificates made at test time.

  admin_https.py [--build build] [--keep DIR]

Three dueqd with TLS on every link and HTTPS admin (testing/chaos/harness, tls=True,
admin="https"). Checks:
  - /health, /status and /metrics answer over HTTPS with the node's certificate, verified
    against the run's CA; /metrics carries the certificate's expiry gauge;
  - a plain HTTP request to the HTTPS port gets no answer, and the port serves HTTPS after it;
  - /cluster on one node holds every member's /status, which it asked for over HTTPS;
  - a new certificate on disk and SIGHUP: the next HTTPS connection presents it (its serial),
    without a restart.
Exit 0 on pass."""
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.test_main import test_main  # noqa: E402


def tls_context(certs):
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    ctx.check_hostname = False  # certificates name members (n1), not 127.0.0.1
    return ctx


def https_get(port, path, ctx):
    """(status, body, serial of the certificate the server presented)."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=ctx)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read().decode()
        der = conn.sock.getpeercert(binary_form=True)
        return r.status, body, der_serial(der)
    finally:
        conn.close()


def der_serial(der):
    r = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"], input=der,
                       capture_output=True, check=True)
    return r.stdout.decode().strip().split("=")[-1].upper()


def file_serial(path):
    r = subprocess.run(["openssl", "x509", "-noout", "-serial", "-in", path],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip().split("=")[-1].upper()


def plain_http_answered(port):
    """Whether a plaintext GET on the port gets an HTTP answer (it must not)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/health")
        r = conn.getresponse()
        return f"HTTP {r.status}"
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def run(build, work):
    c = Cluster(build, work, tls=True, admin="https", log=lambda m: None)
    try:
        c.start(seed=1)
        leader = c.wait_leader(30)
        if not leader:
            return "no leader"
        certs = c.make_certs()
        ctx = tls_context(certs)
        for n in c.ids:
            status, _, got = https_get(c.admin_port[n], "/health", ctx)
            if status != 200:
                return f"{n}: /health over HTTPS answered {status}"
            if got != file_serial(f"{certs}/{n}.pem"):
                return f"{n}'s admin presents serial {got}, not its own certificate's"
        status, metrics, _ = https_get(c.admin_port[leader], "/metrics", ctx)
        if status != 200 or "dueq_tls_cert_not_after_seconds" not in metrics:
            return f"/metrics over HTTPS: {status}, expiry gauge missing"
        if answered := plain_http_answered(c.admin_port[leader]):
            return f"a plain HTTP request to the HTTPS admin got {answered}"
        status, body, _ = https_get(c.admin_port[leader], "/cluster", ctx)
        if status != 200:
            return f"/cluster answered {status}"
        for m in json.loads(body)["members"]:
            if "status" not in m:
                return f"/cluster has no /status of {m['id']}: {m.get('error')}"
        # A new certificate on disk, then SIGHUP: the next connection presents it.
        subprocess.run(["bash", os.path.join(ROOT, "scripts", "make-certs.sh"), certs, leader],
                       check=True, capture_output=True)
        new = file_serial(f"{certs}/{leader}.pem")
        c.signal(leader, signal.SIGHUP)
        deadline = time.time() + 10
        while (got := https_get(c.admin_port[leader], "/health", ctx)[2]) != new:
            if time.time() > deadline:
                return f"after SIGHUP the admin still presents {got}, not {new}"
            time.sleep(0.3)
        if c.procs[leader].poll() is not None:
            return f"{leader} exited on SIGHUP"
        return None
    finally:
        c.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "admin https")
