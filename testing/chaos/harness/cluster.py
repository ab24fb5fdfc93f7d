"""A three-node dueq cluster on loopback whose peer links all go through faultproxy.

Every process is started here and stopped here by its PID. Each node dials every peer
through the proxy link named "<from>-<to>" ([node] dial in its config), so the harness can
cut, delay or throttle each direction of each link. Client links are not proxied.
"""
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time

def libfaketime():
    """Debian's libfaketime (package faketime), wherever the architecture puts it."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
                   + glob.glob("/usr/lib/faketime/libfaketime.so.1"))
    if not found:
        raise RuntimeError("libfaketime.so.1 not found: install Debian's faketime package "
                           "(scripts/install-deps.sh does)")
    return found[0]


_handed_out = set()


def free_port():
    """A loopback port free a moment ago, taken below the kernel's ephemeral range
    (32768 and up): a port the kernel picked would be handed again to a fault proxy's
    listener or to some outgoing connection before the node binds it."""
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randint(20000, 32000)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError("no free loopback port in 20000-32000")


def stop_processes(procs):
    """SIGTERM to each process still running (None entries are skipped), then waits for
    each, SIGKILL after 10 s."""
    procs = [p for p in procs if p]
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def last_lines(path, count=5):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-count:])
    except OSError:
        return ""


def wait_line(proc, path, needle, timeout, log_path=None):
    """Waits until the file `path` (the process's stdout) holds a line with `needle`.
    If the process dies first, the error carries the end of its log (`log_path`)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            tail = last_lines(log_path) if log_path else ""
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before '{needle}'"
                               + (f"; its log ends:\n{tail}" if tail else ""))
        try:
            with open(path) as f:
                for line in f:
                    if needle in line:
                        return line
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"{proc.args[0]} did not print '{needle}' within {timeout} s")


