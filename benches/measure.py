#!/usr/bin/env python3
"""Runs a command several times and records wall time, CPU time and peak RSS of each run.

    measure.py --label L --reps N --out results.jsonl [--expect-exit 0] [--env K=V ...] -- CMD...

Wall time comes from a monotonic clock around fork/exec/wait; user and system CPU time and the
peak resident set size from the rusage that wait4(2) returns for the command and every
descendant it waited for (the same getrusage figures `/usr/bin/time -v` prints, at microsecond
instead of 10 ms resolution). One JSON line per run is appended to --out; a summary (median,
min, max) is printed. A run whose exit status differs from --expect-exit aborts with status 1.

    measure.py --summary results.jsonl   # median/min/max per label as JSON
"""

import argparse
import json
import os
import statistics
import sys
import time


def run_once(cmd, env):
    start = time.perf_counter_ns()
    pid = os.fork()
    if pid == 0:
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            if os.environ.get("MEASURE_QUIET", "1") == "1":
                os.dup2(devnull, 1)
            os.execvpe(cmd[0], cmd, env)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = (time.perf_counter_ns() - start) / 1e9
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": wall,
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "maxrss_kb": ru.ru_maxrss,
    }


def summarize(rows):
    out = {}
    for label in dict.fromkeys(r["label"] for r in rows):
        rs = [r for r in rows if r["label"] == label]
        s = {"runs": len(rs)}
        for k in ("wall_s", "cpu_s", "user_s", "sys_s", "maxrss_kb"):
            v = sorted(r[k] for r in rs)
            s[k] = {"median": statistics.median(v), "min": v[0], "max": v[-1]}
        s["meta"] = rs[-1].get("meta", {})
        out[label] = s
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--label")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--out")
    p.add_argument("--expect-exit", type=int, default=0)
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--meta", action="append", default=[], help="K=V stored with each run")
    p.add_argument("--summary")
    p.add_argument("cmd", nargs="*")
    a = p.parse_args()
    if a.summary:
        rows = [json.loads(l) for l in open(a.summary) if l.strip()]
        json.dump(summarize(rows), sys.stdout, indent=1)
        print()
        return 0
    env = dict(os.environ)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    meta = {}
    for kv in a.meta:
        k, _, v = kv.partition("=")
        meta[k] = v
    rows = []
    for i in range(a.warmup + a.reps):
        r = run_once(a.cmd, env)
        if r["exit"] != a.expect_exit:
            print(f"measure: {a.label}: exit {r['exit']} (expected {a.expect_exit}): {' '.join(a.cmd)}",
                  file=sys.stderr)
            return 1
        if i < a.warmup:
            continue
        r["label"] = a.label
        r["meta"] = meta
        rows.append(r)
    with open(a.out, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    s = summarize(rows)[a.label]
    print(f"{a.label}: wall {s['wall_s']['median']*1000:.1f} ms "
          f"[{s['wall_s']['min']*1000:.1f}..{s['wall_s']['max']*1000:.1f}], "
          f"cpu {s['cpu_s']['median']*1000:.1f} ms, rss {s['maxrss_kb']['median']/1024:.1f} MB "
          f"({s['runs']} runs)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
