#!/usr/bin/env python3
"""Classes of src/ whose members are defined in more than MAX .cpp files (issue 39: 2).

  measure/class-files.py [MAX]   (default 2)

A definition is a line at column 0 of the form `Type Class::name(` or `Class::Class(`
(classes are CamelCase here, namespaces lower case; a nested class counts for itself).
Prints each class over MAX with its files, then a count; exits 1 when there is any.
"""
import collections
import os
import re
import sys

DEF = re.compile(r"^(?:[\w:<>,*&~][\w:<>,*&~ ]*\s)?((?:\w+::)*)([A-Z]\w*)::~?\w+\(")


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 2
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    files = collections.defaultdict(set)
    for d, _, names in os.walk(root):
        for n in names:
            if not n.endswith(".cpp"):
                continue
            path = os.path.join(d, n)
            for line in open(path, encoding="utf-8", errors="replace"):
                m = DEF.match(line)
                if m and not line.startswith(("return", "using", "namespace")):
                    files[m.group(2)].add(os.path.relpath(path, root))
    over = {c: sorted(f) for c, f in files.items() if len(f) > limit}
    for c, f in sorted(over.items()):
        print("%s: %d files: %s" % (c, len(f), " ".join(f)))
    print("%d classes in src/ defined across more than %d .cpp files" % (len(over), limit))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
