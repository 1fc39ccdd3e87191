#!/usr/bin/env bash
# The fleet leader's own costs, measured on a small fleet: the three-member etcd cluster on
# loopback, the sandbox (--instant), host1 (the leader: its `cert-agent renew` runs are the
# measured ones) and host2 (a follower running `cert-agent run --interval 3600`), each with C
# certificates of `server = "none"` (files and a reload command that counts its reloads; a
# small Python HTTP server serves host1's web root to the sandbox's validation fetches).
#   - first day: host1's `renew --wait` orders all C certificates; host2 installs them;
#   - leader no-op: host1's `renew` with nothing due (each of RUNS runs that led; the median);
#     PERF=1 records one more no-op run with `perf record -g` (OUT/noop.perf.data, and the
#     top of `perf report` in OUT/noop.perf.txt; PERF_CALLGRAPH="--call-graph dwarf" records
#     the callers of the C library's copies too, OUT/noop-C-LABEL.perf-callers.txt), STRACE=1 one with `strace -c -f`
#     (OUT/noop.strace.txt, and OUT/noop-C-LABEL.files.txt: openat, read, fsync only);
#     the etcd messages (by method) and bytes sent during the RUNS no-op runs, and the
#     values the leader's read of the fleet read (OUT/noop-etcd.txt), the CPU time of one
#     (OUT/noop-C-LABEL.cpu.txt); FULLREAD=1 one more no-op run without host1's versions
#     file (every value read) and one after it, with their etcd messages and bytes;
#   - mass reissue: host1's `renew --force` reissues all C: the leader's run, its publishing
#     (from its first "published to the fleet" line to its last, from its `-v` log), the time
#     until host2 has installed every new certificate, and host2's reloads meanwhile.
# With COMPARE="LABEL=PATH ..." (other cert-agent builds) the no-op runs, the profiles and the
# mass reissue are measured for each build in turn on the same fleet (the first day and the
# follower use AGENT); each build's rows carry its label.
# Usage: benches/fleet-leader.sh [OUT_DIR]   (default benches/results/fleet-leader-DATE)
#   SIZES="1000" RUNS=3 CONCURRENCY=16 PERF=0 STRACE=0 TIMEOUT=1800 REISSUE=1 (0: no mass
#   reissue) COMPARE="" KIND=none (nginx: host1 and host2 each with its own nginx, as
#   fleet-scale.sh's first three hosts) LEASE_END=0 (1: after the no-op runs, a lead that
#   ends with its lease, and the etcd messages of host2's daemon's look at the open work,
#   OUT/lease-end.txt) and fleet-lib.sh's PROFILE, AGENT, BUILD, KEEP.
# Needs etcd, etcdctl, openssl, python3, curl (perf, strace when asked).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-leader-$(date -u +%F)}
SIZES=${SIZES:-1000}
RUNS=${RUNS:-3}
CONCURRENCY=${CONCURRENCY:-16}
TIMEOUT=${TIMEOUT:-1800}
REISSUE=${REISSUE:-1}
KIND=${KIND:-none}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
source benches/fleet-lib.sh

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{$(now) - $1:.3f}')"; }
sbx -d '{"login": "partner@sandbox.test", "sum": "100000000.00"}' "$SB/_sandbox/accounts/payments" >/dev/null

