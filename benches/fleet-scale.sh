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
#   - first day: host1's `renew --wait` orders all C certificates (the fleet's first day, itself
#     a mass event of C certificates): its time, host1's reloads and its peak RSS;
# then for each H of HOSTS:
#   - catch-up: the hosts up to H join at once with empty state directories (daemons started):
#     the time until the last of them has installed every certificate, and their reloads;
#   - idle etcd requests: once every daemon's first scheduled run is over (its metrics file
#     says so), the gRPC messages the etcd members receive (their /metrics: every request, and
#     every message on a stream) over IDLE seconds with every daemon running and nothing to do,
#     per daemon scaled to an hour, plus the messages of one no-op run (each host runs one an
#     hour): "per host per hour";
#   - leader no-op: host1's `renew` with nothing due: five runs that led, each logged; the
#     figure is the settled run's, the median of the last three (the first two find what the
#     joining hosts' first runs and the first of them wrote), and the etcd messages of the last;
#   - mass reissue (only at the host counts of REISSUE_AT): host1's `renew --force` reissues all
#     C certificates; the leader's run time, the time until every host has installed every new
#     certificate (convergence), and the reloads each host made meanwhile;
#   - the etcd database size (the largest member's) and its size in use, then again after a
#     compaction at the current revision and a defragmentation; the keys by kind, their
#     counts and bytes (OUT/census-C-H.txt);
#   - the daemons' peak RSS (VmHWM, the largest over the hosts) and the leader's (host1's runs).
# Each fleet's keys are deleted once its sizes are measured (the next compaction frees them).
# Results: OUT/results.csv (a row per C and H, written as soon as measured), OUT/summary.txt
# and OUT/fleet-scale.png (benches/fleet-scale-plot.py: matplotlib), the hosts' logs of failed
# steps. `benches/fleet-scale-plot.py OUT` makes the summary and plot again from the csv (e.g.
# of a run that stopped).
# Usage: benches/fleet-scale.sh [OUT_DIR]   (default benches/results/fleet-scale-DATE)
#   SIZES="100 1000" HOSTS="3 10" REISSUE_AT="$HOSTS" (host counts with a mass reissue)
#   IDLE=300 (seconds of the idle window: the daemon's resynchronisation period, five minutes,
#   so each daemon resynchronises about once in it) RESYNC=SECS (debug builds only: the
#   daemons' resynchronisation period, CERT_AGENT_TEST_FLEET_RESYNC_SECS; set IDLE to a
#   multiple) SETTLE=5 (seconds between the last joiner's first run and the idle window; the
#   window's messages are also logged minute by minute) CONCURRENCY=16 ([agent] concurrency) TIMEOUT=1800 (seconds any one step may
#   take) LEASE (lease_ttl_secs; default: the agent's 15) PROFILE=release|debug AGENT=PATH
#   SANDBOX=PATH BUILD=0 KEEP=1 (see benches/fleet-lib.sh)
# Needs etcd, etcdctl, nginx, openssl, python3, curl, /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-scale-$(date -u +%F)}
SIZES=${SIZES:-100 1000}
HOSTS=${HOSTS:-3 10}
REISSUE_AT=${REISSUE_AT:-$HOSTS}
IDLE=${IDLE:-300}
SETTLE=${SETTLE:-5}
RESYNC=${RESYNC:-}
CONCURRENCY=${CONCURRENCY:-16}
TIMEOUT=${TIMEOUT:-1800}
LEASE=${LEASE:-}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
source benches/fleet-lib.sh
if [ -n "$RESYNC" ]; then
  [ "$PROFILE" = debug ] || echo "RESYNC=$RESYNC has no effect on a release build (the period stays 300 s)" >&2
  export CERT_AGENT_TEST_FLEET_RESYNC_SECS=$RESYNC
