#!/usr/bin/env python3
"""How many TCP connections a node of a sharded dueq holds, for 1, 2 and 4 shards of three
nodes (docs/sharding.md, issue 15's acceptance 2).

For each shard count N it writes the configs and a shard map into a fresh directory,
starts 3N dueqd and one dueq-proxy on 127.0.0.1 (free ports), and puts keys of every
shard through every node and through the proxy, so that every forwarding path is open.
Then it counts each process's established TCP sockets (from /proc/PID/fd and
/proc/net/tcp) and prints, per N: the most and the mean a node holds, the leaders', the
followers', and the proxy's. Every process is stopped by its PID at the end.

What to expect with one proxy: a leader holds its 2 peer links, 1 from the proxy, N - 1 to
the other shards' leaders and 3 (N - 1) from the other shards' nodes (4N - 1); a
follower 2 + (N - 1); the proxy N. Linear in N.

  measure/shard-connections.py [--shards 1,2,4] [--build build] [--keys 600]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing", "chaos"))
from harness.cluster import free_port, stop_processes  # noqa: E402


def established_sockets(pid):
    """Inodes of this process's sockets that are ESTABLISHED TCP connections."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except FileNotFoundError:
        return 0
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[3] == "01" and cols[9] in inodes:  # 01: ESTABLISHED
                        count += 1
        except FileNotFoundError:
            pass
    return count


def start(cmd, log):
    out = open(log + ".out", "w")
    p = subprocess.Popen(cmd, stdout=out, stderr=open(log, "w"), start_new_session=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(log + ".out") as f:
            if "listening on port" in f.read():
                return p
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    sys.exit(f"{' '.join(cmd)} did not start; see {log}")


def run(n, build, keys, workdir):
    ports = [free_port() for _ in range(9 * n + 1)]
    shards = []
    for s in range(n):
        members = []
        for i in range(3):
            base = (s * 3 + i) * 3
            members.append({"id": f"s{s}n{i}", "client": ports[base], "peer": ports[base + 1]})
        shards.append(members)
    per = 1024 // n
    with open(f"{workdir}/shards.toml", "w") as f:
        f.write("version = 1\nbuckets = 1024\n")
        for s, members in enumerate(shards):
            last = 1023 if s == n - 1 else (s + 1) * per - 1
            f.write(f'[[shards]]\nname = "s{s}"\nbuckets = [[{s * per}, {last}]]\nmembers = [\n')
            for m in members:
                f.write(f'  {{ id = "{m["id"]}", client = "127.0.0.1:{m["client"]}" }},\n')
            f.write("]\n")
    shutil.copy(os.path.join(os.path.dirname(__file__), "../config/two-shards/dev-secret"),
                f"{workdir}/secret")
    procs, nodes = [], []
    try:
        for s, members in enumerate(shards):
            for m in members:
                conf = f"{workdir}/{m['id']}.toml"
                with open(conf, "w") as f:
                    f.write(f'[node]\nid = "{m["id"]}"\nclient_listen = "127.0.0.1:{m["client"]}"\n'
                            f'data_dir = "{workdir}/data-{m["id"]}"\n'
                            f'[cluster]\nid = "shard-s{s}"\nsecret_file = "secret"\nmembers = [\n')
                    for o in members:
                        f.write(f'  {{ id = "{o["id"]}", peer = "127.0.0.1:{o["peer"]}", '
                                f'client = "127.0.0.1:{o["client"]}" }},\n')
                    f.write(f']\n[tls]\npeers = "off"\n[shard]\nname = "s{s}"\nmap_file = "shards.toml"\n'
                            f'[storage]\nfsync = "never"\n')
                p = start([f"{build}/cmd/dueqd/dueqd", "--config", conf], f"{workdir}/{m['id']}.log")
                procs.append(p)
                nodes.append((m, p))
        proxy_port = ports[-1]
        proxy = start([f"{build}/cmd/dueq-proxy/dueq-proxy", "--map", f"{workdir}/shards.toml",
                       "--listen", f"127.0.0.1:{proxy_port}"], f"{workdir}/proxy.log")
        procs.append(proxy)
        ctl = f"{build}/cmd/dueqctl/dueqctl"
        subprocess.run([ctl, "--addr", f"127.0.0.1:{proxy_port}", "status", "--shards",
                        "--wait-leader", "30s"], check=True, stdout=subprocess.DEVNULL)
        entries = [f"127.0.0.1:{m['client']}" for m, _ in nodes] + [f"127.0.0.1:{proxy_port}"]
        subprocess.run([f"{build}/testing/shard-check/dueq-shard-check", "--entry",
                        ",".join(entries), "--keys", str(keys), "--queue", "conn"],
                       check=True, stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        leaders = set()
        out = subprocess.run([ctl, "--addr", f"127.0.0.1:{proxy_port}", "--json", "status",
                              "--shards"], check=True, capture_output=True, text=True).stdout
        for shard in json.loads(out)["shards"]:
            for node in shard["nodes"]:
                if node.get("status", {}).get("role") == "leader":
                    leaders.add(node["status"]["node_id"])
        if proxy.poll() is not None:
            sys.exit(f"the proxy exited with {proxy.returncode}; see {workdir}/proxy.log")
        counts = {m["id"]: established_sockets(p.pid) for m, p in nodes}
        lead = [c for i, c in counts.items() if i in leaders]
        follow = [c for i, c in counts.items() if i not in leaders]
        return {
            "shards": n, "nodes": len(nodes), "max": max(counts.values()),
            "mean": sum(counts.values()) / len(counts),
            "leader_max": max(lead) if lead else 0, "follower_max": max(follow) if follow else 0,
            "proxy": established_sockets(proxy.pid),
        }
    finally:
        stop_processes(procs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", default="1,2,4", help="shard counts to measure (comma-separated)")
    ap.add_argument("--build", default="build", help="the build directory")
    ap.add_argument("--keys", type=int, default=600, help="keys put to open every path")
    args = ap.parse_args()
    print(f"{'SHARDS':>6} {'NODES':>5} {'NODE_MAX':>8} {'NODE_MEAN':>9} {'LEADER_MAX':>10} "
          f"{'FOLLOWER_MAX':>12} {'PROXY':>5}")
    for n in [int(x) for x in args.shards.split(",")]:
        workdir = tempfile.mkdtemp(prefix=f"dueq-shard-conn-{n}-")
        try:
            r = run(n, args.build, args.keys, workdir)
        except SystemExit:
            raise
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"{r['shards']:>6} {r['nodes']:>5} {r['max']:>8} {r['mean']:>9.1f} "
              f"{r['leader_max']:>10} {r['follower_max']:>12} {r['proxy']:>5}", flush=True)


if __name__ == "__main__":
    main()
