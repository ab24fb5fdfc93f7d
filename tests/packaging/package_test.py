#!/usr/bin/env python3
"""The Debian package (packaging/, docs/operations.md "Installing"), built and inspected.

  package_test.py --build build --source .

cpack builds dueq_VERSION_ARCH.deb from this build tree into a temporary directory; then:
  - its file list holds the three programs, the systemd unit, /etc/dueq/n1.toml (a
    conffile), the bash completion, the docs, the examples and the monitoring kit, and
    none of the test or measurement binaries;
  - its postinst and postrm are there and executable, and it depends on adduser;
  - the packaged dueqd answers --version, and dueqctl --help lists `list`;
  - `systemd-analyze verify` finds nothing to say about the unit (and does about a unit
    with a planted unknown key, so the check can fail);
  - the bash completion completes `dueqctl li` to `list` and `--status` values.
Nothing is installed on this machine. Exit 0 on pass."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

WANTED = [
    "./usr/bin/dueqd", "./usr/bin/dueq-proxy", "./usr/bin/dueqctl",
    "./usr/lib/systemd/system/dueqd@.service", "./etc/dueq/n1.toml",
    "./usr/share/bash-completion/completions/dueqctl",
    "./usr/share/doc/dueq/README.md", "./usr/share/doc/dueq/operations.md",
    "./usr/share/doc/dueq/config.md", "./usr/share/doc/dueq/monitoring.md",
    "./usr/share/doc/dueq/examples/three-dc/dc1.toml",
    "./usr/share/doc/dueq/contrib/prometheus/alerts.yml",
    "./usr/share/doc/dueq/contrib/grafana/dueq-cluster.json",
]
UNWANTED = ["dueqd-test", "dueq-bench", "dueq-sim", "dueq-faultproxy", "test_"]


def sh(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=240, **kw)


def verify_unit(path, work, root):
    """What systemd-analyze verify says about a unit (as an instance, its dueqd the one
    unpacked under `root`), or None without systemd-analyze."""
    if not shutil.which("systemd-analyze"):
        return None
    inst = os.path.join(work, "dueqd@n1.service")
    with open(path) as src, open(inst, "w") as dst:
        dst.write(src.read().replace("/usr/bin/dueqd", os.path.join(root, "usr/bin/dueqd")))
    r = sh("systemd-analyze", "verify", inst)
    return (r.stdout + r.stderr).strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    if not shutil.which("cpack") or not shutil.which("dpkg-deb"):
        print("SKIP: needs cpack and dpkg-deb")
        sys.exit(77)
    problems = []
    work = tempfile.mkdtemp(prefix="dueq-package-")
    try:
        r = sh("cpack", "-G", "DEB", "-B", work, cwd=a.build)
        debs = [f for f in os.listdir(work) if f.endswith(".deb")]
        if r.returncode != 0 or len(debs) != 1:
            print(f"FAIL: cpack: exit {r.returncode}: {r.stdout[-500:]} {r.stderr[-500:]}")
            sys.exit(1)
        deb = os.path.join(work, debs[0])
        print(f"built {debs[0]}, {os.path.getsize(deb) / 1e6:.1f} MB")
        files = [line.split()[-1] for line in sh("dpkg-deb", "-c", deb).stdout.splitlines()]
        for f in WANTED:
            if f not in files:
                problems.append(f"{f} is not in the package")
        for f in files:
            if any(os.path.basename(f).startswith(u) for u in UNWANTED):
                problems.append(f"{f} is in the package: tests and tools are not shipped")
        control = os.path.join(work, "control")
        sh("dpkg-deb", "-e", deb, control)
        for script in ("postinst", "postrm"):
            p = os.path.join(control, script)
            if not os.access(p, os.X_OK):
                problems.append(f"{script} is missing or not executable")
        with open(os.path.join(control, "conffiles")) as f:
            if "/etc/dueq/n1.toml" not in f.read().split():
                problems.append("/etc/dueq/n1.toml is not a conffile")
        with open(os.path.join(control, "control")) as f:
            if "adduser" not in f.read():
                problems.append("the package does not depend on adduser (postinst uses it)")
        root = os.path.join(work, "root")
        sh("dpkg-deb", "-x", deb, root)
        v = sh(os.path.join(root, "usr/bin/dueqd"), "--version")
        if v.returncode != 0 or not v.stdout.startswith("dueqd "):
            problems.append(f"packaged dueqd --version: exit {v.returncode}, {v.stdout!r}")
        h = sh(os.path.join(root, "usr/bin/dueqctl"), "--help")
        if " list " not in h.stdout:
            problems.append("packaged dueqctl --help does not list `list`")
        unit = os.path.join(root, "usr/lib/systemd/system/dueqd@.service")
        said = verify_unit(unit, work, root)
        if said is None:
            print("systemd-analyze not found: the unit is not verified")
        else:
            if said:
                problems.append(f"systemd-analyze verify: {said}")
            planted = os.path.join(work, "planted.service")
            with open(unit) as src, open(planted, "w") as dst:
                dst.write(src.read().replace("LimitNOFILE=", "LimitNOFILES="))
            if not verify_unit(planted, work, root):
                problems.append("systemd-analyze verify said nothing of a planted unknown key")
        completion = os.path.join(root, "usr/share/bash-completion/completions/dueqctl")
        ctl = os.path.join(root, "usr/bin/dueqctl")
        script = (f"source {completion}; COMP_WORDS=({ctl} li); COMP_CWORD=1; _dueqctl; "
                  'echo "${COMPREPLY[@]}"; '
                  f"COMP_WORDS=({ctl} list q --status bu); COMP_CWORD=4; _dueqctl; "
                  'echo "${COMPREPLY[@]}"')
        got = sh("bash", "-c", script).stdout.split("\n")
        if got[:2] != ["list", "buried"]:
            problems.append(f"bash completion gave {got[:2]}, wanted ['list', 'buried']")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for p in problems:
        print(f"FAIL: {p}")
    print(f"package: {'FAIL' if problems else 'pass'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
