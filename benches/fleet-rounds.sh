#!/usr/bin/env bash
# How long a waiting fleet run holds the lead: one fleet host (a three-member etcd cluster on
# loopback, the sandbox --instant) runs `cert-agent renew --wait WAIT` over N certificates that
# validate by email (nobody approves them: every one stays pending at the CA), for each N of
# COUNTS. The run orders them in its first round, then checks them once per polling interval
# (POLL s), each check a round of its own: the lead taken, the records imported, one status
# check round, the records shared, the lead given up. From the audit log's fleet-lead-taken and
# fleet-lead-given times: the rounds, how long the lead was held in the first round (the
# orders) and in the later ones (median, worst), and the share of the run the lead was free.
# Usage: benches/fleet-rounds.sh [OUT_DIR]   (default benches/results/fleet-rounds)
#   COUNTS="1 10 100" WAIT=30 POLL=5 PROFILE=release|debug, and benches/fleet-lib.sh's AGENT,
#   SANDBOX, BUILD, KEEP
# Needs etcd, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-rounds}
COUNTS=${COUNTS:-1 10 100}
WAIT=${WAIT:-30}
POLL=${POLL:-5}
mkdir -p "$OUT"
source benches/fleet-lib.sh

printf '| pending certificates | rounds | lead held, first round (orders) | lead held, later rounds: median / worst | lead free during the run |\n|---|---|---|---|---|\n' > "$OUT/rounds.md"
for n in $COUNTS; do
  d="$W/n$n"
  agent_config "$d"
  sed -i "s/^poll_interval_secs = .*/poll_interval_secs = $POLL/" "$d/config.toml"
  for i in $(seq "$n"); do
    cat >> "$d/config.toml" <<EOF

[[certificate]]
name = "c$i"
domains = ["c$i.rounds.bench.test"]
product_id = 1101
country = "DE"
region = "Berlin"
city = "Berlin"
dcv = "email"
dcv_email = "admin@c$i.rounds.bench.test"
server = "none"
fullchain_path = "$d/out/c$i/fullchain.pem"
key_path = "$d/out/c$i/privkey.pem"
EOF
  done
  fleet_config "$d" "host1" "/rounds$n/"
  start=$(date +%s.%N)
  code=0
  "$AGENT" --config "$d/config.toml" renew --wait "$WAIT" >"$d/run.out" 2>"$d/run.err" || code=$?
  end=$(date +%s.%N)
  [ "$code" = 75 ] || { echo "n=$n: exit $code, expected 75 (pending)"; cat "$d/run.err"; exit 1; }
  python3 - "$d/state/audit.log" "$n" "$start" "$end" >> "$OUT/rounds.md" <<'EOF'
import json, sys, datetime, statistics
path, n, start, end = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
taken, held = None, []
for line in open(path):
    e = json.loads(line)
    t = datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
    if e["event"] == "fleet-lead-taken":
        taken = t
    elif e["event"] == "fleet-lead-given" and taken is not None:
        held.append(t - taken)
        taken = None
first, later = held[0], held[1:]
med = f"{statistics.median(later):.3f} s / {max(later):.3f} s" if later else "-"
free = 1 - sum(held) / (end - start)
print(f"| {n} | {len(held)} | {first:.3f} s | {med} | {free:.0%} of {end - start:.1f} s |")
EOF
done
cat "$OUT/rounds.md"
