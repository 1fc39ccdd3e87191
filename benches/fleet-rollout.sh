#!/usr/bin/env bash
# A new certificate's way through a fleet, with and without a rollout in waves: a three-member
# etcd cluster on loopback, the sandbox (instant), and N hosts, each with its own state
# directory, configuration and nginx, host1 leading while the others run `cert-agent run`.
# For each size and mode, host1 issues the fleet's certificate and reissues it REISSUES times;
# reported per reissue, from the hosts' own records:
#   - from the leader's install to the last host installed and serving the new serial (a host
#     records its install once its nginx served the serial), median over the reissues;
#   - the same to the last host's proof (`hosts/HOST/proof/www`, read by `fleet status`): every
#     name handshaken and the chain checked.
# Modes:
#   all    no `rollout_*` keys: every host installs as soon as the leader publishes;
#   waves  rollout_canaries = 1, rollout_wave = WAVE (default 0.34: three waves after the
#          canary), rollout_pause_secs = PAUSE (default 0: the figures are the waves' own cost,
#          proofs and synchronisations, not a pause an operator chooses).
# Then the cost of a proof on one host serving 100 names (one certificate of 100 names, product
# 1103, one nginx server block for all of them; two hosts, the follower's daemon proving): the
# follower's install to its proof (100 handshakes, each with SNI, and the chain checks), and
# the daemon's CPU for that synchronisation (install and proof together), over REISSUES.
# Usage: benches/fleet-rollout.sh [OUT_DIR]   (default benches/results/fleet-rollout)
#   SIZES="3 10"   fleet sizes (default "3 10 50"; 0: none); MODES="all waves"; REISSUES=3;
#   PROOF100=0     skips the proof at 100 names
#   KEEP=1, BUILD=0, AGENT=PATH, PROFILE=debug: see benches/fleet-lib.sh
# Needs etcd, nginx, openssl, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-rollout}
mkdir -p "$OUT"
source benches/fleet-lib.sh
SIZES=${SIZES:-3 10 50}
MODES=${MODES:-all waves}
REISSUES=${REISSUES:-3}
WAVE=${WAVE:-0.34}
PAUSE=${PAUSE:-0}
: > "$OUT/summary.txt"

# last_install SERIAL T0 DIR...: waits until every DIR recorded SERIAL; prints the latest
# install after T0 (s).
last_install() {
  local serial=$1 t0=$2; shift 2
  local worst=0 s t
  for d in "$@"; do
    for _ in $(seq 1200); do
      read -r s t < <(record "$d/state/certs/www.json")
      [ "$s" = "$serial" ] && break
      sleep 0.1
    done
    [ "$s" = "$serial" ] || { echo "a host did not install $serial: $d" >&2; exit 1; }
    worst=$(python3 -c "print(max($worst, $t - $t0))")
  done
  printf '%.3f' "$worst"
}

