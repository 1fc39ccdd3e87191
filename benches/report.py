#!/usr/bin/env python3
"""Turns the results directory of benches/run.sh into the Markdown tables of
docs/performance.md (printed on stdout).

    report.py benches/results > benches/results/tables.md
"""

import glob
import json
import math
import os
import re
import sys

D = sys.argv[1]


def load(name, default=None):
    p = os.path.join(D, name)
    if not os.path.exists(p):
        return default
    with open(p) as f:
        return json.load(f)


S = load("summary.json", {})
M = load("machine.json", {})


def ms(x):
    x *= 1000
    if x >= 1000:
        return f"{x / 1000:.2f} s"
    if x >= 100:
        return f"{x:.0f} ms"
    if x >= 10:
        return f"{x:.1f} ms"
    return f"{x:.2f} ms"


def mb(kb):
    return f"{kb / 1024:.1f} MB"


def spread(label, key, fmt):
    s = S.get(label)
    if not s:
        return "–"
    v = s[key]
    if s["runs"] == 1:
        return fmt(v["median"])
    return f"{fmt(v['median'])} ({fmt(v['min'])}–{fmt(v['max'])})"


def med(label, key):
    s = S.get(label)
    return s[key]["median"] if s else None


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    r = a / b
    return f"{r:,.0f}×" if r >= 10 else f"{r:.1f}×"


out = []
p = out.append

p(f"Machine: {M.get('cpu', '?')}, {M.get('cores', '?')} cores, {M.get('mem_gb', '?')} GB, "
  f"{M.get('os', '?')}, kernel {M.get('kernel', '?')}; {M.get('rustc', '?')}; "
  f"{M.get('certbot', '?')}, lego {M.get('lego', '?')}, pebble {M.get('pebble', '?')}; "
  f"cert-agent {M.get('cert_agent_commit', '?')}; run {M.get('date', '?')}, load average "
  f"before {' '.join(M.get('load_before', []))}, after {' '.join(M.get('load_after', []))}.")
p("")

sizes = sorted({int(re.search(r"(\d+)$", k).group(1)) for k in S if k.startswith("agent-renew-")})

p("### 1. Renew check, nothing due")
p("")
p("Median (min–max) per run of the whole command; CPU is user + system time; RSS is the peak.")
p("")
p("| N | cert-agent wall | cert-agent CPU | cert-agent peak RSS | API calls | per certificate (wall) |")
p("|---:|---|---|---|---:|---:|")
for n in sizes:
    c = load(f"calls-noop-{n}.json", {})
    w = med(f"agent-renew-{n}", "wall_s")
    p(f"| {n} | {spread(f'agent-renew-{n}', 'wall_s', ms)} | {spread(f'agent-renew-{n}', 'cpu_s', ms)} | "
      f"{spread(f'agent-renew-{n}', 'maxrss_kb', mb)} | {c.get('total', '–')} | "
      f"{w / n * 1e6:.1f} µs |")
p("")
p("| N | certbot wall | certbot CPU | certbot peak RSS | lego wall (N processes) | lego CPU | lego peak RSS | certbot ÷ cert-agent (wall) | lego ÷ cert-agent (wall) |")
p("|---:|---|---|---|---|---|---|---:|---:|")
for n in sizes:
    a = med(f"agent-renew-{n}", "wall_s")
    p(f"| {n} | {spread(f'certbot-renew-{n}', 'wall_s', ms)} | {spread(f'certbot-renew-{n}', 'cpu_s', ms)} | "
      f"{spread(f'certbot-renew-{n}', 'maxrss_kb', mb)} | {spread(f'lego-renew-{n}', 'wall_s', ms)} | "
      f"{spread(f'lego-renew-{n}', 'cpu_s', ms)} | {spread(f'lego-renew-{n}', 'maxrss_kb', mb)} | "
      f"{ratio(med(f'certbot-renew-{n}', 'wall_s'), a)} | {ratio(med(f'lego-renew-{n}', 'wall_s'), a)} |")
p("")
if len(sizes) >= 2:
    lo, hi = sizes[0], sizes[-1]
    for tool in ("agent", "certbot", "lego"):
        a, b = med(f"{tool}-renew-{lo}", "wall_s"), med(f"{tool}-renew-{hi}", "wall_s")
        if a is not None and b is not None:
            p(f"- {tool}: marginal cost per certificate between N = {lo} and N = {hi}: "
              f"{(b - a) / (hi - lo) * 1e6:.1f} µs wall")
    p("")