class Cluster:
    def __init__(self, build, workdir, size=3, power_cut=False, faketime=False, plant=None,
                 election_ms=1000, heartbeat_ms=100, grace_ms=2000, ttr_ms=3000, log=print,
                 autonomy_after_ms=0, admin=False, prefix="n", cluster_id="chaos", shard=None,
                 spares=0, snapshot_entries=2000, log_keep=500, tls=False, certs_dir=None,
                 limits=None):
        self.build = build
        self.dir = workdir
        # The members now; they change with add_member/remove_member. `spares` more names
        # get ports and fault-proxy links from the start, ready to join (dueqd --join).
        self.ids = [f"{prefix}{i + 1}" for i in range(size)]
        self.first_ids = list(self.ids)
        self.spare_ids = [f"{prefix}{size + i + 1}" for i in range(spares)]
        self.all_ids = self.ids + self.spare_ids
        self.raft_ids = {}  # a joined member's Raft id (dueqctl member add)
        # Small by default, so that the runs exercise snapshots and log trims.
        self.snapshot_entries = snapshot_entries
        self.log_keep = log_keep
        self.cluster_id = cluster_id
        # tls: TLS on every link: mutual between members, and on the client listeners, with
        # certificates of a CA made for this run (scripts/make-certs.sh, in DIR/tls). This
        # process's DUEQ_CACERT then names the CA, so every tool started here (dueqctl, the
        # workload) speaks TLS. Otherwise peer links in clear, said so.
        self.tls = tls
        self.limits = limits or {}  # [limits] keys and values for every node's config
        self.certs_dir = certs_dir or os.path.join(workdir, "tls")  # shared by a sharded run
        # (name, map file[, deployment secret file]): this cluster is one shard of a sharded
        # dueq (docs/sharding.md); with the secret its leaders can move buckets.
        self.shard = shard
        self.power_cut = power_cut
        self.faketime = faketime
        self.plant = plant
        self.election_ms = election_ms
        self.heartbeat_ms = heartbeat_ms
        self.grace_ms = grace_ms
        self.ttr_ms = ttr_ms
        # >0: queue `tokens` is autonomous and a cut-off node serves it after this long;
        # queue `strict` is not (docs/autonomy.md). 0: autonomous mode is off.
        self.autonomy_after_ms = autonomy_after_ms
        self.log = log
        self.client_port = {n: free_port() for n in self.all_ids}
        self.peer_port = {n: free_port() for n in self.all_ids}
        # admin: every node serves HTTP admin (docs/admin.md) on its own loopback port;
        # "https": over TLS, with the node's certificate (needs tls=True).
        self.admin_port = {n: free_port() for n in self.all_ids} if admin else {}
        self.admin_https = admin == "https"
        self.procs = {}      # node id -> Popen (None when down)
        self.paused = set()
        self.proxy = None
        self.link_port = {}  # "n1-n2" -> proxy listener port
        self.control_port = None
        os.makedirs(self.dir, exist_ok=True)

    # ---- binaries ----
    def binary(self, rel):
        path = os.path.join(self.build, rel)
        if not os.path.exists(path):
            raise RuntimeError(f"{path} is missing: build first (scripts/build.sh)")
        return path

    def client_addresses(self):
        return [f"{n}=127.0.0.1:{self.client_port[n]}" for n in self.ids]

    # ---- what testing/chaos/chaos.py drives (harness/shards.py has the same for shards) ----
    def start(self, seed):
        self.start_proxy(seed)
        for n in self.ids:
            self.start_node(n)

    def workload_args(self):
        return []

    def pick(self, rng):
        """The cluster a nemesis hits: this one."""
        return self

    def restart(self, n):
        self.procs[n] = None
        self.start_node(n)

    def node_dirs(self):
        return [os.path.join(self.dir, n) for n in self.all_ids]

    def final_reads(self, history, keys):
        """The `dueq-chaos-workload final` runs that read every key on every node (of a
        shard: only the keys the map gives it), as (shard name or "", command)."""
        args = [self.binary("testing/chaos/dueq-chaos-workload"), "final", "--history", history,
                "--keys", str(keys), "--wait-seconds", "60"]
        if self.shard:
            args += ["--shard-map", self.shard[1], "--shard", self.shard[0]]
        for addr in self.client_addresses():
            args += ["--node", addr]
        return [(self.shard[0] if self.shard else "", args)]

    # ---- fault proxy ----
    def start_proxy(self, seed):
        args = [self.binary("testing/faultproxy/dueq-faultproxy"), "--control", "127.0.0.1:0",
                "--seed", str(seed)]
        for a in self.all_ids:
            for b in self.all_ids:
                if a != b:
                    args += ["--link", f"{a}-{b}=127.0.0.1:0@127.0.0.1:{self.peer_port[b]}"]
                if self.autonomy_after_ms:
                    # Datacenter a's clients reach node b through link "ca-b" (dc_links).
                    args += ["--link", f"c{a}-{b}=127.0.0.1:0@127.0.0.1:{self.client_port[b]}"]
        out = os.path.join(self.dir, "faultproxy.out")
        with open(out, "w") as o, open(os.path.join(self.dir, "faultproxy.log"), "a") as e:
            self.proxy = subprocess.Popen(args, stdout=o, stderr=e, start_new_session=True)
        wait_line(self.proxy, out, "faultproxy ready", 10)
        with open(out) as f:
            for line in f:
                w = line.split()
                if line.startswith("control listening on port"):
                    self.control_port = int(w[-1])
                elif line.startswith("link "):
                    self.link_port[w[1]] = int(w[-1])
        self.control = socket.create_connection(("127.0.0.1", self.control_port), timeout=5)
        self.control_in = self.control.makefile("r")

    def proxy_cmd(self, line):
        self.control.sendall((line + "\n").encode())
        reply = self.control_in.readline().strip()
        if not reply.startswith("ok"):
            raise RuntimeError(f"faultproxy refused '{line}': {reply}")
        return reply

    # a cannot send to b: on the connections a dials, a's bytes; on those b dials, the replies.
    def cut(self, a, b):
        self.proxy_cmd(f"set {a}-{b} up blackhole")
        self.proxy_cmd(f"set {b}-{a} down blackhole")

    def isolate(self, node):
        for other in self.ids:
            if other != node:
                self.cut(node, other)
                self.cut(other, node)

    def dc_routes(self, dc):
        """How datacenter `dc` (named after its node) reaches every node: its proxy links."""
        return [f"{n}=127.0.0.1:{self.link_port[f'c{dc}-{n}']}" for n in self.ids]

    def isolate_dc(self, node):
        """Node and its datacenter's clients cut off from every other node and datacenter."""
        self.isolate(node)
        for other in self.ids:
            if other != node:
                for link in (f"c{node}-{other}", f"c{other}-{node}"):
                    self.proxy_cmd(f"set {link} up blackhole")
                    self.proxy_cmd(f"set {link} down blackhole")

    def heal_links(self):
        self.proxy_cmd("heal")

    # ---- nodes ----
    def config_text(self, n):
        admin = {m: f', admin = "127.0.0.1:{p}"' for m, p in self.admin_port.items()}
        # The first members seed the cluster; a node that joins later lists itself too.
        listed = self.first_ids + ([n] if n not in self.first_ids else [])
        members = ",\n".join(
            f'  {{ id = "{m}", peer = "127.0.0.1:{self.peer_port[m]}", '
            f'client = "127.0.0.1:{self.client_port[m]}"{admin.get(m, "")} }}' for m in listed)
        admin_section = (f'\n[admin]\nlisten = "127.0.0.1:{self.admin_port[n]}"\n'
                         if self.admin_port else "")
        if self.admin_https:
            admin_section += 'tls = "on"\n'
        shard_section = (f'\n[shard]\nname = "{self.shard[0]}"\nmap_file = "{self.shard[1]}"\n'
                         if self.shard else "")
        if self.shard and len(self.shard) > 2:  # the deployment's secret: bucket moves
            shard_section += f'secret_file = "{self.shard[2]}"\n'
        dial = ", ".join(f'{m} = "127.0.0.1:{self.link_port[f"{n}-{m}"]}"'
                         for m in self.all_ids if m != n)
        limits_section = "".join(f"{k} = {v}\n" for k, v in self.limits.items())
        limits_section = f"\n[limits]\n{limits_section}" if limits_section else ""
        if self.tls:
            certs = self.make_certs()
            tls_section = (f'\n[tls]\nca_file = "{certs}/ca.pem"\ncert_file = "{certs}/{n}.pem"\n'
                           f'key_file = "{certs}/{n}.key"\npeers = "mutual"\nclients = "on"\n')
        else:
            tls_section = '\n[tls]\npeers = "off"\n'
        return f"""# Generated by testing/chaos for one run.
[node]
id = "{n}"
client_listen = "127.0.0.1:{self.client_port[n]}"
data_dir = "{os.path.join(self.dir, n, "data")}"
dial = {{ {dial} }}

[cluster]
id = "{self.cluster_id}"
secret_file = "{os.path.join(self.dir, "cluster-secret")}"
members = [
{members},
]
{shard_section}{tls_section}
[raft]
tick_ms = 10
heartbeat_ms = {self.heartbeat_ms}
election_timeout_ms = {self.election_ms}
snapshot_entries = {self.snapshot_entries}
autonomy_after_ms = {self.autonomy_after_ms}

[storage]
fsync = "always"
log_keep = {self.log_keep}

[sessions]
grace_ms = {self.grace_ms}

[queues.tokens]
lead_ms = 500
ttr_ms = {self.ttr_ms}
max_attempts = 0
late_share = 0.2
autonomous = {"true" if self.autonomy_after_ms else "false"}

[queues.strict]
ttr_ms = {self.ttr_ms}
{admin_section}{limits_section}"""

    def make_certs(self):
        """The run's CA and a certificate per node name (made once); returns their dir."""
        certs = self.certs_dir
        if not os.path.exists(os.path.join(certs, self.all_ids[-1] + ".pem")):
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                  "scripts", "make-certs.sh")
            subprocess.run(["bash", script, certs, *self.all_ids, "client"], check=True,
                           capture_output=True)
        os.environ["DUEQ_CACERT"] = os.path.join(certs, "ca.pem")
        return certs

    def clock_file(self, n):
        return os.path.join(self.dir, n, "clock-offset")

    def write_config(self, n):
        """Writes node n's config (and the cluster's secret, once); returns its path."""
        os.makedirs(os.path.join(self.dir, n), exist_ok=True)
        secret = os.path.join(self.dir, "cluster-secret")
        if not os.path.exists(secret):
            with open(secret, "w") as f:
                f.write(os.urandom(24).hex() + "\n")
        conf = os.path.join(self.dir, n, "dueqd.toml")
        with open(conf, "w") as f:
            f.write(self.config_text(n))
        return conf

    def restore_node(self, n, backup):
        """`dueqd --restore BACKUP` into node n's (fresh) data dir; the CompletedProcess."""
        conf = self.write_config(n)
        return subprocess.run([self.binary("cmd/dueqd/dueqd"), "--config", conf,
                               "--restore", backup], capture_output=True, text=True,
                              timeout=600)

    def start_node(self, n, join=None):
        conf = self.write_config(n)
        # dueqd-test is dueqd with the test-only flags; the product binary otherwise.
        test_flags = self.power_cut or self.plant
        args = [self.binary("cmd/dueqd/dueqd-test" if test_flags else "cmd/dueqd/dueqd"),
                "--config", conf]
        if self.power_cut:
            args.append("--power-cut")
        if self.plant:
            args += ["--plant", self.plant]
        if join:
            args += ["--join", str(join)]
        env = dict(os.environ)
        if self.faketime:
            if not os.path.exists(self.clock_file(n)):
                self.set_clock_offset(n, 0)
            # Only the wall clock moves: Asio's timers and the Raft ticks run on the
            # monotonic clock, as they would on a machine whose NTP stepped the time.
            env.update(LD_PRELOAD=libfaketime(), FAKETIME_TIMESTAMP_FILE=self.clock_file(n),
                       FAKETIME_DONT_FAKE_MONOTONIC="1", FAKETIME_CACHE_DURATION="1")
        out = os.path.join(self.dir, n, "stdout")
        log_path = os.path.join(self.dir, n, "dueqd.log")
        with open(out, "w") as o, open(log_path, "a") as e:
            self.procs[n] = subprocess.Popen(args, stdout=o, stderr=e, env=env,
                                             start_new_session=True)
        wait_line(self.procs[n], out, "listening on port", 30, log_path)

    def set_clock_offset(self, n, seconds):
        with open(self.clock_file(n), "w") as f:
            f.write(f"{seconds:+d}s\n" if seconds else "+0\n")

    def signal(self, n, sig):
        p = self.procs.get(n)
        if p and p.poll() is None:
            os.kill(p.pid, sig)

    def kill(self, n):
        p = self.procs.get(n)
        if p is None:
            return
        if n in self.paused:
            self.resume(n)
        self.signal(n, signal.SIGKILL)
        p.wait(timeout=30)
        self.procs[n] = None

    def power_cut_all(self):
        """SIGUSR2 to every node at once: each loses what it had not fsynced, and exits."""
        for n in self.ids:
            self.signal(n, signal.SIGUSR2)
        for n in self.ids:
            p = self.procs.get(n)
            if p:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.signal(n, signal.SIGKILL)
                    p.wait(timeout=15)
                self.procs[n] = None

    def pause(self, n):
        self.signal(n, signal.SIGSTOP)
        self.paused.add(n)

    def resume(self, n):
        self.signal(n, signal.SIGCONT)
        self.paused.discard(n)

    def down(self):
        return [n for n in self.ids if self.procs.get(n) is None]

    def unexpected_exits(self):
        """Nodes whose process ended without the harness killing it (a removed member stops
        by itself: that is expected)."""
        return {n: p.returncode for n, p in self.procs.items()
                if p and p.poll() is not None and n in self.ids}

    # ---- membership (docs/operations.md) ----
    def ctl(self, *args, timeout="5s"):
        """dueqctl --json against the current members; (exit status, parsed stdout, stderr)."""
        cmd = [self.binary("cmd/dueqctl/dueqctl"), "--timeout", timeout, "--json"]
        for n in self.ids:
            cmd += ["--addr", f"127.0.0.1:{self.client_port[n]}"]
        r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)
        out = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None
        return r.returncode, out, r.stderr.strip()

    def ctl_until(self, timeout, *args, done_if=None):
        """Retries a membership command while it is refused for a passing reason. `done_if`:
        an error text that means an earlier try did it (its answer was lost)."""
        deadline, err = time.time() + timeout, ""
        while time.time() < deadline:
            rc, out, err = self.ctl(*args)
            if rc == 0 or (done_if and done_if in err):
                return out
            time.sleep(0.3)
        raise RuntimeError(f"dueqctl {' '.join(args)} kept failing for {timeout} s: {err}")

    def members(self):
        """`dueqctl member list` as the leader answers it."""
        leader = self.wait_leader(30)
        if not leader:
            return None
        cmd = [self.binary("cmd/dueqctl/dueqctl"), "--json", "--addr",
               f"127.0.0.1:{self.client_port[leader]}", "member", "list"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def add_member(self, n, promote=True, timeout=120):
        """The runbook's steps for a new machine: member add, dueqd --join, wait until
        caught up, member promote. Returns seconds from add to promoted."""
        began = time.time()
        # A fresh machine: an empty data dir (a name removed before comes back as a new
        # member, with a new Raft id).
        shutil.rmtree(os.path.join(self.dir, n, "data"), ignore_errors=True)
        # Its client port is picked now, not when the run began: a port free seconds ago
        # may have gone to another test by now (its peer port is the fault proxy's target
        # and stays).
        if not self.autonomy_after_ms:
            self.client_port[n] = free_port()
        out = self.ctl_until(60, "member", "add", n, "--peer", f"127.0.0.1:{self.peer_port[n]}",
                             "--client", f"127.0.0.1:{self.client_port[n]}",
                             done_if=f"member {n} exists")
        if out is None:  # added by a try whose answer was lost: its id is in the list
            out = {"raft_id": next(x["raft_id"] for x in (self.members() or {})["members"]
                                   if x["name"] == n)}
        self.raft_ids[n] = out["raft_id"]
        self.ids.append(n)
        self.start_node(n, join=out["raft_id"])
        if not promote:
            return time.time() - began
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.members() or {"members": []}
            me = [x for x in m["members"] if x["name"] == n]
            if me and me[0]["lag"] < 100 and me[0]["match"] > 0:
                break
            time.sleep(0.2)
        self.ctl_until(max(1, deadline - time.time()), "member", "promote", n,
                       done_if="is a voter already")
        return time.time() - began

    def remove_member(self, n, timeout=60):
        """member remove, then the machine is stopped (it stops by itself once it learns)."""
        self.ctl_until(timeout, "member", "remove", n, done_if=f"no member {n}")
        self.ids.remove(n)
        p = self.procs.get(n)
        if p is not None:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill(n)
        self.procs[n] = None

    def lose_for_good(self, n):
        """kill -9 and the data dir wiped: the machine is gone (replace it)."""
        self.kill(n)
        shutil.rmtree(os.path.join(self.dir, n, "data"), ignore_errors=True)

    def next_spare(self):
        """A name (ports and proxy links) that is no member now: a spare, or one removed."""
        free = [n for n in self.all_ids if n not in self.ids]
        if not free:
            raise RuntimeError("no spare node left for a new member")
        return free[0]

    # ---- state ----
    def status(self):
        args = [self.binary("testing/chaos/dueq-chaos-workload"), "status"]
        for a in self.client_addresses():
            args += ["--node", a]
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]

    def leader(self, among=None):
        """The node that says it leads in the highest term (a deposed leader that has not
        noticed yet, e.g. one just woken from SIGSTOP, still says it leads an older term)."""
        claims = [s for s in self.status()
                  if s.get("ok") and s.get("role") == "leader"
                  and (among is None or s["node"] in among)]
        return max(claims, key=lambda s: s["term"])["node"] if claims else None

    def wait_leader(self, timeout=30, among=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            leader = self.leader(among)
            if leader:
                return leader
            time.sleep(0.1)
        return None

    # ---- teardown ----
    def heal_all(self):
        """Every fault undone: links pass, paused nodes resume, clocks right, nodes up."""
        if self.proxy and self.proxy.poll() is None:
            self.heal_links()
        for n in list(self.paused):
            self.resume(n)
        if self.faketime:
            for n in self.ids:
                self.set_clock_offset(n, 0)
        for n in self.down():
            self.start_node(n)

    def stop(self):
        for n in list(self.paused):
            self.resume(n)
        stop_processes(self.procs.values())
        stop_processes([self.proxy])
