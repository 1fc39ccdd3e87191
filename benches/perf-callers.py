#!/usr/bin/env python3
"""Reads `perf script` output (a profile recorded with `--call-graph dwarf`, so that the C
library's copies and allocations have callers) from stdin and prints:
  - the share of samples under each cert_agent function (inclusive; a stack deeper than the
    8 KiB perf copies is cut, so the outermost functions are undercounted);
  - for the C library's copies, comparisons and allocator, their first callers in cert_agent.
Usage: perf script -i DATA | benches/perf-callers.py [TOP]"""
import collections
import re
import sys

TOP = int(sys.argv[1]) if len(sys.argv) > 1 else 60
LIBC = ("memcpy", "memmove", "memcmp", "_int_malloc", "_int_free", "malloc_consolidate",
        "unlink_chunk", "libc_free", "libc_malloc")
FRAME = re.compile(r"[0-9a-f]+ (.+?)\+0x[0-9a-f]+ |[0-9a-f]+ (.+) \(")
NOISE = re.compile(r"::\{\{closure\}\}|::\{async_fn#0\}|::\{closure#0\}")


def frames(block):
    out = []
    for line in block.strip().split("\n")[1:]:
        m = FRAME.match(line.strip())
        out.append((m.group(1) or m.group(2)) if m else line.strip())
    return out


inclusive = collections.Counter()
callers = collections.defaultdict(collections.Counter)
total = 0
for block in sys.stdin.read().split("\n\n"):
    fs = frames(block)
    if not fs:
        continue
    total += 1
    ours = [NOISE.sub("", f) for f in fs if "cert_agent" in f]
    for f in set(ours):
        inclusive[f] += 1
    top = next((s for s in LIBC if s in fs[0]), None)
    if top:
        callers[top][" <- ".join(f[:120] for f in ours[:3]) or "?"] += 1
if not total:
    sys.exit("no samples")
print(f"{total} samples\n\ninclusive, by cert_agent function:")
for f, n in inclusive.most_common(TOP):
    print(f"{100 * n / total:5.1f}%  {f[:160]}")
for sym, by in sorted(callers.items(), key=lambda kv: -sum(kv[1].values())):
    print(f"\n{sym}: {100 * sum(by.values()) / total:.1f}% of samples; first callers:")
    for k, n in by.most_common(8):
        print(f"  {100 * n / total:5.1f}%  {k}")
