#!/usr/bin/env bash
# The fleet at scale, measured: a three-member etcd cluster on loopback, the sandbox
# (--instant), and for each size C of SIZES a fleet (its own prefix) of C certificates whose
# hosts join in steps of HOSTS. host1..host3 have their own nginx (host1 serves the validation
# files the sandbox fetches and leads: its runs are the measured `cert-agent renew`s, it runs
# no daemon); every other host has `server = "none"` (files and a reload command only). Every
# host's reload command is a wrapper that counts the reloads (then reloads nginx, on the nginx
# hosts). The other hosts run `cert-agent run --interval 3600` (the daemon: follows the fleet's
# changes; no scheduled run during the bench after its first).
# For each C:
#   - first day: host1's `renew --wait` orders all C certificates (the fleet's first day);
# then for each H of HOSTS:
#   - catch-up: the hosts up to H join at once with empty state directories (daemons started):
#     the time until the last of them has installed every certificate, and their reloads;
#   - leader no-op: host1's `renew` with nothing due (median of 3 runs that led);
#   - mass reissue: host1's `renew --force` reissues all C certificates; the leader's run time,
#     the time until every host has installed every new certificate (convergence), and the
#     reloads each host made meanwhile;
#   - the etcd database size (the largest member's).
# Results: OUT/results.csv, OUT/summary.txt, OUT/fleet-scale.png (matplotlib, else gnuplot,
# else no plot) and the hosts' logs of failed steps.
# Usage: benches/fleet-scale.sh [OUT_DIR]   (default benches/results/fleet-scale-DATE)
#   SIZES="100 1000" HOSTS="3 10" CONCURRENCY=16 ([agent] concurrency) TIMEOUT=1800 (seconds
#   any one step may take) LEASE (lease_ttl_secs; default: the agent's 15) PROFILE=release|debug
#   AGENT_BIN=PATH (another cert-agent build, to compare)
# Needs etcd, etcdctl, nginx, openssl, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-scale-$(date -u +%F)}
SIZES=${SIZES:-100 1000}
HOSTS=${HOSTS:-3 10}
CONCURRENCY=${CONCURRENCY:-16}
TIMEOUT=${TIMEOUT:-1800}
LEASE=${LEASE:-}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
source benches/fleet-lib.sh

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{$(now) - $1:.3f}')"; }
# Plenty of credit for every order of the bench.
sbx -d '{"login": "partner@sandbox.test", "sum": "100000000.00"}' "$SB/_sandbox/accounts/payments" >/dev/null

