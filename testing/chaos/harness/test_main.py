"""The command line every real-process test script shares (tests/cluster, tests/shard):

    SCRIPT [--build build] [--keep DIR]

run(build, work) gets the build directory (absolute) and a fresh work directory (DIR with
--keep, which is then left in place; else a temporary one, removed afterwards). It returns
None on pass, a message saying what went wrong, or SKIP when the machine cannot run it
(the process then exits 77, which ctest reports as skipped with SKIP_RETURN_CODE 77)."""
import argparse
import os
import shutil
import sys
import tempfile

SKIP = 77


def test_main(doc, run, name):
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--keep", help="keep the test's files in this directory")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix=f"dueq-{name.replace(' ', '-')}-")
    os.makedirs(work, exist_ok=True)
    try:
        problem = run(os.path.abspath(a.build), work)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    if problem == SKIP:
        sys.exit(SKIP)
    if problem:
        print(f"FAIL: {problem}")
        sys.exit(1)
    print(f"{name}: pass")
    sys.exit(0)
