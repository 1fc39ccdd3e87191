#!/usr/bin/env bash
# The no-op `cert-agent renew` over N installed certificates with `[revocation] check` on, every
# certificate naming one CRL (docs/performance.md, "The no-op run with revocation checking"):
# two cert-agent binaries side by side (BEFORE and AFTER, runs alternated), certbot renewing the
# same certificates beside them. Each binary has a fleet of its own (bench_fleet --crl-url),
# whose CA's CRL a local HTTP server serves; the API is a closed port (any call fails the run).
#   1. the CRL reachable and kept: wall, CPU and peak RSS, median (min-max) of REPS runs;
#   2. the CRL unreachable (the server stopped, the kept copies removed): the lines each of
#      three runs in a row prints (stdout and stderr), then wall, CPU and RSS of REPS runs.
#
#   BEFORE=/path/old/cert-agent AFTER=target/release/cert-agent benches/revocation-noop.sh
#
# Knobs (environment): N (1000), REPS (11), REPS_CERTBOT (3), FLEET (the bench_fleet example,
# default target/release/examples/bench_fleet), OUT (benches/results/revocation-noop),
# BENCH_KEEP=1 keeps the temporary directory. certbot is installed with apt-get if missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
N=${N:-1000}
REPS=${REPS:-11}
REPS_CERTBOT=${REPS_CERTBOT:-3}
FLEET=${FLEET:-$TARGET/release/examples/bench_fleet}
OUT=${OUT:-$ROOT/benches/results/revocation-noop}
: "${BEFORE:?BEFORE=path of the cert-agent binary to compare with}"
AFTER=${AFTER:-$TARGET/release/cert-agent}
MEASURE="python3 $ROOT/benches/measure.py"

if ! command -v certbot >/dev/null; then
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq certbot >/dev/null
  ($SUDO systemctl disable --now certbot.timer 2>/dev/null || true) >/dev/null 2>&1
fi

mkdir -p "$OUT"
RAW=$OUT/runs.jsonl
: > "$RAW"
W=$(mktemp -d /tmp/cert-agent-revocation.XXXXXX)
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  [ "${BENCH_KEEP:-0}" = 1 ] && echo "kept $W" >&2 || rm -rf "$W"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
CLOSED=$(free_port)
PORT=$(free_port)
serve() {
  python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$W" >/dev/null 2>&1 &
  SERVER=$!
  for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/before/ca.crl" && return; sleep 0.1; done
  echo "the CRL server did not start" >&2; exit 1
}

for v in before after; do
  extra=(); [ "$v" = before ] && extra=(--certbot)
  "$FLEET" --dir "$W/$v" --count "$N" --base-url "https://127.0.0.1:$CLOSED" \
    --crl-url "http://127.0.0.1:$PORT/$v/ca.crl" "${extra[@]}"
done
agent() { if [ "$1" = before ]; then echo "$BEFORE"; else echo "$AFTER"; fi; }
cfg() { echo "$W/$1/agent/config.toml"; }

serve
# Settle: the first runs read the CRL, write what it said into the records and the summary.
for v in before after; do
  for _ in 1 2 3; do "$(agent $v)" --config "$(cfg $v)" renew > /dev/null; sleep 1.1; done
done
for _ in $(seq "$REPS"); do
  for v in before after; do
    $MEASURE --label "$v-crl-kept" --reps 1 --warmup 0 --out "$RAW" --meta n="$N" -- \
      "$(agent $v)" --config "$(cfg $v)" renew > /dev/null
  done
done
$MEASURE --label certbot-renew --reps "$REPS_CERTBOT" --warmup 0 --out "$RAW" --meta n="$N" -- \
  certbot renew --config-dir "$W/before/certbot/config" --work-dir "$W/before/certbot/work" \
  --logs-dir "$W/before/certbot/logs" --no-random-sleep-on-renew -q > /dev/null

# The CRL unreachable: nothing listens at its URL any more, and no copy is kept.
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=
LINES=$OUT/lines.txt
: > "$LINES"
for v in before after; do
  rm -rf "$W/$v/agent/state/crl"
  for run in 1 2 3; do
    "$(agent $v)" --config "$(cfg $v)" renew > "$W/$v.out" 2>&1 || true
    echo "$v run $run: $(wc -l < "$W/$v.out") lines, $(grep -c 'ca.crl' "$W/$v.out" || true) naming the CRL" >> "$LINES"
    sleep 1.1
  done
  (sed -n '1,3p' "$W/$v.out" | cut -c1-300 >> "$LINES") || true
  (grep -v '^c[0-9]*: ' "$W/$v.out" | cut -c1-300 | head -5 >> "$LINES") || true
done
for _ in $(seq "$REPS"); do
  for v in before after; do
    $MEASURE --label "$v-crl-unreachable" --reps 1 --warmup 0 --out "$RAW" --meta n="$N" -- \
      "$(agent $v)" --config "$(cfg $v)" renew > /dev/null
  done
done
cat "$LINES"
$MEASURE --summary "$RAW" > "$OUT/summary.json"
python3 - "$OUT/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
for label, v in s.items():
    w, c, r = v["wall_s"], v["cpu_s"], v["maxrss_kb"]
    print(f"{label}: wall {w['median']*1000:.1f} ms ({w['min']*1000:.1f}-{w['max']*1000:.1f}), "
          f"CPU {c['median']*1000:.1f} ms, peak RSS {r['median']/1024:.1f} MiB")
EOF
