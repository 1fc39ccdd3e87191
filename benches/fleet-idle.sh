#!/usr/bin/env bash
# etcd requests of an idle fleet, by number of certificates: a three-member etcd cluster on
# loopback, the sandbox, and HOSTS hosts (default 3) each running `cert-agent run --interval
# 3600` with CERTS certificates (`server = "none"`, files in the host's directory; the
# validator fetches from host2's web root, served by a small HTTP server). host1 issues every
# certificate for the fleet; once every host has installed them all and the daemons' first
# scheduled runs are over, the members' /metrics count the gRPC messages received (every
# request, and every message on a stream: a watch's progress requests, a lease's renewals)
# over IDLE seconds (default 300, the daemon's resynchronisation period: each daemon at
# least once), and for one scheduled no-op run on host2. Then the etcd database size
# (the largest member's, from the members' metrics) with and without the history, by compaction and
# defragmentation.
# Usage: benches/fleet-idle.sh [OUT_DIR]   (default benches/results/fleet-idle)
#   SIZES="1 100 1000"   numbers of certificates (one fleet each)
#   HOSTS=3              hosts per fleet
#   IDLE=300             seconds measured per fleet
#   SETTLE=300           seconds waited after the daemons' first runs before measuring
#   AGENT=PATH           the cert-agent binary to measure (default: PROFILE's build)
#   PROFILE=debug        uses the debug binaries (no release build)
# Needs etcd, etcdctl, openssl, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-idle}
SIZES=${SIZES:-1 100 1000}
HOSTS=${HOSTS:-3}
IDLE=${IDLE:-300}
# Seconds more before measuring, after the first runs: one resynchronisation period.
SETTLE=${SETTLE:-300}
mkdir -p "$OUT"
source benches/fleet-lib.sh
AGENT=${AGENT_UNDER_TEST:-$AGENT}

SB_HTTP=$(port)
mkdir -p "$W/dcv-root"

# fleet_host DIR NAME PREFIX N: a configuration with N certificates, `server = "none"`.
fleet_host() {
  local d=$1 name=$2 prefix=$3 n=$4 i
  mkdir -p "$d/www" "$d/out" "$d/state"
  {
    cat <<EOF
[api]
base_url = "$SB"
login = "partner@sandbox.test"
password_file = "$W/password"
ca_file = "$SB_CA"

[agent]
state_dir = "$d/state"
allow_orders = true
poll_interval_secs = 2

# The bench's names are in no DNS: the sandbox reaches the hosts by port.
[preflight]
http = false

[defaults]
product_id = 1101
country = "DE"
region = "Berlin"
city = "Berlin"
webroot = "$d/www"
server = "none"
EOF
    for i in $(seq 1 "$n"); do
      cat <<EOF

[[certificate]]
name = "site$i"
domains = ["site$i.idle$n.bench.test"]
cert_path = "$d/out/site$i.crt"
chain_path = "$d/out/site$i.chain"
fullchain_path = "$d/out/site$i.pem"
key_path = "$d/out/site$i.key"
EOF
    done
    cat <<EOF

[fleet]
endpoints = [$ENDPOINTS]
insecure_plaintext = true
host = "$name"
prefix = "$prefix"
secret_file = "$W/fleet.key"
EOF
  } > "$d/config.toml"
}

installed_count() {
  python3 - "$1" <<'EOF'
import glob, json, sys
n = 0
for p in glob.glob(sys.argv[1] + "/state/certs/*.json"):
    try:
        n += bool(json.load(open(p)).get("installed"))
    except Exception:
        pass
print(n)
EOF
}

