#!/usr/bin/env bash
# A follower's catch-up, measured: a three-member etcd cluster on loopback, the sandbox
# (--instant), and for each size C of SIZES a fleet (its own prefix) whose leader (host1, its
# own nginx serving the validation files) orders C certificates with `renew --wait`; then a
# fresh host (empty state directory, `server = "none"`: files and a counted reload command)
# joins with `cert-agent renew`, REPEAT times (a fresh state and output directory each): its
# wall and CPU time (median), its peak RSS (the largest of the repetitions), its reloads, and — with STRACE=1 — its syscalls
# (`strace -c -f`, one extra run; its fsync, fdatasync, syncfs, openat, rename, statx and
# unlink calls listed), with PERF=1 a `perf record -g` profile (one extra run), with
# HEAPTRACK=1 the heap's peak and its largest allocations (`heaptrack`, one extra run per build).
# The joiner's first run installs what the fleet has and finds no work for a leader: it does
# not take the lead (the `leads` column: `fleet-lead-taken` lines in its audit log).
# With BASELINE=PATH (another cert-agent build) each repetition also times a fresh joiner
# with it (the same fleet: before and after a change, under the same load); the leader is
# always AGENT. EXTRA="NAME:PATH …" adds more builds to the repetitions the same way.
# Results: OUT/catchup.csv, OUT/summary.txt, OUT/strace-BUILD-C.txt, OUT/perf-C.txt,
# OUT/heaptrack-BUILD-C.txt (and heaptrack's data, OUT/heaptrack-BUILD-C.zst).
# Usage: benches/fleet-catchup.sh [OUT_DIR]   (default benches/results/fleet-catchup-DATE)
#   SIZES="1000" REPEAT=3 JOINERS=0 STRACE=0 PERF=0 HEAPTRACK=0 PROFILE=release|debug AGENT_BIN=PATH BASELINE=PATH
# With JOINERS=N, N more fresh hosts join at once after the repetitions (each build in turn):
# OUT/mass-join.txt gives the time until the last one's first run ended and the leads taken.
# Needs etcd, nginx, openssl, python3, curl (strace, perf when asked).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-catchup-$(date -u +%F)}
SIZES=${SIZES:-1000}
REPEAT=${REPEAT:-3}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
source benches/fleet-lib.sh
sbx -d '{"login": "partner@sandbox.test", "sum": "100000000.00"}' "$SB/_sandbox/accounts/payments" >/dev/null
# joiner DIR PREFIX C DOMAIN: a fresh host of the fleet (empty state and output directory).
joiner() {
  local d=$1 prefix=$2 c=$3 dom=$4
  rm -rf "$d"
  scale_host "$d" "$(basename "$d")" "$prefix" "$c" none "$dom"
}

# timed BUILD BINARY DIR C R: a fresh joiner's first renew with BINARY, one line in the CSV.
timed() {
  local build=$1 bin=$2 d=$3 c=$4 r=$5
  /usr/bin/time -f '%e %U %S %M' -o "$d/time" "$bin" --config "$d/config.toml" renew > "$d/renew.log" 2>&1 \
    || { cp "$d/renew.log" "$OUT/renew-failed-$build-$c.log"; tail -n 20 "$d/renew.log" >&2; exit 1; }
  local n rl wall user sys rss leads
  n=$(ls "$d/out" | grep -c -e '^c[0-9]*\.pem$' -e '^fullchain\.pem$' || true)
  leads=$(grep -c '"event":"fleet-lead-taken"' "$d/state/audit.log" 2>/dev/null || true)
  rl=$( [ -f "$d/reloads" ] && wc -l < "$d/reloads" || echo 0)
  read -r wall user sys rss < "$d/time"
  echo "C=$c $build run $r: ${wall} s wall, ${user} s user, ${sys} s sys, $((rss / 1024)) MiB peak RSS, $rl reloads, $n of $c installed, ${leads:-0} lead(s) taken"
  echo "$build,$c,$r,$wall,$user,$sys,$rss,$rl,$n,${leads:-0}" >> "$OUT/catchup.csv"
}
BUILDS=("agent:$AGENT")
[ -z "${BASELINE:-}" ] || BUILDS=("baseline:$BASELINE" "agent:$AGENT")
# EXTRA="NAME:PATH …": more builds (or wrappers that set an environment and exec one).
[ -z "${EXTRA:-}" ] || read -r -a extra <<<"$EXTRA"
[ -z "${EXTRA:-}" ] || BUILDS+=("${extra[@]}")

