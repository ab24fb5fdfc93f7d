#!/usr/bin/env python3
"""The README's layout table matches the tree (issue 39).

  layout_check.py [ROOT]      check ROOT (default: this repository)
  layout_check.py --self-test show that a folder the table lacks, and a row whose path is
                              gone, are both caught

Checks: every path in the table's first column exists; every top-level folder the
repository tracks has a row or is named in one; every folder under src/ is named as
`src/<name>`; every folder under cmd/, testing/ and measure/ is named in its parent's
row. Exits 1 with what is missing."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

GROUPED = ("cmd", "testing", "measure")


def tracked_dirs(root):
    """Top-level folders and their children, as the repository tracks them."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
        paths = [p for p in out if p]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for d, _, names in os.walk(root):
            for n in names:
                paths.append(os.path.relpath(os.path.join(d, n), root))
    dirs = set()
    for p in paths:
        parts = p.split("/")
        if len(parts) >= 2 and not parts[0].startswith("."):
            dirs.add(parts[0])
            if len(parts) >= 3:
                dirs.add(parts[0] + "/" + parts[1])
    return dirs


def table_rows(root):
    text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    section = text.split("## Layout", 1)[1]
    rows = {}
    for line in section.split("\n"):
        m = re.match(r"^\| `([^`]+)` \|(.*)\|\s*$", line)
        if m:
            rows[m.group(1).rstrip("/")] = m.group(2)
        elif rows and not line.startswith("|"):
            break
    return rows


def check(root):
    rows = table_rows(root)
    whole = " ".join(f"`{k}` {v}" for k, v in rows.items())
    problems = []
    for path in rows:
        if not os.path.exists(os.path.join(root, path)):
            problems.append(f"the table names {path}, which is not in the tree")
    for d in sorted(tracked_dirs(root)):
        top, _, child = d.partition("/")
        if not child:
            if top not in rows and f"`{top}/" not in whole and f"`{top}`" not in whole:
                problems.append(f"top-level folder {top}/ is in no row")
        elif top == "src":
            if f"`src/{child}" not in whole and f"`{d}`" not in whole:
                problems.append(f"{d} is in no row")
        elif top in GROUPED:
            row = rows.get(top, "")
            if f"`{child}/" not in row and f"`{child}`" not in row:
                problems.append(f"{d}/ is not named in the `{top}/` row")
    return problems


def self_test():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.normpath(os.path.join(here, "..", ".."))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("README.md",):
            shutil.copy(os.path.join(repo, name), tmp)
        for d in tracked_dirs(repo):
            os.makedirs(os.path.join(tmp, d), exist_ok=True)
            open(os.path.join(tmp, d, "f"), "w").close()
        if check(tmp):
            print("self-test: the copy of the tree should pass:", check(tmp))
            failures += 1
        os.makedirs(os.path.join(tmp, "testing", "new-harness"))
        open(os.path.join(tmp, "testing", "new-harness", "f"), "w").close()
        if not any("testing/new-harness" in p for p in check(tmp)):
            print("self-test: a folder the table lacks was not caught")
            failures += 1
        shutil.rmtree(os.path.join(tmp, "testing", "new-harness"))
        shutil.rmtree(os.path.join(tmp, "sim"))
        if not any("names sim" in p for p in check(tmp)):
            print("self-test: a row whose folder is gone was not caught")
            failures += 1
    print("self-test:", "FAILED" if failures else "both planted drifts caught")
    return 1 if failures else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..")
    problems = check(root)
    for p in problems:
        print(p)
    print(f"README layout: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
