#!/usr/bin/env python3
"""What crosses the wire: a token in a put, with TLS on every link and without (docs/security.md).

  tls_wire.py [--build build] [--keep DIR]

Captures all loopback TCP with tcpdump while a three-node cluster (testing/chaos/harness)
takes a put whose payload carries a random marker and replicates it to every member, then
searches the capture for the marker. With TLS on the peer and client links the marker must
appear nowhere; with the same cluster in clear ([tls] peers = "off", plaintext clients) it
must appear on the client link and on both peer links (at least 3 times), which shows the
capture sees the traffic. Needs root and tcpdump; exits 77 (skipped) without them.
Exit 0 on pass."""
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.cluster import Cluster  # noqa: E402
from harness.test_main import SKIP, test_main  # noqa: E402



def marker_count(build, work, tls):
    """Runs one cluster, puts a marked payload, and counts the marker in the capture."""
    marker = "TOKEN-MARKER-" + os.urandom(8).hex()
    pcap = os.path.join(work, "capture.pcap")
    c = Cluster(build, os.path.join(work, "cluster"), tls=tls, log=lambda m: None)
    dump = None
    try:
        c.start(seed=1)
        if not c.wait_leader(30):
            raise RuntimeError("no leader")
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", pcap, "tcp"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if "listening on" not in dump.stderr.readline():
            raise RuntimeError("tcpdump did not start")
        time.sleep(0.5)
        rc, _, err = c.ctl("put", "tokens", "t1", "--payload", f'"{marker}"')
        if rc != 0:
            raise RuntimeError(f"put: {err}")
        # Every member applies it: the entry crossed both peer links.
        deadline = time.time() + 10
        while time.time() < deadline:
            st = c.status()
            if st and len({s.get("applied_index") for s in st}) == 1:
                break
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        if dump:
            dump.send_signal(signal.SIGINT)
            dump.wait(timeout=30)
        c.stop()
        os.environ.pop("DUEQ_CACERT", None)  # set by a TLS harness for its tools
    data = open(pcap, "rb").read()
    if len(data) < 1000:
        raise RuntimeError(f"the capture holds only {len(data)} bytes")
    # With TLS, the put and its replication are TLS 1.3 application-data records
    # (type 23, legacy version 3.3): the capture must hold some, or it missed them.
    if tls and data.count(b"\x17\x03\x03") < 3:
        raise RuntimeError("the capture holds no TLS records: it missed the put")
    return data.count(marker.encode())


def run(build, work):
    if os.geteuid() != 0 or not shutil.which("tcpdump"):
        print("SKIP: needs root and tcpdump (scripts/install-deps.sh installs it)")
        return SKIP
    with_tls = marker_count(build, os.path.join(work, "tls"), tls=True)
    clear = marker_count(build, os.path.join(work, "clear"), tls=False)
    print(f"marker seen on the wire: {with_tls} times with TLS, {clear} times in clear")
    if clear < 3:
        return f"in clear the capture saw the marker {clear} times (want the client link and " \
               f"both peer links): the capture is not seeing the traffic"
    if with_tls:
        return f"with TLS the marker crossed the wire in clear {with_tls} times"
    return None


if __name__ == "__main__":
    test_main(__doc__, run, "tls wire")
