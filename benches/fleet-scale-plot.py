#!/usr/bin/env python3
"""The curves of benches/fleet-scale.sh: OUT/results.csv plotted to OUT/fleet-scale.png
(leader no-op run, catch-up, mass reissue convergence and reloads per host against the
number of certificates, one line per number of hosts). Needs matplotlib; exits 1 without it.
Usage: benches/fleet-scale-plot.py OUT_DIR"""
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/results.csv")))
fig, axes = plt.subplots(1, 4, figsize=(17, 4))
for ax, key, title, unit in zip(
        axes, ["leader_noop_s", "catchup_s", "convergence_s", "reloads_per_host_max"],
        ["leader no-op run", "catch-up of the joining hosts", "mass reissue: every host serving",
         "mass reissue: reloads per host (max)"], ["seconds"] * 3 + ["reloads"]):
    for h in sorted({int(r["hosts"]) for r in rows}):
        pts = sorted((int(r["certs"]), float(r[key])) for r in rows if int(r["hosts"]) == h)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{h} hosts")
    ax.set_xscale("log"); ax.set_yscale("log"); ax.set_xlabel("certificates"); ax.set_ylabel(unit)
    ax.set_title(title); ax.grid(True, which="both", alpha=0.3); ax.legend()
fig.tight_layout()
fig.savefig(f"{out}/fleet-scale.png", dpi=100)
