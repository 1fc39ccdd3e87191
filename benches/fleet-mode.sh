#!/usr/bin/env bash
# Fleet mode, measured: a three-member etcd cluster on loopback, the sandbox, and N hosts (3,
# then 10), each with its own state directory, configuration and nginx. host1 leads a first
# issuance and a reissue while the others run `cert-agent run`. Reports, per fleet size:
#   - from the leader's install to every host serving the new serial (median and worst), from
#     the hosts' records (a host records its install after its nginx served the serial);
#   - Partner API calls per certificate for the fleet's first issuance, next to the same
#     issuance on one host without [fleet] (the sandbox's call log);
#   - etcd requests per hour when nothing is due (gRPC messages received by the members, from
#     their /metrics): the daemons' resynchronisations over IDLE seconds (default 300, the
#     resync period: each daemon once), times 3600/IDLE, plus one scheduled no-op run per
#     daemon per hour (measured on one host).
# Usage: benches/fleet-mode.sh [OUT_DIR]   (default benches/results/fleet-mode)
#   SIZES="3"      fleet sizes (default "3 10")
#   REISSUES=N     reissues per size (default 1), every host's delay of each counted
#   IDLE=0         skips the idle etcd figures
#   AGENT=PATH     the cert-agent binary to measure (default: the PROFILE build); with
#                  AGENT_B=PATH too, the reissues alternate between the two binaries (same load,
#                  A first) and each gets its own line
#   VERBOSE=1      the daemons log with timestamps (-v) in their host's daemon.log
#   KEEP=1         keeps the work directory (logs, state directories) and names it
#   BUILD=0        builds nothing (with AGENT and SANDBOX=PATH: binaries built elsewhere)
#   PROFILE=debug  measures the debug build (no release build; default release)
# The cluster, the sandbox and the hosts come from benches/fleet-lib.sh (shared with
# benches/fleet-takeover.sh).
# Needs etcd, nginx, openssl, python3, curl (scripts/test-all installs the first two).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-mode}
IDLE=${IDLE:-300}
mkdir -p "$OUT"
source benches/fleet-lib.sh
AGENT_B=${AGENT_B:-}
SIZES=${SIZES:-3 10}
REISSUES=${REISSUES:-1}
DAEMON_V=""; [ "${VERBOSE:-0}" = 1 ] && DAEMON_V="-v"

etcd_messages() {
  local sum=0
  for e in "${EP[@]}"; do
    n=$(curl -sf "$e/metrics" | awk '/^grpc_server_msg_received_total/ {s+=$2} END {printf "%d", s}')
    sum=$((sum + n))
  done
  echo "$sum"
}

# waits until every follower recorded SERIAL; prints the delays (s) after T0, one per host
converge() {
  local serial=$1 t0=$2; shift 2
  local out=()
  for d in "$@"; do
    for _ in $(seq 600); do
      read -r s t < <(record "$d/state/certs/www.json")
      [ "$s" = "$serial" ] && break
      sleep 0.1
    done
    [ "$s" = "$serial" ] || { echo "a host did not converge: $d" >&2; exit 1; }
    out+=("$(python3 -c "print(f'{$t - $t0:.3f}')")")
  done
  echo "${out[@]}"
}

stats() { python3 -c '
import statistics, sys
v = [float(x) for x in sys.argv[1:]]
print(f"median {statistics.median(v):.3f} s, worst {max(v):.3f} s over {len(v)} hosts")' "$@"; }

# --- one host, no fleet: the API calls of a first issuance --------------------------------------
host "$W/single" single single.bench.test "/none/"
sbx -d "{\"http\": $(cat "$W/single/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
sbx -X POST "$SB/_sandbox/calls/clear" >/dev/null
"$AGENT" --config "$W/single/config.toml" renew --wait 60 >/dev/null
sbx "$SB/_sandbox/calls" > "$OUT/calls-single.json"
SINGLE=$(python3 benches/calls.py count "$OUT/calls-single.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
echo "one host, first issuance: $SINGLE Partner API calls" | tee "$OUT/summary.txt"

for N in $SIZES; do
  prefix="/bench-$N/"
  dirs=()
  for i in $(seq 1 "$N"); do
    host "$W/host$N-$i" "host$i" "fleet$N.bench.test" "$prefix" fleet
    dirs+=("$W/host$N-$i")
  done
  sbx -d "{\"http\": $(cat "$W/host$N-2/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
  start_daemons() {
    for i in $(seq 2 "$N"); do
      "$1" $DAEMON_V --config "$W/host$N-$i/config.toml" run --interval 3600 >>"$W/host$N-$i/daemon.log" 2>&1 &
      PIDS+=($!)
      DAEMONS+=($!)
    done
  }
  stop_daemons() {
    for p in "${DAEMONS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    DAEMONS=()
  }
  DAEMONS=()
  start_daemons "$AGENT"
  sleep 1
  sbx -X POST "$SB/_sandbox/calls/clear" >/dev/null
  "$AGENT" --config "$W/host$N-1/config.toml" renew --wait 60 >/dev/null
  sbx "$SB/_sandbox/calls" > "$OUT/calls-fleet-$N.json"
  CALLS=$(python3 benches/calls.py count "$OUT/calls-fleet-$N.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
  read -r serial t0 < <(record "$W/host$N-1/state/certs/www.json")
  first=$(converge "$serial" "$t0" "${dirs[@]:1}")
  second=""; second_b=""; bin=$AGENT
  for r in $(seq 1 "$REISSUES"); do
    for b in $AGENT $AGENT_B; do
      if [ "$b" != "$bin" ]; then stop_daemons; start_daemons "$b"; bin=$b; sleep 2; fi
      "$b" --config "$W/host$N-1/config.toml" reissue www --wait 60 >/dev/null
      read -r serial2 t1 < <(record "$W/host$N-1/state/certs/www.json")
      d=$(converge "$serial2" "$t1" "${dirs[@]:1}")
      if [ "$b" = "$AGENT" ]; then second="$second $d"; else second_b="$second_b $d"; fi
    done
  done
  if [ "$IDLE" = 0 ]; then
    {
      echo "fleet of $N hosts:"
      echo "  leader's install -> host installed and serving, reissue ($AGENT): $(stats $second)"
      [ -z "$AGENT_B" ] || echo "  leader's install -> host installed and serving, reissue ($AGENT_B): $(stats $second_b)"
    } | tee -a "$OUT/summary.txt"
    stop_daemons
    continue
  fi
  sleep 60   # the daemons' first scheduled runs (within a minute of their start) are over
  before=$(etcd_messages); sleep "$IDLE"; after=$(etcd_messages)
  resync=$((after - before))
  before=$(etcd_messages)
  "$AGENT" --config "$W/host$N-2/config.toml" renew >/dev/null
  run=$(( $(etcd_messages) - before ))
  # host1 runs no daemon here; every host of a real fleet does: scaled to N daemons.
  per_hour=$(( resync * N * 3600 / ((N - 1) * IDLE) + run * N ))
  {
    echo "fleet of $N hosts:"
    echo "  first issuance: $CALLS Partner API calls (one host: $SINGLE)"
    echo "  leader's install -> host installed and serving, first issuance: $(stats $first)"
    echo "  leader's install -> host installed and serving, reissue:        $(stats $second)"
    echo "  etcd requests when nothing is due: $resync in $IDLE s from $((N - 1)) daemons' resynchronisation, $run for one no-op run: $per_hour per hour for $N hosts each running the daemon (one run an hour)"
  } | tee -a "$OUT/summary.txt"
  for i in $(seq 2 "$N"); do pkill -f "$W/host$N-$i/config.toml" || true; done
done