p("### 2. Issuance cost")
p("")
parts = load("issue-parts.json", {})
if parts:
    p("Client-side parts, in process, one thread: median (min–max) of repeated runs.")
    p("")
    p("| part | median | min | max | runs |")
    p("|---|---:|---:|---:|---:|")
    rows = [(f"key generation {k}", v) for k, v in parts.get("keygen", {}).items()]
    rows += [("CSR (P-256, one name)", parts.get("csr_p256")),
             (f"bundle check (unzip + validate, {parts.get('bundle_bytes', '?')} B ZIP)", parts.get("bundle_check")),
             ("install, first (4 files, atomic, fsync)", parts.get("install_first")),
             ("install, replacing (keeps the previous version)", parts.get("install_replace"))]
    for name, v in rows:
        if v:
            f = lambda us: f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"
            p(f"| {name} | {f(v['median_us'])} | {f(v['min_us'])} | {f(v['max_us'])} | {v['n']} |")
    p("")
n_issue = next((int(k.rsplit("-", 1)[1]) for k in S if k.startswith("agent-issue-") and k != "agent-issue-1"), None)
if n_issue:
    L = f"agent-issue-{n_issue}"
    p(f"Whole path, {n_issue} certificates in one `cert-agent renew` run against the instant sandbox "
      f"(separate process; validation files fetched for real from a local web server), "
      f"{S[L]['runs']} runs:")
    p("")
    p("| | wall | CPU | peak RSS |")
    p("|---|---|---|---|")
    p(f"| whole run | {spread(L, 'wall_s', ms)} | {spread(L, 'cpu_s', ms)} | {spread(L, 'maxrss_kb', mb)} |")
    p(f"| per certificate | {ms(med(L, 'wall_s') / n_issue)} | {ms(med(L, 'cpu_s') / n_issue)} | |")
    R = f"agent-reissue-{n_issue}"
    if R in S:
        p(f"| reissue of all {n_issue} (`renew --force`) | {spread(R, 'wall_s', ms)} | {spread(R, 'cpu_s', ms)} | {spread(R, 'maxrss_kb', mb)} |")
        p(f"| per reissued certificate | {ms(med(R, 'wall_s') / n_issue)} | {ms(med(R, 'cpu_s') / n_issue)} | |")
    p("")
if n_issue and parts:
    per = med(f"agent-issue-{n_issue}", "cpu_s") * 1e6 / n_issue
    kg, csr = parts["keygen"]["ecdsa-p256"]["median_us"], parts["csr_p256"]["median_us"]
    bc, ins = parts["bundle_check"]["median_us"], parts["install_first"]["median_us"]
    rest = per - kg - csr - bc - ins
    p(f"Split of the {per / 1000:.2f} ms of CPU per ECDSA P-256 certificate in that run: the parts "
      f"measured in process, the remainder being the API calls and the state kept around them "
      f"(TLS, JSON, record and journal writes with fsync, validation file, self-check):")
    p("")
    p("| part | per certificate | share |")
    p("|---|---:|---:|")
    for name, us in (("key generation (P-256)", kg), ("CSR", csr), ("bundle check", bc),
                     ("install (wall time, mostly fsync)", ins), ("API calls and state (remainder)", rest)):
        p(f"| {name} | {us / 1000:.3f} ms | {us / per * 100:.0f}% |")
    p("")
p("One certificate per process (how certbot and lego are usually run; certbot and lego against "
  "pebble with `PEBBLE_VA_NOSLEEP=1 PEBBLE_VA_ALWAYS_VALID=1`, ECDSA P-256 keys for all three):")
p("")
p("| client | wall | CPU | peak RSS | CPU ÷ cert-agent |")
p("|---|---|---|---|---:|")
base = med("agent-issue-1", "cpu_s")
for tool, label in (("cert-agent", "agent-issue-1"),
                    ("cert-agent built with `AWS_LC_SYS_NO_JITTER_ENTROPY=1`", "agent-nojitter-issue-1"),
                    ("certbot", "certbot-issue-1"), ("lego", "lego-issue-1")):
    if label not in S:
        continue
    p(f"| {tool} | {spread(label, 'wall_s', ms)} | {spread(label, 'cpu_s', ms)} | "
      f"{spread(label, 'maxrss_kb', mb)} | {ratio(med(label, 'cpu_s'), base)} |")
