#!/usr/bin/env bash
# What a follower's synchronisation reads for the rollout gates, as the hosts' results grow: a
# three-member etcd cluster on loopback, the sandbox (--instant), host1 and host2 with one
# certificate each on their own nginx and `rollout_canaries = 1`; host1 issues it and host2
# installs it. Then PADHOSTS more hosts' results of R certificates each (values of 1,400 bytes,
# the size of a sealed result, under `hosts/padNN/certs/`) are written into etcd, as a fleet of
# R certificates holds them. Measured, for each build of COMPARE in turn (AGENT's when unset):
# RUNS runs of host2's `cert-agent renew` (nothing due: it synchronises, reads the gates, and
# does not lead), each one's wall time, and the bytes and messages etcd sent and received
# meanwhile; the medians in OUT/summary.txt.
# Usage: benches/fleet-gates.sh [OUT_DIR]   (default benches/results/fleet-gates)
#   R=10000 PADHOSTS=3 RUNS=5 COMPARE="LABEL=PATH ..." and fleet-lib.sh's PROFILE, AGENT,
#   BUILD, KEEP.
# Needs etcd, etcdctl, nginx, openssl, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-gates}
R=${R:-10000}
PADHOSTS=${PADHOSTS:-3}
RUNS=${RUNS:-5}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
source benches/fleet-lib.sh
COMPARE=${COMPARE:-current=$AGENT}
: > "$OUT/summary.txt"

now() { date +%s.%N; }
median() { python3 -c 'import statistics,sys; print(f"{statistics.median(float(x) for x in sys.argv[1:]):.3f}")' "$@"; }

prefix=/gates/
for i in 1 2; do
  host "$W/h$i" "host$i" gates.bench.test "$prefix" fleet
  printf 'rollout_canaries = 1\n' >> "$W/h$i/config.toml"
done
sbx -d "{\"http\": $(cat "$W/h1/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
"$AGENT" --config "$W/h1/config.toml" renew --wait 60 > "$W/h1/first.log" 2>&1
"$AGENT" --config "$W/h2/config.toml" renew > "$W/h2/first.log" 2>&1
read -r s1 _ < <(record "$W/h1/state/certs/www.json")
read -r s2 _ < <(record "$W/h2/state/certs/www.json")
[ "$s1" = "$s2" ] || { echo "host2 did not install host1's certificate ($s2, not $s1)" >&2; exit 1; }

# The padding: PADHOSTS hosts' results, 100 puts per transaction.
t=$(now)
python3 - "$prefix" "$R" "$PADHOSTS" "${EP[0]}" <<'EOF'
import os, subprocess, sys
prefix, r, hosts, endpoint = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
value = "r" * 1400
ops = [f'put {prefix}hosts/pad{h:02}/certs/c{i:06} "{value}"' for h in range(hosts) for i in range(r)]
env = dict(os.environ, ETCDCTL_API="3")
for k in range(0, len(ops), 100):
    # No comparison, the puts, no failure operations: each list ends with an empty line.
    txn = "\n" + "\n".join(ops[k:k + 100]) + "\n\n\n"
    subprocess.run(["etcdctl", "--endpoints", endpoint, "txn"], input=txn, text=True,
                   check=True, stdout=subprocess.DEVNULL, env=env)
EOF
keys=$(ETCDCTL_API=3 etcdctl --endpoints "${EP[0]}" get --prefix "$prefix" --keys-only | grep -c . || true)
echo "padding: $((R * PADHOSTS)) results in $(python3 -c "print(f'{$(now) - $t:.1f}')") s; $keys keys under $prefix" | tee -a "$OUT/summary.txt"

for pair in $COMPARE; do
  label=${pair%%=*} bin=${pair#*=}
  walls=(); bytes=(); msgs=()
  for _ in $(seq "$RUNS"); do
    b0=$(etcd_sent_bytes); etcd_messages > "$W/m0"; t=$(now)
    "$bin" --config "$W/h2/config.toml" renew > "$W/h2/run-$label.log" 2>&1 \
      || { echo "$label: renew failed" >&2; tail -n 20 "$W/h2/run-$label.log" >&2; exit 1; }
    walls+=("$(python3 -c "print(f'{$(now) - $t:.3f}')")")
    b1=$(etcd_sent_bytes); etcd_messages > "$W/m1"
    bytes+=("$((b1 - b0))"); msgs+=("$(( $(msg_total "$W/m1") - $(msg_total "$W/m0") ))")
    grep -q "took the lead\|fleet-lead-taken" "$W/h2/run-$label.log" && echo "$label: a run led" >&2
  done
  echo "$label: host2 renew (no-op, rollout gates read): wall median $(median "${walls[@]}") s (${walls[*]}); etcd sent median $(median "${bytes[@]}" | cut -d. -f1) bytes (${bytes[*]}); messages received ${msgs[*]}" | tee -a "$OUT/summary.txt"
done
