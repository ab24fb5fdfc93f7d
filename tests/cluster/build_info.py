#!/usr/bin/env python3
"""Which build runs, and the open-file limit (docs/admin.md, docs/protocol.md).

  build_info.py [--build build] [--keep DIR]

- dueqd, dueqctl and dueq-proxy answer --version with the project version and the git
  revision of the build, all three the same.
- A dueqd started with a soft open-file limit of 256 (prlimit) raises it to what its
  max_connections needs, and logs that it did; started with a hard limit below that, it
  says so.
- The node says its build in hello and status (dueqctl status --json), in /status and as
  dueq_build_info{version,revision} 1 in /metrics.
Exit 0 on pass."""
import json
import os
import re
import resource
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing", "chaos"))
from harness.test_main import test_main  # noqa: E402

VERSION = re.compile(r"^(dueqd|dueqctl|dueq-proxy) (\d+\.\d+\.\d+) \(([0-9a-f]{7,}(-dirty)?|unknown)\)$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def soft_nofile(pid):
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith("Max open files"):
            return int(line.split()[3])
    return None


def start(build, work, limits, name):
    port, admin = free_port(), free_port()
    conf = os.path.join(work, f"{name}.toml")
    with open(conf, "w") as f:
        f.write(f'[node]\nid = "n1"\nclient_listen = "127.0.0.1:{port}"\n'
                f'data_dir = "{work}/{name}-data"\n[admin]\nlisten = "127.0.0.1:{admin}"\n')
    log = open(os.path.join(work, f"{name}.log"), "w")
    p = subprocess.Popen(["prlimit", f"--nofile={limits}", "--",
                          os.path.join(build, "cmd/dueqd/dueqd"), "--config", conf],
                         stdout=subprocess.PIPE, stderr=log, text=True)
    if "listening on port" not in p.stdout.readline():
        p.kill()
        raise RuntimeError(open(os.path.join(work, f"{name}.log")).read()[-500:])
    return p, port, admin


def run(build, work):
    versions = set()
    for prog in ("cmd/dueqd/dueqd", "cmd/dueqctl/dueqctl", "cmd/dueq-proxy/dueq-proxy"):
        out = subprocess.run([os.path.join(build, prog), "--version"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
        m = VERSION.match(out)
        if not m:
            return f"{prog} --version printed {out!r}"
        versions.add(m.group(2) + " (" + m.group(3) + ")")
    if len(versions) != 1:
        return f"the binaries disagree on their version: {versions}"
    build_id = versions.pop()

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 11_024:
        return f"this machine's hard open-file limit is {hard}: below what the test needs"
    node, port, admin = start(build, work, f"256:{hard if hard != resource.RLIM_INFINITY else 65536}",
                              "raised")
    try:
        soft = soft_nofile(node.pid)
        if soft is None or soft < 10_000:
            return f"dueqd kept a soft open-file limit of {soft}"
        rc = subprocess.run([os.path.join(build, "cmd/dueqctl/dueqctl"), "--json", "--addr",
                             f"127.0.0.1:{port}", "status"], capture_output=True, text=True,
                            timeout=30)
        status = json.loads(rc.stdout)
        said = json.dumps(status)
        if build_id not in said:
            return f"status does not say {build_id}: {said[:300]}"
        admin_status = json.load(urllib.request.urlopen(f"http://127.0.0.1:{admin}/status"))
        if f"{admin_status.get('version')} ({admin_status.get('revision')})" != build_id:
            return f"/status says {admin_status.get('version')} {admin_status.get('revision')}"
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics").read().decode()
        version, revision = build_id[:-1].split(" (")
        want = f'dueq_build_info{{version="{version}",revision="{revision}"}} 1'
        if want not in metrics:
            return f"/metrics lacks {want}"
    finally:
        node.terminate()
        node.wait(timeout=30)
    if "open-file limit raised from 256" not in open(os.path.join(work, "raised.log")).read():
        return "dueqd did not log that it raised the open-file limit"

    node, _, _ = start(build, work, "256:512", "capped")
    try:
        time.sleep(0.2)
    finally:
        node.terminate()
        node.wait(timeout=30)
    if "below the" not in open(os.path.join(work, "capped.log")).read():
        return "with a hard limit of 512, dueqd did not say its open-file limit is too low"
    return None


if __name__ == "__main__":
    test_main(__doc__, run, "build info")