# The reload wrapper: one line per reload in DIR/reloads, then the web server's own reload.
cat > "$W/reload" <<'EOF'
#!/bin/sh
d=$1; shift
date +%s.%N >> "$d/reloads"
[ $# -eq 0 ] || exec "$@"
EOF
chmod 755 "$W/reload"

# scale_host DIR NAME PREFIX C KIND: a host of C certificates c0..c(C-1) (c0 in
# out/fullchain.pem, nginx's; the others in out/cI.pem), KIND nginx or none.
scale_host() {
  local d=$1 name=$2 prefix=$3 c=$4 kind=$5 domain_of=$6
  if [ "$kind" = nginx ]; then nginx_for "$d" "c0.$domain_of"; else mkdir -p "$d/www" "$d/out"; fi
  agent_config "$d"
  echo "concurrency = $CONCURRENCY" >> "$d/config.toml"
  fleet_config "$d" "$name" "$prefix" "$LEASE"
  local argv="" verify=""
  if [ "$kind" = nginx ]; then argv=", $(nginx_argv "$d")"; verify="127.0.0.1:$(cat "$d/https_port")"; fi
  python3 - "$d" "$c" "$kind" "$domain_of" "$W/reload" "$argv" "$verify" >> "$d/config.toml" <<'EOF'
import sys
d, c, kind, dom, wrap, argv, verify = sys.argv[1:]
out = []
reload_args = ', "-s", "reload"' if argv else ""
for i in range(int(c)):
    pem, key = (f"{d}/out/fullchain.pem", f"{d}/out/privkey.pem") if i == 0 else (f"{d}/out/c{i}.pem", f"{d}/out/c{i}.key")
    lines = [
        "", "[[certificate]]", f'name = "c{i}"', f'domains = ["c{i}.{dom}"]', "product_id = 1101",
        'country = "DE"', 'region = "Berlin"', 'city = "Berlin"', f'webroot = "{d}/www"',
        f'server = "{kind}"', f'fullchain_path = "{pem}"', f'key_path = "{key}"',
        f'reload_command = ["{wrap}", "{d}"{argv}{reload_args}]',
    ]
    if kind == "nginx":
        lines.append(f'configtest_command = [{argv[2:]}, "-t"]')
        lines.append(f'verify_address = "{verify if i == 0 else ""}"')
    out.extend(lines)
print("\n".join(out))
EOF
}

# complete REF C DIR...: how many of DIR hold every certificate REF holds (same content).
complete() {
  python3 - "$@" <<'EOF'
import hashlib, os, sys
ref, c, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def name(i): return "fullchain.pem" if i == 0 else f"c{i}.pem"
def digest(d, i):
    try:
        return hashlib.sha256(open(os.path.join(d, "out", name(i)), "rb").read()).digest()
    except OSError:
        return None
want = [digest(ref, i) for i in range(c)]
print(sum(1 for d in dirs if all(digest(d, i) == w for i, w in enumerate(want))))
EOF
}
# wait_complete REF C DIR...: waits until every DIR is complete; fails after TIMEOUT.
wait_complete() {
  local ref=$1 c=$2; shift 2
  local n=$# deadline; deadline=$(( $(date +%s) + TIMEOUT ))
  while [ "$(complete "$ref" "$c" "$@")" -lt "$n" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "not every host installed all $c certificates in $TIMEOUT s (logs: $OUT/daemon-*.log)" >&2
      for d in "$@"; do [ -f "$d/daemon.log" ] && cp "$d/daemon.log" "$OUT/daemon-$(basename "$d").log"; done
      return 1
    fi
    sleep 0.2
  done
}
reloads() { [ -f "$1/reloads" ] && wc -l < "$1/reloads" || echo 0; }
leads() { grep -c '"fleet-lead-taken"' "$1/state/audit.log" 2>/dev/null || echo 0; }
# led_run DIR ARGS...: a `renew` on DIR that took the lead (tried again for about five
# minutes while a daemon's run leads: the joiners' first runs lead one after the other, each
# a no-op over every certificate); prints its seconds.
led_run() {
  local d=$1; shift
  for _ in $(seq 150); do
    local before t; before=$(leads "$d"); t=$(now)
    "$AGENT" --config "$d/config.toml" renew "$@" > "$d/renew.log" 2>&1 \
      || { echo "renew $* on $d failed (log: $OUT/renew-failed.log):" >&2
           cp "$d/renew.log" "$OUT/renew-failed.log"; tail -n 20 "$d/renew.log" >&2; return 1; }
    local took; took=$(since "$t")
    [ "$(leads "$d")" -gt "$before" ] && { echo "$took"; return 0; }
    sleep 2
  done
  echo "renew $* on $d never led" >&2; return 1
}
db_size() {
  etcdctl --endpoints "$(IFS=,; echo "${EP[*]}")" endpoint status -w json \
    | python3 -c 'import json,sys; print(max(m["Status"]["dbSize"] for m in json.load(sys.stdin)))'
}

echo "certs,hosts,first_day_s,joiners,catchup_s,joiner_reloads_max,leader_noop_s,reissue_leader_s,convergence_s,reloads_per_host_median,reloads_per_host_max,etcd_db_bytes" > "$OUT/results.csv"
for C in $SIZES; do
  PREFIX=/scale-$C/
  DOM=s$C.bench.test
  B=$W/c$C
  mkdir -p "$B"
  scale_host "$B/host1" host1 "$PREFIX" "$C" nginx "$DOM"
  sbx -d "{\"http\": $(cat "$B/host1/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
  t=$(now)
  "$AGENT" --config "$B/host1/config.toml" renew --wait 900 > "$B/host1/first-day.log" 2>&1 \
    || { echo "the first day of $C certificates failed (log: $OUT/first-day-$C.log):" >&2
         cp "$B/host1/first-day.log" "$OUT/first-day-$C.log"; tail -n 20 "$B/host1/first-day.log" >&2; exit 1; }
  first_day=$(since "$t")
  echo "C=$C: first day (host1 orders every certificate): ${first_day} s"
  running=1
  DAEMONS=()
  for H in $HOSTS; do
    [ "$H" -gt "$running" ] || continue
    joiners=()
    for i in $(seq $((running + 1)) "$H"); do
      kind=none; [ "$i" -le 3 ] && kind=nginx
      scale_host "$B/host$i" "host$i" "$PREFIX" "$C" "$kind" "$DOM"
      joiners+=("$B/host$i")
    done
    t=$(now)
    for d in "${joiners[@]}"; do
      "$AGENT" --config "$d/config.toml" run --interval 3600 > "$d/daemon.log" 2>&1 &
      PIDS+=($!); DAEMONS+=($!)
    done
    wait_complete "$B/host1" "$C" "${joiners[@]}"
    catchup=$(since "$t")
    jr=$(for d in "${joiners[@]}"; do reloads "$d"; done | sort -n | tail -n 1)
    running=$H
    echo "C=$C H=$H: ${#joiners[@]} hosts joined, caught up in ${catchup} s (at most $jr reloads each)"
    sleep 65   # the joiners' first runs (within a minute of their start) are over
    noop=$(for _ in 1 2 3; do led_run "$B/host1"; done | sort -n | sed -n 2p)
    echo "C=$C H=$H: leader no-op run ${noop} s (median of 3)"
    declare -A before=()
    all=("$B"/host*)
    for d in "${all[@]}"; do before[$d]=$(reloads "$d"); done
    t=$(now)
    reissue=$(led_run "$B/host1" --force --wait 900)
    wait_complete "$B/host1" "$C" "${all[@]}"
    converged=$(since "$t")
    per_host=$(for d in "${all[@]}"; do echo $(( $(reloads "$d") - ${before[$d]} )); done | sort -n)
    med=$(echo "$per_host" | python3 -c 'import statistics,sys; print(statistics.median(int(x) for x in sys.stdin))')
    max=$(echo "$per_host" | tail -n 1)
    db=$(db_size)
    echo "C=$C H=$H: mass reissue: leader ${reissue} s, every host serving in ${converged} s, reloads per host median $med, max $max; etcd ${db} bytes"
    echo "$C,$H,$first_day,${#joiners[@]},$catchup,$jr,$noop,$reissue,$converged,$med,$max,$db" >> "$OUT/results.csv"
  done
  # This fleet's daemons stop before the next size starts.
  for d in "$B"/host*; do
    [ -f "$d/nginx/nginx.pid" ] && kill "$(cat "$d/nginx/nginx.pid")" 2>/dev/null || true
  done
  for p in "${DAEMONS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
done

python3 - "$OUT" "$PROFILE" "$CONCURRENCY" <<'EOF' | tee "$OUT/summary.txt"
import csv, sys
out, profile, conc = sys.argv[1], sys.argv[2], sys.argv[3]
rows = list(csv.DictReader(open(f"{out}/results.csv")))
print(f"fleet at scale ({profile} build, [agent] concurrency = {conc}, sandbox --instant)")
print("| certificates | hosts | first day | catch-up (joiners) | leader no-op | mass reissue: leader | every host serving | reloads per host (median/max) | etcd db |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['certs']} | {r['hosts']} | {float(r['first_day_s']):.1f} s | {float(r['catchup_s']):.1f} s ({r['joiners']}, ≤ {r['joiner_reloads_max']} reloads) "
          f"| {float(r['leader_noop_s']):.2f} s | {float(r['reissue_leader_s']):.1f} s | {float(r['convergence_s']):.1f} s "
          f"| {r['reloads_per_host_median']}/{r['reloads_per_host_max']} | {int(r['etcd_db_bytes']) / 2**20:.1f} MiB |")
EOF

# The plot: matplotlib when python3 has it, else gnuplot, else none (said so).
python3 benches/fleet-scale-plot.py "$OUT" 2>/dev/null || {
  if command -v gnuplot >/dev/null; then
    awk -F, 'NR > 1 { print $1, $2, $7, $5, $9 }' "$OUT/results.csv" > "$W/plot.dat"
    gnuplot <<EOF
set terminal pngcairo size 1300,400
set output "$OUT/fleet-scale.png"
set datafile separator " "
set logscale xy; set xlabel "certificates"; set ylabel "seconds"; set key left top
set multiplot layout 1,3
set title "leader no-op run"; plot "$W/plot.dat" using 1:3 with linespoints title "runs"
set title "catch-up"; plot "$W/plot.dat" using 1:4 with linespoints title "joiners"
set title "mass reissue: every host serving"; plot "$W/plot.dat" using 1:5 with linespoints title "hosts"
unset multiplot
EOF
  else
    echo "no plot: neither python3's matplotlib (pip install matplotlib) nor gnuplot is installed" | tee -a "$OUT/summary.txt"
  fi
}