installed() { ls "$1"/out/*.pem 2>/dev/null | wc -l; }
# same C A B: whether B holds every certificate file A holds (same content).
same() {
  python3 - "$@" <<'EOF'
import hashlib, sys
c, a, b = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def h(d, i):
    try: return hashlib.sha256(open(f"{d}/out/" + ("fullchain.pem" if i == 0 else f"c{i}.pem"), "rb").read()).digest()
    except OSError: return None
print(int(all(h(a, i) is not None and h(a, i) == h(b, i) for i in range(c))))
EOF
}
wait_same() {
  local deadline=$(( $(date +%s) + TIMEOUT ))
  until [ "$(same "$@")" = 1 ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "host2 did not install all $1 certificates in $TIMEOUT s" >&2; return 1; }
    sleep 0.5
  done
}
reloads() { [ -f "$1/reloads" ] && wc -l < "$1/reloads" || echo 0; }
leads() { grep -c '"fleet-lead-taken"' "$1/state/audit.log" 2>/dev/null || echo 0; }
# led DIR LOG ARGS...: a `renew` on DIR that took the lead (the lead a scheduled run takes once
# per refresh_secs, crl_lead_due; tried again while host2 leads);
# prints its seconds. WRAP: a command the run is started under (strace, perf: what it
# writes is the leading run's, each attempt writing it again).
led() {
  local d=$1 log=$2; shift 2
  for _ in $(seq 100); do
    crl_lead_due "$d"
    local before t; before=$(leads "$d"); t=$(now)
    # shellcheck disable=SC2086 # WRAP: a measuring command and its arguments, split.
    ${WRAP:-} "${RUN_AGENT:-$AGENT}" --config "$d/config.toml" renew "$@" > "$log" 2>&1 \
      || { echo "renew $* failed:" >&2; tail -n 20 "$log" >&2; return 1; }
    local took; took=$(since "$t")
    [ "$(leads "$d")" -gt "$before" ] && { echo "$took"; return 0; }
    sleep 1
  done
  echo "renew $* never led" >&2; return 1
}

echo "build,certs,first_day_s,leader_noop_median_s,leader_noop_all" > "$OUT/noop.csv"
echo "build,certs,reissue_leader_s,publishing_s,follower_installed_s,follower_reloads" > "$OUT/results.csv"
for C in $SIZES; do
  B=$W/c$C; P=/leader-$C/; DOM=l$C.bench.test
  scale_host "$B/host1" host1 "$P" "$C" "$KIND" "$DOM"
  scale_host "$B/host2" host2 "$P" "$C" "$KIND" "$DOM"
  HP=$(port)
  python3 -m http.server "$HP" --bind 127.0.0.1 --directory "$B/host1/www" >/dev/null 2>&1 &
  PIDS+=($!)
  sbx -d "{\"http\": $HP, \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
  t=$(now)
  led "$B/host1" "$OUT/first-day-$C.log" --wait 900 >/dev/null
  first=$(since "$t")
  echo "C=$C: first day ${first} s"
  "$AGENT" --config "$B/host2/config.toml" run --interval 3600 > "$OUT/follower-$C.log" 2>&1 &
  PIDS+=($!); FOLLOWER=$!
  wait_same "$C" "$B/host1" "$B/host2"
  sleep 5
  BUILDS=${COMPARE:-this=$AGENT}
  for build in $BUILDS; do
    label=${build%%=*}; RUN_AGENT=${build#*=}
    etcd_messages > "$W/msg0"; b0=$(etcd_sent_bytes)
    times=$(for _ in $(seq "$RUNS"); do led "$B/host1" "$OUT/noop-$C-$label.log"; done)
    etcd_messages > "$W/msg1"; b1=$(etcd_sent_bytes)
    # What the no-op runs cost etcd (every member; with host2's idle watch beside them).
    echo "C=$C $label: etcd during $RUNS no-op runs: $(msg_by_method "$W/msg0" "$W/msg1"); $(( b1 - b0 )) bytes sent" | tee -a "$OUT/noop-etcd.txt"
    "$RUN_AGENT" -v --config "$B/host1/config.toml" renew 2>&1 | grep -E "key\(s\) under certs/" | head -n 1 >> "$OUT/noop-etcd.txt" || true
    med=$(echo "$times" | python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.stdin))')
    all=$(echo "$times" | tr '\n' ' ')
    echo "C=$C $label: leader no-op runs: $all(median $med s)"
    if [ "${FULLREAD:-0}" = 1 ]; then
      # One no-op run without host1's versions file: every value read (as before the reads
      # skipped what the host accepted), then one with the file it wrote again.
      for what in without with; do
        [ "$what" = without ] && mv "$B/host1/state/fleet-versions.json" "$W/versions.kept"
        etcd_messages > "$W/msg0"; b0=$(etcd_sent_bytes)
        t=$(led "$B/host1" "$OUT/noop-$C-$label-$what-versions.log" -v)
        etcd_messages > "$W/msg1"; b1=$(etcd_sent_bytes)
        echo "C=$C $label: one no-op run $what the versions file: $t s; etcd: $(msg_by_method "$W/msg0" "$W/msg1"); $(( b1 - b0 )) bytes sent; $(grep -E 'key\(s\) under certs/|shared record\(s\) as' "$OUT/noop-$C-$label-$what-versions.log" | sed 's/.*fleet: //' | tr '\n' ' ')" | tee -a "$OUT/noop-etcd.txt"
      done
    fi
    if [ "${PERF:-0}" = 1 ]; then
      WRAP="perf record ${PERF_CALLGRAPH:--g} -o $OUT/noop-$C-$label.perf.data --" led "$B/host1" /dev/null >/dev/null
      # Written whole before it is cut (no broken pipe under pipefail).
      perf report -i "$OUT/noop-$C-$label.perf.data" --children --stdio -g none --percent-limit 1 > "$W/perf.txt" 2>/dev/null || true
      sed -n 1,150p "$W/perf.txt" > "$OUT/noop-$C-$label.perf.txt"
      # With PERF_CALLGRAPH="--call-graph dwarf": the C library's copies and allocations by
      # their callers (they have no frame pointers), and the share under each function.
      if [ "${PERF_CALLGRAPH:-}" = "--call-graph dwarf" ]; then
        perf script -i "$OUT/noop-$C-$label.perf.data" 2>/dev/null > "$W/perf-script.txt" || true
        python3 benches/perf-callers.py 70 < "$W/perf-script.txt" > "$OUT/noop-$C-$label.perf-callers.txt" || true
      fi
    fi
    if [ "${STRACE:-0}" = 1 ]; then
      WRAP="strace -c -f -o $OUT/noop-$C-$label.strace.txt" led "$B/host1" /dev/null >/dev/null
      WRAP="strace -c -f -e trace=openat,read,fsync -o $OUT/noop-$C-$label.files.txt" led "$B/host1" /dev/null >/dev/null
      # Which files the run opens, by kind (certificate names and long numbers folded): the
      # opens per certificate of each, in the order the run first opens it.
      WRAP="strace -f -e trace=openat -o $W/opens.txt" led "$B/host1" /dev/null >/dev/null
      python3 - "$W/opens.txt" "$C" > "$OUT/noop-$C-$label.opens.txt" <<'EOF'
import re, sys
counts, order = {}, []
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r'openat\([^,]*, "([^"]*)"', line)
    if not m or "= -1" in line:
        continue
    k = re.sub(r"\d{6,}", "T", re.sub(r"\bc\d+\b", "cN", m.group(1)))
    if k not in counts:
        order.append(k)
    counts[k] = counts.get(k, 0) + 1
c = int(sys.argv[2])
print(f"{sum(counts.values())} opens ({sum(counts.values()) / c:.2f} per certificate)")
for k in order:
    if counts[k] >= c // 2:
        print(f"{counts[k] / c:6.2f} per certificate  {k}")
print(f"{sum(v for v in counts.values() if v < c // 2)} other opens")
EOF
    fi
    # CPU time of one no-op run that led (user and system seconds, peak RSS), and its
    # instructions where perf counts them.
    WRAP="/usr/bin/time -f %U_user_%S_sys_%e_elapsed_%M_KiB -o $OUT/noop-$C-$label.cpu.txt" \
      led "$B/host1" /dev/null >/dev/null && sed -i 's/_/ /g' "$OUT/noop-$C-$label.cpu.txt" || true
    if [ "${PERF:-0}" = 1 ]; then
      WRAP="perf stat -x, -e instructions:u -o $W/instructions.txt" led "$B/host1" /dev/null >/dev/null \
        && grep instructions "$W/instructions.txt" | cut -d, -f1 | sed 's/$/ instructions:u/' >> "$OUT/noop-$C-$label.cpu.txt"
    fi
    echo "$label,$C,$first,$med,$all" >> "$OUT/noop.csv"
  done
  if [ "${LEASE_END:-0}" = 1 ]; then
    # A lead that ends with its lease: the leader key written for a host that never gives it
    # up, on a 5 s lease. host2's daemon sees it deleted without a resignation and reads what
    # work the fleet left open (none here); the etcd messages of the 20 s after the write.
    lease=$(ETCDCTL_API=3 etcdctl --endpoints "${EP[0]}" lease grant 5 | awk '{print $2}')
    etcd_messages > "$W/le.m0"; b0=$(etcd_sent_bytes)
    ETCDCTL_API=3 etcdctl --endpoints "${EP[0]}" put --lease="$lease" "${P}leader" ghost >/dev/null
    sleep 20
    etcd_messages > "$W/le.m1"; b1=$(etcd_sent_bytes)
    echo "C=$C: a lead that ended with its lease: etcd messages in the 20 s after it was taken: $(msg_by_method "$W/le.m0" "$W/le.m1"); $(( b1 - b0 )) bytes sent" | tee -a "$OUT/lease-end.txt"
  fi
  [ "$REISSUE" = 1 ] || BUILDS=""
  for build in $BUILDS; do
    label=${build%%=*}; RUN_AGENT=${build#*=}
    r0=$(reloads "$B/host2"); t=$(now)
    rl=$(led "$B/host1" "$OUT/reissue-$C-$label.log" -v --force --wait 900)
    pub=$(python3 - "$OUT/reissue-$C-$label.log" <<'EOF'
import datetime, re, sys
ts = [datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
      for line in open(sys.argv[1], errors="replace")
      if "published to the fleet" in line and (m := re.match(r"\s*(\S+Z)\s", line))]
print(f"{ts[-1] - ts[0]:.3f}" if ts else "")
EOF
)
    wait_same "$C" "$B/host1" "$B/host2"
    inst=$(since "$t"); fr=$(( $(reloads "$B/host2") - r0 ))
    echo "C=$C $label: mass reissue: leader ${rl} s (publishing ${pub} s), host2 installed all in ${inst} s with $fr reloads"
    echo "$label,$C,$rl,$pub,$inst,$fr" >> "$OUT/results.csv"
    sleep 5
  done
  kill "$FOLLOWER" 2>/dev/null || true
done