echo "build,certs,run,wall_s,user_s,sys_s,peak_rss_kib,reloads,installed,leads" > "$OUT/catchup.csv"
for C in $SIZES; do
  PREFIX=/catchup-$C/; DOM=k$C.bench.test; B=$W/c$C
  scale_host "$B/host1" host1 "$PREFIX" "$C" nginx "$DOM"
  sbx -d "{\"http\": $(cat "$B/host1/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
  "$AGENT" --config "$B/host1/config.toml" renew --wait 900 > "$B/host1/first-day.log" 2>&1 \
    || { cp "$B/host1/first-day.log" "$OUT/first-day-$C.log"; tail -n 20 "$B/host1/first-day.log" >&2; exit 1; }
  for r in $(seq "$REPEAT"); do
    for b in "${BUILDS[@]}"; do
      d=$B/join-${b%%:*}-$r
      joiner "$d" "$PREFIX" "$C" "$DOM"
      timed "${b%%:*}" "${b#*:}" "$d" "$C" "$r"
    done
  done
  if [ "${JOINERS:-0}" -gt 0 ]; then
    # JOINERS fresh hosts join at once (each build in turn): until the last first run ended,
    # the leads they took, the runs that failed.
    for b in "${BUILDS[@]}"; do
      pids=()
      for j in $(seq "$JOINERS"); do joiner "$B/mass-${b%%:*}-$j" "$PREFIX" "$C" "$DOM"; done
      t0=$(date +%s.%N)
      for j in $(seq "$JOINERS"); do
        d=$B/mass-${b%%:*}-$j
        "${b#*:}" --config "$d/config.toml" renew > "$d/renew.log" 2>&1 & pids+=($!)
      done
      fails=0
      for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
      t1=$(date +%s.%N)
      leads=$(cat "$B"/mass-"${b%%:*}"-*/state/audit.log 2>/dev/null | grep -c '"event":"fleet-lead-taken"' || true)
      echo "C=$C ${b%%:*}: $JOINERS joiners at once: $(python3 -c "print(f'{$t1 - $t0:.2f}')") s until the last first run ended, ${leads:-0} lead(s) taken, $fails run(s) failed" | tee -a "$OUT/mass-join.txt"
    done
  fi
  if [ "${STRACE:-0}" = 1 ]; then
    for b in "${BUILDS[@]}"; do
      d=$B/strace-${b%%:*}; joiner "$d" "$PREFIX" "$C" "$DOM"
      strace -c -f -o "$OUT/strace-${b%%:*}-$C.txt" "${b#*:}" --config "$d/config.toml" renew > "$d/renew.log" 2>&1 || true
      echo "C=$C ${b%%:*} syscalls: $(tail -n 1 "$OUT/strace-${b%%:*}-$C.txt")"
      # The syncs, the files opened and renamed: what the install's durability costs.
      awk -v b="${b%%:*}" -v c="$C" '$NF ~ /^(fsync|fdatasync|syncfs|openat|rename|statx|unlink)$/ {
        printf "C=%s %s %s: %s calls\n", c, b, $NF, $4 }' "$OUT/strace-${b%%:*}-$C.txt"
    done
  fi
  if [ "${HEAPTRACK:-0}" = 1 ]; then
    # Where the peak of the heap goes (one extra run per build): the heap's peak and the
    # peak RSS first, then the largest allocators at the peak.
    for build in agent ${BASELINE:+baseline}; do
      bin=$AGENT; [ "$build" = baseline ] && bin=$BASELINE
      d=$B/heaptrack-$build; joiner "$d" "$PREFIX" "$C" "$DOM"
      heaptrack -o "$W/heaptrack-$build-$C" "$bin" --config "$d/config.toml" renew > "$d/renew.log" 2>&1 || true
      # The data itself, for heaptrack_print's other views (-M: the heap over time).
      cp "$W/heaptrack-$build-$C".* "$OUT/" 2>/dev/null || true
      heaptrack_print -f "$W/heaptrack-$build-$C".* --print-peaks 1 --print-allocators 0 --print-leaks 0 \
        --print-temporary 0 -n 25 2>/dev/null > "$W/heaptrack-$build-$C.txt" || true
      { grep -E "^(peak heap memory consumption|peak RSS|total memory leaked|calls to allocation)" \
          "$W/heaptrack-$build-$C.txt"; head -n 400 "$W/heaptrack-$build-$C.txt"; } \
        > "$OUT/heaptrack-$build-$C.txt" || true
    done
  fi
  if [ "${PERF:-0}" = 1 ]; then
    d=$B/perf; joiner "$d" "$PREFIX" "$C" "$DOM"
    perf record -g -o "$W/perf-$C.data" "$AGENT" --config "$d/config.toml" renew > "$d/renew.log" 2>&1 || true
    perf report -i "$W/perf-$C.data" --no-children --stdio 2>/dev/null | grep -v '^$' | head -n 300 > "$OUT/perf-$C.txt" || true
  fi
done
python3 - "$OUT" "$PROFILE" <<'EOF' | tee "$OUT/summary.txt"
import csv, statistics, sys
out, profile = sys.argv[1:]
rows = list(csv.DictReader(open(f"{out}/catchup.csv")))
print(f"a fresh host's first renew ({profile} build, sandbox --instant, server = \"none\")")
print("| build | certificates | wall (median, min-max) | user CPU | sys CPU | peak RSS | reloads | installed | leads taken |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for b in dict.fromkeys(r["build"] for r in rows):
    for c in sorted({int(r["certs"]) for r in rows if r["build"] == b}):
        rs = [r for r in rows if int(r["certs"]) == c and r["build"] == b]
        wall = [float(r["wall_s"]) for r in rs]
        med = lambda k: statistics.median(float(r[k]) for r in rs)
        print(f"| {b} | {c} | {statistics.median(wall):.2f} s ({min(wall):.2f}-{max(wall):.2f}) | {med('user_s'):.2f} s | {med('sys_s'):.2f} s | {max(int(r['peak_rss_kib']) for r in rs) / 1024:.0f} MiB | {max(int(r['reloads']) for r in rs)} | {min(int(r['installed']) for r in rs)} | {sum(int(r.get('leads') or 0) for r in rs)} of {len(rs)} runs |")
EOF
