#!/usr/bin/env python3
"""The tables and curves of benches/fleet-scale.sh: OUT/results.csv (and OUT/bench.txt, the
settings) to OUT/summary.txt (markdown tables) and OUT/fleet-scale.png: idle etcd messages per
host per hour, etcd database size (solid: as it grew; dashed: compacted and defragmented),
leader no-op run, catch-up of the joining hosts, mass reissue convergence, and the daemons'
peak RSS, each against the number of certificates, one line per number of hosts. Without
matplotlib (`pip install matplotlib`) the summary is written and the plot is not (said so,
exit status 1).
Usage: benches/fleet-scale-plot.py OUT_DIR"""
import csv
import os
import sys
import textwrap

out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/results.csv")))
settings = {}
if os.path.exists(f"{out}/bench.txt"):
    for line in open(f"{out}/bench.txt"):
        k, _, v = line.strip().partition("=")
        settings[k] = v


def num(r, k):
    v = r.get(k) or ""
    return float(v) if v not in ("", "-") else None


def secs(v, digits=1):
    return "" if v is None else f"{v:.{digits}f} s"


def mib(v):
    return "" if v is None else f"{v / 2**20:.1f} MiB"


lines = [
    f"fleet at scale ({settings.get('profile', '?')} build {settings.get('agent', '')}, "
    f"[agent] concurrency = {settings.get('concurrency', '?')}, sandbox --instant, "
    f"{settings.get('machine', '')}); idle window {settings.get('idle_window_s', '?')} s "
    f"(resynchronisation every {settings.get('resync_s', '?')} s), scaled to an hour",
    "",
    "| certificates | hosts | first day: time, reloads | catch-up (joiners) | idle etcd messages per host per hour | leader no-op | "
    "mass reissue: leader | every host serving | reloads per host (median/max) | etcd db (in use; compacted) | peak RSS: daemons, leader |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for r in rows:
    reissue = num(r, "reissue_leader_s")
    reloads = (f"{num(r, 'reloads_per_host_median'):g}/{r['reloads_per_host_max']}"
               if reissue is not None else "not reissued")
    lines.append(
        f"| {r['certs']} | {r['hosts']} | {secs(num(r, 'first_day_s'))}, {r['first_day_reloads']} "
        f"| {secs(num(r, 'catchup_s'))} ({r['joiners']}, ≤ {r['joiner_reloads_max']} reloads) "
        f"| {r['idle_per_host_hour']} ({r['idle_msgs']} in the window, {r['noop_run_msgs']} per no-op run) "
        f"| {secs(num(r, 'leader_noop_s'), 2)} | {secs(reissue)} | {secs(num(r, 'convergence_s'))} | {reloads} "
        f"| {mib(num(r, 'etcd_db_bytes'))} ({mib(num(r, 'etcd_db_in_use_bytes'))}; {mib(num(r, 'etcd_db_compacted_bytes'))}) "
        f"| {int(num(r, 'daemon_rss_max_kib') or 0) // 1024} MiB, {int(num(r, 'leader_rss_max_kib') or 0) // 1024} MiB |"
    )
with open(f"{out}/summary.txt", "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))

try:
    import matplotlib
except ImportError:
    print("no plot: python3 has no matplotlib (pip install matplotlib)", file=sys.stderr)
    sys.exit(1)
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

panels = [
    (["idle_per_host_hour"], "idle etcd messages per host per hour", "messages", 1),
    (["etcd_db_bytes", "etcd_db_compacted_bytes"], "etcd database (dashed: compacted)", "MiB", 2**20),
    (["leader_noop_s"], "leader no-op run", "seconds", 1),
    (["catchup_s"], "catch-up of the joining hosts", "seconds", 1),
    (["convergence_s"], "mass reissue: every host serving", "seconds", 1),
    (["daemon_rss_max_kib"], "daemons' peak RSS (largest host)", "MiB", 1024),
]
fig, axes = plt.subplots(2, 3, figsize=(16, 8))
hosts = sorted({int(r["hosts"]) for r in rows})
for ax, (keys, title, unit, scale) in zip(axes.flat, panels):
    for n, h in enumerate(hosts):
        for key, style in zip(keys, ["-", "--"]):
            pts = sorted((int(r["certs"]), num(r, key) / scale) for r in rows
                         if int(r["hosts"]) == h and num(r, key) is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=f"C{n}",
                        label=f"{h} hosts" if style == "-" else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("certificates")
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if ax.lines:
        ax.legend()
fig.suptitle(textwrap.fill(lines[0], 160), fontsize=9)
fig.tight_layout()
fig.savefig(f"{out}/fleet-scale.png", dpi=90)
