#!/usr/bin/env python3
"""Mutual TLS on peer links, with certificates made at test time (docs/security.md).

  tls_links.py [--build build] [--keep DIR]

Three dueqd (testing/chaos/harness, tls=True: a CA of this run, a certificate per member,
TLS on the peer and the client links; dueqctl reaches them with DUEQ_CACERT).
One follower at a time is restarted with a certificate the others must refuse, and the
cluster must keep serving while it is shut out:
  - a certificate of another CA;
  - a certificate of the right CA that names another member;
  - an expired certificate (signed under faketime);
  - no TLS at all ([tls] peers = "off").
Each time the refusal is logged, the shut-out node never counts as connected, and puts
still commit on the other two. With its own certificate back it rejoins. A plaintext
client on a TLS client port is told so in one plaintext frame and closed. Then a node's
certificate is replaced on disk and the node gets SIGHUP: the next peer connection to it
presents the new certificate (its serial, read with `openssl s_client`), without a restart.
Exit 0 on pass."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.test_main import test_main  # noqa: E402

MAKE_CERTS = os.path.join(ROOT, "scripts", "make-certs.sh")
SHUT_OUT_S = 4  # long enough for several dials each way


def make_certs(d, *names, faketime=None, days=None):
    cmd = ["bash", MAKE_CERTS, d, *names] + (["--days", str(days)] if days else [])
    if faketime:
        cmd = ["faketime", "-f", faketime] + cmd
    subprocess.run(cmd, check=True, capture_output=True)


def connected(c, n):
    m = c.members() or {"members": []}
    return any(x["name"] == n and x["connected"] for x in m["members"])


def logs(c, work):
    return "".join(open(os.path.join(work, n, "dueqd.log")).read() for n in c.first_ids)


def serial(path):
    r = subprocess.run(["openssl", "x509", "-noout", "-serial", "-in", path],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip().split("=")[-1].upper()


def served_serial(c, certs, n):
    """The serial of the certificate n's peer listener presents now (a mutual handshake)."""
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{c.peer_port[n]}",
                        "-CAfile", f"{certs}/ca.pem", "-cert", f"{certs}/client.pem",
                        "-key", f"{certs}/client.key", "-tls1_3", "-showcerts"],
                       input="", capture_output=True, text=True, timeout=30)
    pem = r.stdout[r.stdout.find("-----BEGIN CERTIFICATE-----"):]
    pem = pem[:pem.find("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    if not pem.startswith("-----BEGIN"):
        return None
    return subprocess.run(["openssl", "x509", "-noout", "-serial"], input=pem,
                          capture_output=True, text=True).stdout.strip().split("=")[-1].upper()


def plaintext_client_told(port):
    """A plaintext ping to a TLS client port: the answer, read in the clear until close."""
    body = b"\x82\xa2op\xa4ping\xa2id\x01"  # msgpack {"op": "ping", "id": 1}
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(len(body).to_bytes(4, "big") + body)
        got = b""
        while chunk := s.recv(4096):
            got += chunk
    return got


def shut_out(c, work, victim, case, expect_in_logs):
    """victim restarted as set up for `case`: refused, and the others keep serving."""
    before = len(logs(c, work))
    c.start_node(victim)
    deadline = time.time() + SHUT_OUT_S
    while time.time() < deadline:
        if connected(c, victim):
            return f"{case}: {victim} was let in"
        time.sleep(0.3)
    said = logs(c, work)[before:] + open(os.path.join(work, victim, "dueqd.log")).read()
    if expect_in_logs not in said:
        return f"{case}: no '{expect_in_logs}' in the logs"
    c.ids.remove(victim)  # clients go to the others (the shut-out node has no quorum)
    try:
        rc, _, err = c.ctl("put", "q", f"during-{case}", "--payload", '"v"')
    finally:
        c.ids.append(victim)
    if rc != 0:
        return f"{case}: put while {victim} is shut out: {err}"
    c.kill(victim)
    return None


def run(build, work):
    c = Cluster(build, work, tls=True, log=lambda m: None)
    try:
        c.start(seed=1)
        leader = c.wait_leader(30)
        if not leader:
            return "no leader with TLS on the peer links"
        certs = c.make_certs()
        victim = next(n for n in c.ids if n != leader)
        other = next(n for n in c.ids if n not in (leader, victim))
        make_certs(os.path.join(work, "other-ca"), victim)
        old = os.path.join(work, "old")
        os.makedirs(old)
        for f in ("ca.pem", "ca.key"):
            shutil.copy(os.path.join(certs, f), old)
        make_certs(old, victim, faketime="-10d", days=1)
        own = {ext: open(f"{certs}/{victim}.{ext}", "rb").read() for ext in ("pem", "key")}

        def use(src_dir, name):
            for ext in ("pem", "key"):
                shutil.copy(f"{src_dir}/{name}.{ext}", f"{certs}/{victim}.{ext}")

        c.kill(victim)
        for case, src, name, said in (
                ("another-ca", os.path.join(work, "other-ca"), victim, "certificate refused"),
                ("wrong-name", certs, other, "but its certificate names"),
                ("expired", old, victim, "expired")):
            use(src, name)
            if problem := shut_out(c, work, victim, case, said):
                return problem
            for ext, data in own.items():
                open(f"{certs}/{victim}.{ext}", "wb").write(data)
        c.tls = False  # only the victim's next config: peers = "off"
        try:
            problem = shut_out(c, work, victim, "plaintext", "plaintext")
        finally:
            c.tls = True
        if problem:
            return problem
        told = plaintext_client_told(c.client_port[leader])
        if b"TLS connections only" not in told:
            return f"a plaintext client on {leader}'s TLS port got {told!r}"
        rc, _, err = c.ctl("put", "q", "after-plaintext-client", "--payload", '"v"')
        if rc != 0:
            return f"put after a plaintext client: {err}"
        # Its own certificate back: it rejoins.
        c.start_node(victim)
        deadline = time.time() + 20
        while not connected(c, victim):
            if time.time() > deadline:
                return f"{victim} did not rejoin with its own certificate"
            time.sleep(0.3)
        # A new certificate on disk, then SIGHUP: the next connection presents it.
        was = served_serial(c, certs, leader)
        if was != serial(f"{certs}/{leader}.pem"):
            return f"{leader} presents serial {was}, its file holds {serial(f'{certs}/{leader}.pem')}"
        make_certs(certs, leader)
        new = serial(f"{certs}/{leader}.pem")
        c.signal(leader, signal.SIGHUP)
        deadline = time.time() + 10
        while served_serial(c, certs, leader) != new:
            if time.time() > deadline:
                return f"after SIGHUP {leader} still presents {served_serial(c, certs, leader)}"
            time.sleep(0.3)
        if c.procs[leader].poll() is not None:
            return f"{leader} exited on SIGHUP"
        rc, _, err = c.ctl("put", "q", "after-reload", "--payload", '"v"')
        if rc != 0:
            return f"put after the reload: {err}"
        return None
    finally:
        c.stop()


if __name__ == "__main__":
    test_main(__doc__, run, "tls links")