echo "binary: $AGENT; $HOSTS hosts; $IDLE s idle per fleet" | tee "$OUT/summary.txt"
for N in $SIZES; do
  prefix="/idle-$N/"
  dirs=()
  for i in $(seq 1 "$HOSTS"); do
    fleet_host "$W/f$N-$i" "host$i" "$prefix" "$N"
    dirs+=("$W/f$N-$i")
  done
  # The validator fetches from host2's web root.
  python3 -m http.server --bind 127.0.0.1 --directory "$W/f$N-2/www" "$SB_HTTP" >/dev/null 2>&1 &
  WEB=$!
  PIDS+=($WEB)
  sbx -d "{\"http\": $SB_HTTP, \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
  DAEMONS=()
  for i in $(seq 2 "$HOSTS"); do
    "$AGENT" --config "$W/f$N-$i/config.toml" run --interval 3600 >>"$W/f$N-$i/daemon.log" 2>&1 &
    PIDS+=($!); DAEMONS+=($!)
  done
  sleep 1
  # host1 issues for the fleet (again while a daemon's scheduled run held the lead).
  for _ in $(seq 20); do
    "$AGENT" --config "$W/f$N-1/config.toml" renew --wait 300 >/dev/null 2>&1 || true
    [ "$(installed_count "$W/f$N-1")" -ge "$N" ] && break
    sleep 2
  done
  echo "$N certificates issued by host1; waiting for every host to install them" >&2
  for d in "${dirs[@]}"; do
    for _ in $(seq 600); do [ "$(installed_count "$d")" -ge "$N" ] && break; sleep 1; done
    echo "$d: $(installed_count "$d") installed" >&2
    [ "$(installed_count "$d")" -ge "$N" ] || { echo "$d did not install all $N certificates" >&2; exit 1; }
  done
  echo "every host installed them; measuring after the first runs" >&2
  # host1 runs a daemon too from now on (every host of a real fleet does).
  "$AGENT" --config "$W/f$N-1/config.toml" run --interval 3600 >>"$W/f$N-1/daemon.log" 2>&1 &
  PIDS+=($!); DAEMONS+=($!)
  # Past every daemon's first scheduled run (within a minute of its start) and the
  # resynchronisations that read what those runs wrote (up to one period later).
  sleep $(( 75 + SETTLE ))
  etcd_messages > "$W/m0"; sleep "$IDLE"; etcd_messages > "$W/m1"
  idle=$(( $(msg_total "$W/m1") - $(msg_total "$W/m0") ))
  idle_methods=$(msg_by_method "$W/m0" "$W/m1")
  etcd_messages > "$W/m2"
  kill "${DAEMONS[1]}" 2>/dev/null || true; wait "${DAEMONS[1]}" 2>/dev/null || true
  etcd_messages > "$W/m3"
  "$AGENT" --config "$W/f$N-2/config.toml" renew >/dev/null 2>&1 || true
  etcd_messages > "$W/m4"
  run=$(( $(msg_total "$W/m4") - $(msg_total "$W/m3") ))
  run_methods=$(msg_by_method "$W/m3" "$W/m4")
  per_host_hour=$(python3 -c "print(round($idle * 3600 / ($IDLE * $HOSTS) + $run, 1))")
  read -r db use < <(etcd_db)
  {
    echo "fleet of $HOSTS hosts, $N certificates:"
    echo "  idle: $idle messages in $IDLE s from $HOSTS daemons ($idle_methods)"
    echo "  one no-op scheduled run: $run messages ($run_methods)"
    echo "  per host and hour (daemon + one run): $per_host_hour"
    echo "  etcd database: $db bytes, $use in use"
  } | tee -a "$OUT/summary.txt"
  for p in "${DAEMONS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  kill "$WEB" 2>/dev/null || true; wait "$WEB" 2>/dev/null || true
done

# Storage: the history (every superseded value) compacted away, then the file defragmented.
if command -v etcdctl >/dev/null; then
  read -r db use < <(etcd_db)
  rev=$(etcd_compact_defrag)
  read -r db2 use2 < <(etcd_db)
  keys=$(ETCDCTL_API=3 etcdctl --endpoints "${EP[0]}" get / --prefix --keys-only | grep -c . || true)
  bytes=$(ETCDCTL_API=3 etcdctl --endpoints "${EP[0]}" get / --prefix -w json |
    python3 -c 'import json,sys,base64; d=json.load(sys.stdin); print(sum(len(base64.b64decode(k["key"]))+len(base64.b64decode(k.get("value",""))) for k in d.get("kvs",[])))')
  {
    echo "every fleet above in one etcd: $keys keys, $bytes bytes of keys and values"
    echo "  before compaction: $db bytes ($use in use); compacted at $rev and defragmented: $db2 bytes ($use2 in use)"
  } | tee -a "$OUT/summary.txt"
fi