fi
cat > "$OUT/bench.txt" <<EOF
profile=$PROFILE
concurrency=$CONCURRENCY
idle_window_s=$IDLE
settle_s=$SETTLE
resync_s=${RESYNC:-300}
agent=$("$AGENT" --version 2>/dev/null | head -n 1) ($AGENT)
sandbox=$SANDBOX
machine=$(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB
EOF

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{$(now) - $1:.3f}')"; }
# Plenty of credit for every order of the bench.
sbx -d '{"login": "partner@sandbox.test", "sum": "100000000.00"}' "$SB/_sandbox/accounts/payments" >/dev/null

# wait_complete REF C DIR...: waits until every DIR holds every certificate REF holds (same
# content; each file checked again only until it matches); fails after TIMEOUT with the
# daemons' logs copied to OUT.
wait_complete() {
  python3 - "$TIMEOUT" "$@" <<'EOF' && return 0
import hashlib, os, sys, time
timeout, ref, c, dirs = float(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def name(i): return "fullchain.pem" if i == 0 else f"c{i}.pem"
def digest(d, i):
    try:
        with open(os.path.join(d, "out", name(i)), "rb") as f:
            return hashlib.sha256(f.read()).digest()
    except OSError:
        return None
want = [digest(ref, i) for i in range(c)]
left = {d: list(range(c)) for d in dirs}
deadline = time.monotonic() + timeout
while True:
    for d in dirs:
        left[d] = [i for i in left[d] if digest(d, i) != want[i]]
    if not any(left.values()):
        sys.exit(0)
    if time.monotonic() > deadline:
        missing = {os.path.basename(d): len(v) for d, v in left.items() if v}
        print(f"not every host installed all {c} certificates in {timeout:.0f} s: missing {missing}", file=sys.stderr)
        sys.exit(1)
    time.sleep(0.5)
EOF
  local d; shift 2
  for d in "$@"; do [ -f "$d/daemon.log" ] && cp "$d/daemon.log" "$OUT/daemon-$(basename "$d").log"; done
  echo "(daemons' logs: $OUT/daemon-*.log)" >&2
  return 1
}
# first_runs_over SINCE DIR...: waits until every DIR's metrics file tells of a run started
# after SINCE (epoch seconds): the file is written at the end of each run.
first_runs_over() {
  python3 - "$TIMEOUT" "$@" <<'EOF'
import re, sys, time
timeout, since, dirs = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
deadline = time.monotonic() + timeout
def ran(d):
    try:
        text = open(f"{d}/metrics.prom").read()
    except OSError:
        return False
    m = re.search(r"^cert_agent_last_run_start_timestamp_seconds(?:\{[^}]*\})? (\S+)", text, re.M)
    return bool(m) and float(m.group(1)) >= since - 1
while not all(ran(d) for d in dirs):
    if time.monotonic() > deadline:
        print(f"the daemons' first runs were not over in {timeout:.0f} s", file=sys.stderr)
        sys.exit(1)
    time.sleep(1)
EOF
}
reloads() { [ -f "$1/reloads" ] && wc -l < "$1/reloads" || echo 0; }
leads() { grep -c '"fleet-lead-taken"' "$1/state/audit.log" 2>/dev/null || echo 0; }
# led_run DIR ARGS...: a `renew` on DIR that took the lead (the lead a scheduled run takes
# once per refresh_secs, crl_lead_due; tried again for about five minutes while a daemon's
# run leads); prints its seconds. $W/led.msgs: the etcd messages
# received during it; $W/led.rss: its peak RSS (KiB).
led_run() {
  local d=$1; shift
  for _ in $(seq 150); do
    crl_lead_due "$d"
    local before t; before=$(leads "$d"); etcd_messages > "$W/led.m0"; t=$(now)
    /usr/bin/time -f %M -o "$W/led.rss" "$AGENT" --config "$d/config.toml" renew "$@" > "$d/renew.log" 2>&1 \
      || { echo "renew $* on $d failed (log: $OUT/renew-failed.log):" >&2
           cp "$d/renew.log" "$OUT/renew-failed.log"; tail -n 20 "$d/renew.log" >&2; return 1; }
    local took; took=$(since "$t")
    etcd_messages > "$W/led.m1"
    if [ "$(leads "$d")" -gt "$before" ]; then
      echo $(( $(msg_total "$W/led.m1") - $(msg_total "$W/led.m0") )) > "$W/led.msgs"
      msg_by_method "$W/led.m0" "$W/led.m1" > "$W/led.methods"
      echo "$took"; return 0
    fi
    sleep 2
  done
  echo "renew $* on $d never led" >&2; return 1
}
# peak_rss PID...: the largest VmHWM (KiB) of the running processes among PID.
peak_rss() {
  local p m=0 v
  for p in "$@"; do
    v=$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
    [ -n "$v" ] && [ "$v" -gt "$m" ] && m=$v
  done
  echo "$m"
}
in_list() { local x=$1; shift; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }
log() { echo "$(date -u +%T) $*"; }

echo "certs,hosts,first_day_s,first_day_reloads,first_day_leader_rss_kib,joiners,catchup_s,joiner_reloads_max,idle_window_s,idle_msgs,noop_run_msgs,idle_per_host_hour,leader_noop_s,reissue_leader_s,convergence_s,reloads_per_host_median,reloads_per_host_max,etcd_db_bytes,etcd_db_in_use_bytes,etcd_db_compacted_bytes,daemon_rss_max_kib,leader_rss_max_kib" > "$OUT/results.csv"
for C in $SIZES; do
  PREFIX=/scale-$C/
  DOM=s$C.bench.test
  B=$W/c$C
  mkdir -p "$B"
  scale_host "$B/host1" host1 "$PREFIX" "$C" nginx "$DOM" "$LEASE"
  sbx -d "{\"http\": $(cat "$B/host1/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
  t=$(now)
  /usr/bin/time -f %M -o "$B/host1/first-day.rss" \
    "$AGENT" --config "$B/host1/config.toml" renew --wait "$TIMEOUT" > "$B/host1/first-day.log" 2>&1 \
    || { echo "the first day of $C certificates failed (log: $OUT/first-day-$C.log):" >&2
         cp "$B/host1/first-day.log" "$OUT/first-day-$C.log"; tail -n 20 "$B/host1/first-day.log" >&2; exit 1; }
  first_day=$(since "$t")
  fd_reloads=$(reloads "$B/host1")
  fd_rss=$(tail -n 1 "$B/host1/first-day.rss")
  log "C=$C: first day (host1 orders every certificate): ${first_day} s, $fd_reloads reloads, peak RSS $fd_rss KiB"
  running=1
  DAEMONS=()
  for H in $HOSTS; do
    [ "$H" -gt "$running" ] || continue
    joiners=()
    for i in $(seq $((running + 1)) "$H"); do
      kind=none; [ "$i" -le 3 ] && kind=nginx
      scale_host "$B/host$i" "host$i" "$PREFIX" "$C" "$kind" "$DOM" "$LEASE"
      joiners+=("$B/host$i")
    done
    started=$(date +%s); t=$(now)
    for d in "${joiners[@]}"; do
      "$AGENT" --config "$d/config.toml" run --interval 3600 > "$d/daemon.log" 2>&1 &
      PIDS+=($!); DAEMONS+=($!)
    done
    wait_complete "$B/host1" "$C" "${joiners[@]}"
    catchup=$(since "$t")
    jr=$(for d in "${joiners[@]}"; do reloads "$d"; done | sort -n | tail -n 1)
    running=$H
    log "C=$C H=$H: ${#joiners[@]} hosts joined, caught up in ${catchup} s (at most $jr reloads each)"

    # Idle: every daemon past its first run (within a minute of its start; they lead one
    # after the other), then a quiet window.
    first_runs_over "$started" "${joiners[@]}"
    log "C=$C H=$H: every joiner's first run is over; the idle window starts in $SETTLE s"
    sleep "$SETTLE"
    # The window in minutes (and what is left), each minute's messages logged: a burst at its
    # start is work still under way, not the idle cost.
    etcd_messages > "$W/idle.m0"; cp "$W/idle.m0" "$W/idle.prev"; left=$IDLE; minute=0
    while [ "$left" -gt 0 ]; do
      step=$(( left < 60 ? left : 60 )); sleep "$step"; left=$(( left - step )); minute=$(( minute + 1 ))
      etcd_messages > "$W/idle.now"
      log "C=$C H=$H: idle window, minute $minute: $(( $(msg_total "$W/idle.now") - $(msg_total "$W/idle.prev") )) messages ($(msg_by_method "$W/idle.prev" "$W/idle.now"))"
      mv "$W/idle.now" "$W/idle.prev"
    done
    mv "$W/idle.prev" "$W/idle.m1"
    idle=$(( $(msg_total "$W/idle.m1") - $(msg_total "$W/idle.m0") ))
    log "C=$C H=$H: idle: $idle etcd messages in $IDLE s from ${#DAEMONS[@]} daemons ($(msg_by_method "$W/idle.m0" "$W/idle.m1"))"

    # Five no-op runs that led: the first after the hosts joined imports what their first
    # runs wrote, the second finds the records the first wrote (neither may use the due
    # summary for those); from the third on the fleet is settled, as an hourly run finds it.
    times=$(for _ in 1 2 3 4 5; do led_run "$B/host1"; done)
    noop=$(echo "$times" | tail -n 3 | sort -n | sed -n 2p)
    log "C=$C H=$H: leader no-op runs: $(echo $times | sed 's/ / s, /g') s"
    run_msgs=$(cat "$W/led.msgs")
    leader_rss=$(cat "$W/led.rss" | tail -n 1)
    per_host_hour=$(python3 -c "print(round($idle * 3600 / ($IDLE * ${#DAEMONS[@]}) + $run_msgs, 1))")
    log "C=$C H=$H: leader no-op run ${noop} s (settled: median of the last 3 of 5; the last: $run_msgs etcd messages: $(cat "$W/led.methods"))"
    log "C=$C H=$H: idle etcd messages per host per hour: $per_host_hour (the ${IDLE} s window scaled to an hour per daemon, plus one no-op run)"

    reissue=""; converged=""; med=""; max=""
    if in_list "$H" $REISSUE_AT; then
      declare -A before=()
      all=("$B"/host*)
      for d in "${all[@]}"; do before[$d]=$(reloads "$d"); done
      t=$(now)
      reissue=$(led_run "$B/host1" --force --wait "$TIMEOUT")
      r=$(tail -n 1 "$W/led.rss"); [ "$r" -gt "$leader_rss" ] && leader_rss=$r
      wait_complete "$B/host1" "$C" "${all[@]}"
      converged=$(since "$t")
      per_host=$(for d in "${all[@]}"; do echo $(( $(reloads "$d") - ${before[$d]} )); done | sort -n)
      med=$(echo "$per_host" | python3 -c 'import statistics,sys; print(f"{statistics.median(int(x) for x in sys.stdin):g}")')
      max=$(echo "$per_host" | tail -n 1)
      log "C=$C H=$H: mass reissue: leader ${reissue} s, every host serving in ${converged} s, reloads per host median $med, max $max"
    fi
    read -r db use < <(etcd_db)
    etcd_census "$OUT/census-$C-$H.txt"
    rev=$(etcd_compact_defrag)
    read -r db2 _ < <(etcd_db)
    rss=$(peak_rss "${DAEMONS[@]}")
    log "C=$C H=$H: etcd database $db bytes ($use in use); compacted at $rev and defragmented: $db2 bytes; daemons' peak RSS $rss KiB, leader's $leader_rss KiB"
    echo "$C,$H,$first_day,$fd_reloads,$fd_rss,${#joiners[@]},$catchup,$jr,$IDLE,$idle,$run_msgs,$per_host_hour,$noop,$reissue,$converged,$med,$max,$db,$use,$db2,$rss,$leader_rss" >> "$OUT/results.csv"
  done
  # This fleet's daemons and nginx stop, its keys go, before the next size starts.
  for d in "$B"/host*; do
    [ -f "$d/nginx/nginx.pid" ] && kill "$(cat "$d/nginx/nginx.pid")" 2>/dev/null || true
  done
  for p in "${DAEMONS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  ETCDCTL_API=3 etcdctl --endpoints "${EP[0]}" del --prefix "$PREFIX" >/dev/null
  [ "${KEEP:-0}" = 1 ] || rm -rf "$B"
done

python3 benches/fleet-scale-plot.py "$OUT"
