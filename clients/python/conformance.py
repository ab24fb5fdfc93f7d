#!/usr/bin/env python3
"""The Python client's driver of the conformance suite (clients/conformance/README.md):
  DUEQ_SEEDS=host:port,... conformance.py SCENARIOS.json"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dueq  # noqa: E402

STEP_DEADLINE = 10.0
RETRY = {"no_quorum", "unavailable", "not_leader"}


def substitute(value, saved, i):
    if isinstance(value, dict):
        return {k: substitute(v, saved, i) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, saved, i) for v in value]
    if not isinstance(value, str):
        return value
    if value.startswith("$now"):
        now = int(time.time() * 1000)
        return now + int(value[4:]) if len(value) > 4 else now
    if value.startswith("$") and not value.startswith("${"):
        return saved[value[1:]]
    if "${i}" in value:
        return str(i) if value == "${i}" else value.replace("${i}", str(i))
    return value


def matches(want, got):
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and matches(v, got[k])
                                             for k, v in want.items())
    if isinstance(want, list):
        return (isinstance(got, list) and len(got) == len(want)
                and all(matches(w, g) for w, g in zip(want, got)))
    if isinstance(got, bytes) and isinstance(want, str):
        return got == want.encode()
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return want == got
    return want == got


def at_path(value, path):
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def run_step(client, step, saved, i):
    fields = substitute(step.get("fields", {}), saved, i)
    expect = step.get("expect", {"ok": True})
    deadline = time.monotonic() + STEP_DEADLINE
    while True:
        try:
            result, err = client.call(step["op"], fields), None
        except dueq.Error as e:
            result, err = None, e
        retry = (err is not None and err.code in RETRY and err.not_applied
                 and expect.get("code") != err.code and time.monotonic() < deadline)
        if not retry:
            break
        time.sleep(0.2)
    if "outcome" in expect:
        got = "applied" if err is None else err.outcome
        return None if got == expect["outcome"] else f"outcome {got}, wanted {expect['outcome']}"
    if expect.get("ok", True):
        if err is not None:
            return f"{step['op']}: {err}"
        if "result" in expect and not matches(expect["result"], result):
            return f"{step['op']}: answer {result} does not contain {expect['result']}"
        for name, n in expect.get("result_len", {}).items():
            if len(result.get(name, [])) != n:
                return f"{step['op']}: {name} has {len(result.get(name, []))}, wanted {n}"
        for var, path in step.get("save", {}).items():
            saved[var] = at_path(result, path)
        return None
    codes = expect["code"] if isinstance(expect["code"], list) else [expect["code"]]
    if err is None:
        return f"{step['op']}: ok {result}, wanted {codes}"
    return None if err.code in codes else f"{step['op']}: {err.code}, wanted {codes}"


def action(name):
    print(f"ACTION {name}", flush=True)
    line = sys.stdin.readline().strip()
    return None if line == "DONE" else f"action {name}: {line or 'no answer'}"


def run_scenario(client, scenario):
    saved = {}
    for n, step in enumerate(scenario["steps"]):
        if "action" in step:
            why = action(step["action"])
        elif "sleep_ms" in step and "op" not in step:
            time.sleep(step["sleep_ms"] / 1000)
            why = None
        else:
            why = None
            for i in range(step.get("repeat", 1)):
                why = run_step(client, step, saved, i)
                if why:
                    break
        if why:
            return f"step {n}: {why}"
    return None


def main():
    with open(sys.argv[1]) as f:
        scenarios = json.load(f)["scenarios"]
    seeds = os.environ["DUEQ_SEEDS"].split(",")
    client = dueq.Client(seeds, call_timeout=5.0)
    for s in scenarios:
        try:
            why = run_scenario(client, s)
        except Exception as e:  # a driver bug shows as the scenario's failure, not a crash
            why = f"{type(e).__name__}: {e}"
        print(f"FAIL {s['name']}: {why}" if why else f"PASS {s['name']}", flush=True)
    client.close()


if __name__ == "__main__":
    main()