# last_proof SERIAL T0 CONFIG N: waits until `fleet status` shows N hosts' proofs of SERIAL
# that passed; prints the latest proof after T0 (s).
last_proof() {
  local serial=$1 t0=$2 config=$3 n=$4
  for _ in $(seq 600); do
    r=$("$AGENT" --config "$config" --json fleet status 2>/dev/null | python3 -c '
import datetime, json, sys
serial, t0, n = sys.argv[1].upper(), float(sys.argv[2]), int(sys.argv[3])
v = json.load(sys.stdin)
c = v["certificates"][0]
times = []
for h in c.get("hosts", []):
    p = h.get("proof") or {}
    if (p.get("serial") or "").replace(":", "").upper().lstrip("0") == serial.replace(":", "").lstrip("0") and not h.get("proof_failure"):
        times.append(datetime.datetime.fromisoformat(p["at"].replace("Z", "+00:00")).timestamp())
print(f"{max(times) - t0:.3f}" if len(times) >= n else "")' "$serial" "$t0" "$n" || true)
    [ -n "$r" ] && { echo "$r"; return; }
    sleep 0.2
  done
  echo "not every host proved $serial" >&2; exit 1
}

median() { python3 -c 'import statistics,sys; print(f"{statistics.median(float(x) for x in sys.argv[1:]):.3f}")' "$@"; }

for N in $SIZES; do
  [ "$N" = 0 ] && continue
  for MODE in $MODES; do
    prefix="/rollout-$N-$MODE/"
    dirs=()
    for i in $(seq 1 "$N"); do
      d=$W/$MODE$N-$i
      host "$d" "host$(printf '%02d' "$i")" "rollout$N$MODE.bench.test" "$prefix" fleet
      if [ "$MODE" = waves ]; then
        printf 'rollout_canaries = 1\nrollout_wave = %s\nrollout_pause_secs = %s\n' "$WAVE" "$PAUSE" >> "$d/config.toml"
      fi
      dirs+=("$d")
    done
    sbx -d "{\"http\": $(cat "${dirs[0]}/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
    DAEMONS=()
    for d in "${dirs[@]:1}"; do
      "$AGENT" --config "$d/config.toml" run --interval 3600 >>"$d/daemon.log" 2>&1 &
      PIDS+=($!); DAEMONS+=($!)
    done
    sleep 2
    "$AGENT" --config "${dirs[0]}/config.toml" renew --wait 60 >/dev/null
    read -r serial t0 < <(record "${dirs[0]}/state/certs/www.json")
    last_install "$serial" "$t0" "${dirs[@]:1}" >/dev/null
    installs=(); proofs=()
    for r in $(seq 1 "$REISSUES"); do
      "$AGENT" --config "${dirs[0]}/config.toml" reissue www --wait 60 >/dev/null
      read -r serial t0 < <(record "${dirs[0]}/state/certs/www.json")
      installs+=("$(last_install "$serial" "$t0" "${dirs[@]:1}")")
      proofs+=("$(last_proof "$serial" "$t0" "${dirs[0]}/config.toml" "$N")")
    done
    line="$N hosts, $MODE: leader's install -> last host serving: median $(median "${installs[@]}") s (${installs[*]}); -> last proof: median $(median "${proofs[@]}") s (${proofs[*]})"
    echo "$line" | tee -a "$OUT/summary.txt"
    for p in "${DAEMONS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    for d in "${dirs[@]}"; do kill "$(cat "$d/nginx/nginx.pid")" 2>/dev/null || true; done
  done
done

# --- the cost of a proof at 100 names -----------------------------------------------------------
if [ "${PROOF100:-1}" = 1 ]; then
  prefix="/rollout-proof100/"
  names=(); for i in $(seq 1 100); do names+=("n$i.proof100.bench.test"); done
  list=$(printf '"%s", ' "${names[@]}"); list=${list%, }
  dirs=()
  for i in 1 2; do
    d=$W/proof100-$i
    host "$d" "proof$i" "${names[0]}" "$prefix" fleet
    sed -i "s/^domains = .*/domains = [$list]/; s/^product_id = 1101/product_id = 1103/" "$d/config.toml"
    sed -i "s/server_name ${names[0]};/server_name ${names[*]};/g" "$d/nginx/nginx.conf"
    nginx -p "$d/nginx/" -c "$d/nginx/nginx.conf" -e "$d/nginx/logs/error.log" -s reload
    dirs+=("$d")
  done
  sbx -d "{\"http\": $(cat "${dirs[0]}/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
  "$AGENT" --config "${dirs[1]}/config.toml" run --interval 3600 >>"${dirs[1]}/daemon.log" 2>&1 &
  DPID=$!; PIDS+=($DPID)
  sleep 2
  "$AGENT" --config "${dirs[0]}/config.toml" renew --wait 120 >/dev/null
  read -r serial t0 < <(record "${dirs[0]}/state/certs/www.json")
  last_install "$serial" "$t0" "${dirs[1]}" >/dev/null
  last_proof "$serial" "$t0" "${dirs[0]}/config.toml" 2 >/dev/null
  tick=$(getconf CLK_TCK)
  cpu() { awk -v t="$tick" '{printf "%.3f", ($14 + $15) / t}' "/proc/$DPID/stat"; }
  # When the follower's sealed proof changes in etcd (polled every 20 ms), as a Unix time.
  proof_key="${prefix}hosts/proof2/proof/www"
  proof_now() { etcdctl --endpoints "${EP[0]}" get --print-value-only "$proof_key" | sha256sum; }
  walls=(); cpus=()
  for r in $(seq 1 "$REISSUES"); do
    c0=$(cpu); before=$(proof_now)
    "$AGENT" --config "${dirs[0]}/config.toml" reissue www --wait 120 >/dev/null &
    rp=$!
    for _ in $(seq 6000); do [ "$(proof_now)" != "$before" ] && break; sleep 0.02; done
    published=$(date +%s.%N)
    wait "$rp"
    read -r serial t0 < <(record "${dirs[0]}/state/certs/www.json")
    installed=$(last_install "$serial" "$t0" "${dirs[1]}")
    sleep 1
    walls+=("$(python3 -c "print(f'{$published - ($t0 + $installed):.3f}')")")
    cpus+=("$(python3 -c "print(f'{$(cpu) - $c0:.3f}')")")
  done
  line="proof of 100 names on one host: the follower's install (nginx serving the serial) -> its proof in etcd: median $(median "${walls[@]}") s (${walls[*]}); the daemon's CPU for the synchronisation (install and proof): median $(median "${cpus[@]}") s (${cpus[*]})"
  echo "$line" | tee -a "$OUT/summary.txt"
  kill "$DPID" 2>/dev/null || true
fi