p("")

p("### 3. API economy (sandbox call log)")
p("")
ci = load("calls-issue.json", {})
cr = load("calls-reissue.json", {})
cn = load("calls-noop-sandbox.json", {})
if ci:
    kinds = sorted(set(ci.get("by_kind", {})) | set(cr.get("by_kind", {})))
    p(f"| endpoint | issue {n_issue}: calls | per certificate | reissue {n_issue}: calls | per certificate |")
    p("|---|---:|---:|---:|---:|")
    for k in kinds:
        p(f"| {k} | {ci.get('by_kind', {}).get(k, 0)} | {ci.get('by_kind_per_certificate', {}).get(k, 0)} | "
          f"{cr.get('by_kind', {}).get(k, 0)} | {cr.get('by_kind_per_certificate', {}).get(k, 0)} |")
    p(f"| **total** | {ci.get('total')} | **{ci.get('per_certificate')}** | {cr.get('total')} | **{cr.get('per_certificate')}** |")
    p("")
    p(f"No-op runs: {cn.get('total', '–')} calls in {S.get(f'agent-noop-sandbox-{n_issue}', {}).get('runs', '?') + 1} "
      f"runs over the {n_issue} issued certificates; "
      + ", ".join(f"N = {n}: {load(f'calls-noop-{n}.json', {}).get('total', '–')}" for n in sizes)
      + " calls for the installed fleets above.")
    p("")
cp = load("calls-poll.json", {})
if cp and cp.get("windows"):
    n = cp.get("certificates_seen") or 0
    iv = cp.get("poll_interval_secs")
    p(f"Polling {n} pending certificates (validation never succeeds; `poll_interval_secs = {iv:g}`; "
      f"a run with `--wait {4 * iv + n // 4:g}` then a second run right away, exit codes "
      f"{cp.get('exit_codes')}), calls per interval from the first poll:")
    p("")
    p("| interval | list pages | status calls | details (validation content) |")
    p("|---:|---:|---:|---:|")
    for i, w in enumerate(cp["windows"]):
        p(f"| {i * iv:g}–{(i + 1) * iv:g} s | {w['list']} | {w['status']} | {w['details']} |")
    p("")
    gap = cp.get('min_seconds_between_status_calls_of_one_certificate')
    gap = "none made" if gap is None else f"{gap} s apart at least"
    lgap = cp.get('min_seconds_between_list_rounds')
    lgap = "only one round" if lgap is None else f"{lgap} s"
    p(f"Target: ≤ ceil({n}/50) = {math.ceil(n / 50)} polling calls per interval. Status calls for "
      f"one certificate, as the sandbox logged them: {gap}; shortest time between two list "
      f"rounds, across both runs: {lgap} (interval {iv:g} s). All calls: {cp.get('by_kind')}.")
    p("")

p("### 4. Footprint")
p("")
fp = load("footprint.json", {})
p("| | value |")
p("|---|---|")
if fp:
    p(f"| release binary | {fp['binary_bytes'] / 2**20:.1f} MiB ({fp['stripped_bytes'] / 2**20:.1f} MiB stripped) |")
p(f"| `cert-agent --version` | {spread('version', 'wall_s', ms)} wall, {spread('version', 'maxrss_kb', mb)} peak RSS |")
p(f"| `certbot --version` | {spread('certbot-version', 'wall_s', ms)} wall, {spread('certbot-version', 'maxrss_kb', mb)} |")
p(f"| `lego --version` | {spread('lego-version', 'wall_s', ms)} wall, {spread('lego-version', 'maxrss_kb', mb)} |")
drss = os.path.join(D, "daemon-rss.txt")
if os.path.exists(drss):
    p(f"| `cert-agent run` (daemon), 1000 certificates, after its first run | {open(drss).read().strip()} (VmRSS now, VmHWM peak) |")
else:
    p("| daemon idle RSS | not measured in this run (section `daemon` of BENCH_ONLY) |")
p("")
print("\n".join(out))
