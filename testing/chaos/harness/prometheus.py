"""A real Prometheus server for the tests (Debian's `prometheus`): it scrapes the given
targets every second, optionally with rule files, listens on 127.0.0.1 and is stopped by
its PID."""
import os
import shutil
import subprocess
import time
import urllib.request

from .cluster import free_port


def scrape(port):
    """{series with its labels: value} of the /metrics a node's admin serves on `port`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


class Prometheus:
    def __init__(self, workdir, targets, rule_files=(), labels=None):
        """`targets`: host:port of each /metrics; `rule_files` are copied into `workdir`;
        `labels`: added to every target (e.g. {"cluster": "demo"})."""
        self.port = free_port()
        rules = []
        for path in rule_files:
            shutil.copy(path, os.path.join(workdir, os.path.basename(path)))
            rules.append(os.path.basename(path))
        listed = ", ".join(f"'{t}'" for t in targets)
        extra = ""
        if labels:
            extra = "        labels: {" + ", ".join(f"{k}: {v}" for k, v in labels.items()) + "}\n"
        conf = os.path.join(workdir, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    + (f"rule_files: [{', '.join(rules)}]\n" if rules else "")
                    + "scrape_configs:\n  - job_name: dueq\n"
                    f"    static_configs:\n      - targets: [{listed}]\n" + extra)
        with open(os.path.join(workdir, "prometheus.log"), "w") as out:
            self.proc = subprocess.Popen(
                ["prometheus", f"--config.file={conf}",
                 f"--storage.tsdb.path={os.path.join(workdir, 'tsdb')}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready (see prometheus.log)")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
