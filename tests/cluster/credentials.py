#!/usr/bin/env python3
"""dueqctl's credentials against a node that requires a token and client certificates.

  credentials.py [--build build] [--keep DIR]

One dueqd with [node] auth_token and [tls] clients = "mutual" (certificates made at test
time by scripts/make-certs.sh). Every dueqctl command that talks to a node, the worker
included, must work with the token and the TLS files given by environment variable
(DUEQ_TOKEN, DUEQ_CACERT, DUEQ_CERT, DUEQ_KEY) and by flag (--token-file, --cacert,
--cert, --key); without the token, without a client certificate, or in plaintext it must
fail; and the token must appear in no output and no log. Exit 0 on pass."""
import os
import signal
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testing", "chaos"))
from harness.test_main import test_main  # noqa: E402
TOKEN = "secret-token-" + os.urandom(6).hex()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(build, work):
    certs = os.path.join(work, "tls")
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "make-certs.sh"), certs, "n1", "worker"],
                   check=True, capture_output=True)
    port = free_port()
    conf = os.path.join(work, "n1.toml")
    with open(conf, "w") as f:
        f.write(f"""[node]
id = "n1"
client_listen = "127.0.0.1:{port}"
data_dir = "{work}/data"
auth_token = "{TOKEN}"

[tls]
ca_file = "{certs}/ca.pem"
cert_file = "{certs}/n1.pem"
key_file = "{certs}/n1.key"
clients = "mutual"
""")
    log = open(os.path.join(work, "n1.log"), "w")
    node = subprocess.Popen([os.path.join(build, "cmd/dueqd/dueqd"), "--config", conf],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        if "listening on port" not in node.stdout.readline():
            return "dueqd did not start: " + open(os.path.join(work, "n1.log")).read()[-500:]
        ctl = os.path.join(build, "cmd/dueqctl/dueqctl")
        env_creds = dict(os.environ, DUEQ_ADDR=f"127.0.0.1:{port}", DUEQ_TOKEN=TOKEN,
                         DUEQ_CACERT=f"{certs}/ca.pem", DUEQ_CERT=f"{certs}/worker.pem",
                         DUEQ_KEY=f"{certs}/worker.key")
        token_file = os.path.join(work, "token")
        open(token_file, "w").write(TOKEN + "\n")
        flags = ["--addr", f"127.0.0.1:{port}", "--token-file", token_file, "--cacert",
                 f"{certs}/ca.pem", "--cert", f"{certs}/worker.pem", "--key", f"{certs}/worker.key"]
        bare = {k: v for k, v in os.environ.items() if not k.startswith("DUEQ_")}
        said = []

        def ctl_run(args, env, want_ok, what):
            r = subprocess.run([ctl, "--timeout", "3s", *args], env=env, capture_output=True,
                               text=True, timeout=60)
            said.append(r.stdout + r.stderr)
            if (r.returncode == 0) != want_ok:
                raise AssertionError(f"{what}: dueqctl {' '.join(args)} exited {r.returncode}: "
                                     f"{r.stderr.strip()[-300:]}")
            return r

        def commands(k):
            return [
                ["ping"], ["status"], ["shards"], ["member", "list"],
                ["declare", "tokens", "--lead", "1s", "--ttr", "30s"],
                ["put", "tokens", k, "--payload", '"t1"', "--time", "now"],
                ["get", "tokens", k], ["stats", "tokens"], ["kick", "tokens"],
                ["worker", "tokens", "--builtin-refresh", "--next-in", "1h", "--max-tasks", "1",
                 "--duration", "10s"],
                ["put", "tokens", k + "-gone", "--payload", '"t2"'],
                ["delete", "tokens", k + "-gone"],
            ]
        for args in commands("env"):
            ctl_run(args, env_creds, True, "with DUEQ_* variables")
        for args in commands("flags"):
            ctl_run(flags + args, bare, True, "with flags")
        # Each worker refreshed its key: the payload is no longer the first token.
        for k in ("env", "flags"):
            got = ctl_run(["--json", "get", "tokens", k], env_creds, True, "get")
            if '"t1"' in got.stdout:
                return f"the worker did not refresh {k}: {got.stdout}"
        # Refusals: no token, no client certificate, plaintext.
        no_token = {k: v for k, v in env_creds.items() if k != "DUEQ_TOKEN"}
        r = ctl_run(["put", "tokens", "k3", "--payload", '"x"'], no_token, False, "without a token")
        if "unauthorized" not in r.stderr:
            return f"without a token: {r.stderr}"
        no_cert = {k: v for k, v in env_creds.items() if k not in ("DUEQ_CERT", "DUEQ_KEY")}
        ctl_run(["ping"], no_cert, False, "without a client certificate")
        plaintext = {k: v for k, v in env_creds.items() if not k.startswith("DUEQ_CA")}
        plaintext = {k: v for k, v in plaintext.items() if k not in ("DUEQ_CERT", "DUEQ_KEY")}
        r = ctl_run(["ping"], plaintext, False, "in plaintext")
        if "TLS connections only" not in r.stderr:
            return f"a plaintext client was not told the port takes TLS only: {r.stderr}"
        ctl_run(["--cert", f"{certs}/worker.pem", "ping"], env_creds | {"DUEQ_KEY": ""}, False,
                "--cert without --key")
        for text in said + [open(os.path.join(work, "n1.log")).read()]:
            if TOKEN in text:
                return "the token was printed or logged"
        return None
    except AssertionError as e:
        return str(e)
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=30)


if __name__ == "__main__":
    test_main(__doc__, run, "credentials")
