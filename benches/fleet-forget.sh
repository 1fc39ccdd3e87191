#!/usr/bin/env bash
# `fleet forget-host` at scale: a three-member etcd cluster on loopback, the sandbox
# (--instant), a fleet of C certificates. host1 (its own nginx) orders them all (the first
# day); HOSTS other hosts (`server = "none"`) join with one `renew` each (their results,
# proofs where they prove, `seen` records, manifest entries); then the last of them is
# forgotten by host1 once ten minutes have passed since its last synchronisation (a live
# host is refused). Meanwhile host1's no-op `renew` (it leads: `fleet-leads.json` set back as
# a CRL refresh would) is measured RUNS times: wall time and peak RSS; PERF=1 records one
# more with `perf record --call-graph fp` (PERF_AGENT: a build with frame pointers, default
# AGENT; OUT/noop.perf.txt). Measured then: the keys under the prefix and the etcd database
# before and after (each after a compaction at the current revision and a defragmentation),
# the forget's wall time and peak RSS, and host1's no-op runs again. Results:
# OUT/results.txt.
# Usage: benches/fleet-forget.sh [OUT_DIR]   (default benches/results/fleet-forget)
#   C=10000 HOSTS=2 RUNS=3 PERF=0 TIMEOUT=1800, and fleet-lib.sh's knobs (PROFILE, AGENT,
#   SANDBOX, BUILD, KEEP).
# Needs etcd, etcdctl, nginx, openssl, python3, curl, /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-forget}
C=${C:-10000}
HOSTS=${HOSTS:-2}
RUNS=${RUNS:-3}
PERF=${PERF:-0}
TIMEOUT=${TIMEOUT:-1800}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
source benches/fleet-lib.sh
RES=$OUT/results.txt
: > "$RES"
log() { echo "$*" | tee -a "$RES" >&2; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{$(now) - $1:.3f}')"; }
keys() { ETCDCTL_API=3 etcdctl --endpoints "${EP[0]}" get --prefix "$1" --keys-only | grep -c . || true; }
sbx -d '{"login": "partner@sandbox.test", "sum": "100000000.00"}' "$SB/_sandbox/accounts/payments" >/dev/null

PREFIX=/forget-$C/
DOM=f$C.bench.test
scale_host "$W/host1" host1 "$PREFIX" "$C" nginx "$DOM"
sbx -d "{\"http\": $(cat "$W/host1/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
log "agent: $("$AGENT" --version | head -n 1); machine: $(nproc) cores"
t=$(now)
"$AGENT" --config "$W/host1/config.toml" renew --wait "$TIMEOUT" > "$W/host1/first-day.log" 2>&1 \
  || { tail -n 20 "$W/host1/first-day.log" >&2; exit 1; }
log "C=$C: first day (host1 orders every certificate): $(since "$t") s"
for i in $(seq 2 $((HOSTS + 1))); do
  scale_host "$W/host$i" "host$i" "$PREFIX" "$C" none "$DOM"
  t=$(now)
  "$AGENT" --config "$W/host$i/config.toml" renew > "$W/host$i/join.log" 2>&1 \
    || { tail -n 20 "$W/host$i/join.log" >&2; exit 1; }
  log "host$i joined: $(since "$t") s"
done
GONE=host$((HOSTS + 1))
left=$(date +%s)
# noop LABEL: RUNS no-op runs of host1 that lead, each's wall time and peak RSS.
noop() {
  local r
  for r in $(seq "$RUNS"); do
    crl_lead_due "$W/host1"
    t=$(now)
    /usr/bin/time -f %M -o "$W/noop.rss" "$AGENT" --config "$W/host1/config.toml" renew \
      > "$W/host1/noop.log" 2>&1 || { tail -n 20 "$W/host1/noop.log" >&2; exit 1; }
    log "$1: host1's no-op renew $r: $(since "$t") s, peak RSS $(tail -n 1 "$W/noop.rss") KiB"
  done
}
noop "with $GONE"
if [ "$PERF" = 1 ]; then
  crl_lead_due "$W/host1"
  perf record -F 1000 --call-graph fp -o "$W/noop.perf.data" \
    "${PERF_AGENT:-$AGENT}" --config "$W/host1/config.toml" renew > /dev/null 2>&1
  perf report -i "$W/noop.perf.data" --no-children --percent-limit 0.5 --stdio \
    > "$W/perf.txt" 2>/dev/null || true
  grep -v '^$' "$W/perf.txt" | sed -n 1,400p > "$OUT/noop.perf.txt" || true
  perf report -i "$W/noop.perf.data" --children --percent-limit 2 --stdio -g none \
    > "$W/perf-children.txt" 2>/dev/null || true
  grep -v '^$' "$W/perf-children.txt" | sed -n 1,120p > "$OUT/noop.perf-children.txt" || true
fi
# The forgotten host stopped at its join: ten minutes on, it is no longer live.
wait_s=$((left + 610 - $(date +%s)))
[ "$wait_s" -le 0 ] || sleep "$wait_s"
etcd_compact_defrag >/dev/null
read -r db use < <(etcd_db)
log "before: $(keys "$PREFIX") keys under the prefix, $(keys "${PREFIX}hosts/$GONE/") under hosts/$GONE/; etcd database $db bytes ($use in use)"
t=$(now)
/usr/bin/time -f %M -o "$W/forget.rss" \
  "$AGENT" --config "$W/host1/config.toml" fleet forget-host "$GONE" > "$W/forget.log" 2>&1 \
  || { cat "$W/forget.log" >&2; exit 1; }
log "forget-host $GONE: $(since "$t") s, peak RSS $(tail -n 1 "$W/forget.rss") KiB: $(grep -v " WARN " "$W/forget.log" | head -n 1)"
etcd_compact_defrag >/dev/null
read -r db use < <(etcd_db)
log "after: $(keys "$PREFIX") keys under the prefix, $(keys "${PREFIX}hosts/$GONE/") under hosts/$GONE/; etcd database $db bytes ($use in use)"
noop "without $GONE"
