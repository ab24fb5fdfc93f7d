#!/usr/bin/env python3
"""Each name of the client protocol is spelled once in src/: in src/wire/protocol.h.

Reads every field name, op name and word from src/wire/protocol.h, then looks for each
one as a string literal ("lease_until") in the code of src/ outside src/wire/, comments
left out. A file that speaks another contract with some of the same words (the config
file, the shard map file, the HTTP admin API, metric labels, ...) is listed below with the
words it may use and why. Anything else is a second home: the test fails naming it.

  one_home.py [SRC_DIR]          check (default: the src/ next to tests/)
  one_home.py --self-test        also show the check failing on a planted literal
"""
import os
import re
import shutil
import sys
import tempfile

# file (relative to src/) -> (why it may spell these words, the words)
OTHER_CONTRACTS = {
    "node/config.cpp": ("TOML keys of a node's config file (docs/config.md)",
                        {"lead_ms", "ttr_ms", "max_attempts", "retention_ms", "late_share",
                         "autonomous", "id", "peer", "queues", "client", "token", "name", "shard",
                         "members", "admin", "peers"}),
    "node/members.cpp": ("JSON of the member directory kept in the Raft log (node/members.h)",
                         {"id", "name", "peer", "client", "admin", "members"}),
    "shard/shard_map.cpp": ("TOML keys of the shard map file (docs/sharding.md)",
                            {"version", "buckets", "shards", "name", "members", "id", "client"}),
    "node/admin.cpp": ("JSON of the HTTP admin API (docs/admin.md)", None),
    "node/metrics_text.cpp": ("Prometheus metric labels (docs/admin.md)", {"op", "queue", "status", "code", "peer", "mode", "ready", "taken", "buried", "done", "role", "voter", "learner", "version"}),
    "node/json_log.cpp": ("keys of the JSON log lines", {"time", "message"}),
    "node/json_log.h": ("keys of the JSON log lines", {"time", "message"}),
    "queue/names.cpp": ("the task status words, which stats also uses as counts",
                        {"ready", "taken", "buried", "done"}),
    "raft/raft.cpp": ("Raft role words", {"leader"}),
    "storage/database.cpp": ("RocksDB column family and property names",
                             {"tasks", "overlay"}),
    "storage/database_keys.h": ("RocksDB column family names", {"tasks", "overlay"}),
}


def protocol_names(src):
    text = open(os.path.join(src, "wire", "protocol.h")).read()
    names = set()
    for ns in ("field", "word"):
        body = text[text.index("namespace %s {" % ns):text.index("}  // namespace %s" % ns)]
        names |= set(re.findall(r'=\s*"([a-z_0-9]+)"', body))
    ops = text[text.index("kOps{{"):text.index("}};", text.index("kOps{{"))]
    names |= set(re.findall(r'Op::\w+,\s*"([a-z_]+)"', ops))
    return names


def code_of(path):
    """The file's text without comments (// to the end of the line)."""
    out = []
    for line in open(path, encoding="utf-8", errors="replace"):
        out.append(re.sub(r'(^|[^:"])//.*$', r"\1", line))
    return "".join(out)


def second_homes(src):
    names = protocol_names(src)
    if len(names) < 60:
        return ["only %d names read from wire/protocol.h: the parser is broken" % len(names)]
    found = []
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".h", ".cpp")):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)
            if rel.startswith("wire" + os.sep):
                continue
            allowed = OTHER_CONTRACTS.get(rel, ("", set()))[1]
            for m in re.finditer(r'"([a-z_0-9]+)"', code_of(path)):
                word = m.group(1)
                if word in names and allowed is not None and word not in allowed:
                    found.append('%s: "%s" (use wire/protocol.h)' % (rel, word))
    return found


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    args = [a for a in sys.argv[1:] if a != "--self-test"]
    src = args[0] if args else os.path.join(here, "..", "..", "src")
    found = second_homes(src)
    for f in found:
        print("second home:", f)
    if "--self-test" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            planted = os.path.join(tmp, "src")
            shutil.copytree(src, planted)
            with open(os.path.join(planted, "node", "replies.cpp"), "a") as f:
                f.write('\nconst char* kPlanted = "lease_until";\n')
            caught = second_homes(planted)
            if not any('node/replies.cpp: "lease_until"' in c for c in caught):
                print("self-test: a planted literal in node/replies.cpp was not found")
                return 1
            print("self-test: the planted literal was found")
    if found:
        return 1
    print("every protocol name has one home: %d names" % len(protocol_names(src)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
