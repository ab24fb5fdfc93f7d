"""Checks' results and the two outputs: a readable summary and a JSON report."""

MAX_EXAMPLES = 20
MAX_LINE_CHARS = 600            # a quoted event line longer than this is cut in the text


class Check:
    """One pass/fail check: violations counted by kind, the first MAX_EXAMPLES of each
    kind kept with the line numbers of the events that prove them."""

    def __init__(self, name, title):
        self.name = name
        self.title = title
        self.checked = 0          # how many things were judged (final states, leases, ...)
        self.counts = {}          # violation kind -> count
        self.examples = {}        # violation kind -> [example]
        self.stats = {}           # figures that do not decide pass/fail
        self.notes = []

    def violation(self, kind, message, lines, **fields):
        self.counts[kind] = self.counts.get(kind, 0) + 1
        ex = self.examples.setdefault(kind, [])
        if len(ex) < MAX_EXAMPLES:
            e = {"message": message, "lines": sorted(set(x for x in lines if x))}
            e.update(fields)
            ex.append(e)

    @property
    def passed(self):
        return not self.counts

    def line_numbers(self):
        return {n for ex in self.examples.values() for e in ex for n in e["lines"]}

    def to_json(self, text_of):
        examples = {}
        for kind, ex in self.examples.items():
            examples[kind] = [dict(e, events=[text_of.get(n, "") for n in e["lines"]])
                              for e in ex]
        return {"title": self.title, "passed": self.passed, "checked": self.checked,
                "violations": dict(self.counts), "examples": examples,
                "stats": self.stats, "notes": self.notes}


def fetch_lines(path, wanted):
    """The text of the wanted line numbers, in one pass over the file."""
    out = {}
    if not wanted:
        return out
    last = max(wanted)
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for n, text in enumerate(f, 1):
            if n in wanted:
                out[n] = text.rstrip("\n")
            if n >= last:
                break
    return out


def _cut(s):
    return s if len(s) <= MAX_LINE_CHARS else s[:MAX_LINE_CHARS] + " ...(cut)"


def render_check(check, text_of):
    mark = "PASS" if check.passed else "FAIL"
    head = f"[{mark}] {check.name:9} {check.title} ({check.checked} checked)"
    out = [head]
    if check.counts:
        out.append("    violations: " + ", ".join(f"{k} {v}" for k, v in check.counts.items()))
    for k, v in check.stats.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in v.items()) or "-"
        out.append(f"    {k}: {v}")
    for note in check.notes:
        out.append(f"    note: {note}")
    for kind, ex in check.examples.items():
        out.append(f"    -- {kind}: {check.counts[kind]}"
                   + (f" (first {len(ex)} shown)" if check.counts[kind] > len(ex) else ""))
        for e in ex:
            out.append(f"     * {e['message']}")
            for n in e["lines"]:
                out.append(f"         L{n}: {_cut(text_of.get(n, '?'))}")
    return out
