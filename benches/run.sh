#!/usr/bin/env bash
# Reproduces every table of docs/performance.md on this machine: cert-agent side by side with
# certbot and lego (renew check at scale, issuance cost), the API economy read from the
# sandbox's call log, and the footprint. Installs certbot, lego, pebble and GNU time from
# Debian where missing (as root). Binds 127.0.0.1 only; everything lives in a temporary
# directory that is removed at the end (BENCH_KEEP=1 keeps it).
#
#   benches/run.sh                      # everything, results in benches/results/
#   BENCH_SIZES="10 100" benches/run.sh # fewer fleet sizes
#
# Knobs (environment): BENCH_SIZES (10 100 1000 5000), BENCH_REPS (cert-agent runs per figure,
# 15), BENCH_REPS_CERTBOT (5), BENCH_REPS_LEGO (3), BENCH_LEGO_MAX (largest N with
# BENCH_REPS_LEGO runs; above it lego runs once, 1000), BENCH_ISSUE_N (100), BENCH_ISSUE_REPS
# (3), BENCH_POLL_N (500), BENCH_POLL_INTERVAL (10), BENCH_OUT (benches/results).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

SIZES=${BENCH_SIZES:-"10 100 1000 5000"}
REPS=${BENCH_REPS:-15}
REPS_CERTBOT=${BENCH_REPS_CERTBOT:-5}
REPS_LEGO=${BENCH_REPS_LEGO:-3}
LEGO_MAX=${BENCH_LEGO_MAX:-1000}
ISSUE_N=${BENCH_ISSUE_N:-100}
ISSUE_REPS=${BENCH_ISSUE_REPS:-3}
POLL_N=${BENCH_POLL_N:-500}
POLL_INTERVAL=${BENCH_POLL_INTERVAL:-10}
OUT=${BENCH_OUT:-$ROOT/benches/results}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

log() { printf '\n== %s\n' "$*" >&2; }
# BENCH_ONLY="renew issue poll daemon": run only these sections (the footprint always runs).
want() { [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" $1 "* ]]; }

# --- tools ------------------------------------------------------------------------------------
need=()
command -v certbot >/dev/null || need+=(certbot)
command -v lego >/dev/null || need+=(lego)
command -v pebble >/dev/null || need+=(pebble)
[ -x /usr/bin/time ] || need+=(time)
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
command -v python3 >/dev/null || need+=(python3)
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]}"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  # The certbot package enables a timer; the benchmark runs its own processes.
  ($SUDO systemctl disable --now certbot.timer 2>/dev/null || true) >/dev/null 2>&1
fi

log "building (release)"
cargo build --release --locked -q --bin cert-agent
cargo build --release --locked -q -p partner-sandbox --bin partner-sandbox
cargo build --release --locked -q --example bench_fleet --example bench_issue
AGENT=$TARGET/release/cert-agent
SANDBOX=$TARGET/release/partner-sandbox
FLEET=$TARGET/release/examples/bench_fleet
ISSUE=$TARGET/release/examples/bench_issue
# BENCH_NOJITTER=1: also a binary built with AWS_LC_SYS_NO_JITTER_ENTROPY=1 (aws-lc without its
# CPU-jitter entropy source), to measure that one-time cost per process that issues anything.
AGENT_NJ=
if [ "${BENCH_NOJITTER:-0}" = 1 ]; then
  NJ_TARGET=${BENCH_NOJITTER_TARGET:-$TARGET-nj}
  AWS_LC_SYS_NO_JITTER_ENTROPY=1 CARGO_TARGET_DIR=$NJ_TARGET cargo build --release --locked -q --bin cert-agent
  AGENT_NJ=$NJ_TARGET/release/cert-agent
fi
MEASURE="python3 $ROOT/benches/measure.py"
CALLS="python3 $ROOT/benches/calls.py"

mkdir -p "$OUT"
RAW=$OUT/runs.jsonl
: > "$RAW"
W=$(mktemp -d /tmp/cert-agent-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ "${BENCH_KEEP:-0}" = 1 ] && echo "kept $W" >&2 || rm -rf "$W"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
CLOSED=$(free_port) # nothing listens here: a client that calls it fails

# --- machine ----------------------------------------------------------------------------------
python3 - "$OUT/machine.json" <<EOF
import json, os, platform, subprocess, sys
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception: return ""
json.dump({
  "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
  "cores": os.cpu_count(),
  "mem_gb": round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30, 1),
  "kernel": platform.release(),
  "os": sh(". /etc/os-release; echo \$PRETTY_NAME"),
  "rustc": sh("rustc --version"),
  "certbot": sh("certbot --version 2>&1"),
  "lego": sh("dpkg-query -W -f '\${Version}' lego"),
  "pebble": sh("dpkg-query -W -f '\${Version}' pebble"),
  "cert_agent_commit": sh("git -C $ROOT rev-parse --short HEAD"),
  "load_before": open("/proc/loadavg").read().split()[:3],
  "date": sh("date -u +%Y-%m-%dT%H:%M:%SZ"),
}, open(sys.argv[1], "w"), indent=1)
EOF

# --- pebble (ACME server for certbot and lego) -----------------------------------------------
PB=$W/pebble; mkdir -p "$PB" "$W/acme-webroot"
PB_PORT=$(free_port); PB_MGMT=$(free_port)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$PB/key.pem" \
  -out "$PB/cert.pem" -days 30 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
cat > "$PB/config.json" <<EOF
{"pebble": {"listenAddress": "127.0.0.1:$PB_PORT", "managementListenAddress": "127.0.0.1:$PB_MGMT",
 "certificate": "$PB/cert.pem", "privateKey": "$PB/key.pem", "httpPort": $CLOSED, "tlsPort": $CLOSED,
 "ocspResponderURL": "", "externalAccountBindingRequired": false}}
EOF
PEBBLE_VA_NOSLEEP=1 PEBBLE_VA_ALWAYS_VALID=1 PEBBLE_WFE_NONCEREJECT=0 \
  pebble -config "$PB/config.json" >"$PB/log" 2>&1 &
PIDS+=($!)
ACME=https://127.0.0.1:$PB_PORT/dir
for _ in $(seq 50); do curl -sf --cacert "$PB/cert.pem" "$ACME" >/dev/null && break; sleep 0.2; done
export LEGO_CA_CERTIFICATES=$PB/cert.pem REQUESTS_CA_BUNDLE=$PB/cert.pem
LEGO_OPTS=(--server "$ACME" --email bench@bench.test --accept-tos --http --http.webroot "$W/acme-webroot" --key-type ec256)
# lego refuses to renew without a registered account: register one, as a first `run` does.
lego "${LEGO_OPTS[@]}" --path "$W/lego-account" --domains seed.bench.test run >/dev/null 2>&1

# --- the sandbox (Partner API) ----------------------------------------------------------------
SB_PORT=$(free_port); DCV_PORT=$(free_port)
mkdir -p "$W/webroot"
"$SANDBOX" serve --listen "127.0.0.1:$SB_PORT" --data "$W/sandbox" --instant \
  --dcv-http-port "$DCV_PORT" >"$W/sandbox.log" 2>&1 &
PIDS+=($!); SB_PID=$!
python3 -m http.server "$DCV_PORT" --bind 127.0.0.1 --directory "$W/webroot" >/dev/null 2>&1 &
PIDS+=($!)
SB=https://127.0.0.1:$SB_PORT
SB_CA=$W/sandbox/api-ca.pem
for _ in $(seq 100); do [ -f "$SB_CA" ] && curl -sf --cacert "$SB_CA" "$SB/_sandbox/clock" >/dev/null && break; sleep 0.1; done
sbx() { curl -sf --cacert "$SB_CA" "$@"; }
calls_clear() { sbx -X POST "$SB/_sandbox/calls/clear" >/dev/null; }
calls_save() { sbx "$SB/_sandbox/calls" > "$1"; }

# --- 4. footprint -----------------------------------------------------------------------------
log "footprint"
cp "$AGENT" "$W/cert-agent.stripped"; strip "$W/cert-agent.stripped"
python3 - "$OUT/footprint.json" "$AGENT" "$W/cert-agent.stripped" <<'EOF'
import json, os, sys
json.dump({"binary_bytes": os.path.getsize(sys.argv[2]),
           "stripped_bytes": os.path.getsize(sys.argv[3])}, open(sys.argv[1], "w"))
EOF
$MEASURE --label version --reps "$REPS" --warmup 2 --out "$RAW" -- "$AGENT" --version
$MEASURE --label certbot-version --reps 5 --out "$RAW" -- certbot --version
$MEASURE --label lego-version --reps 5 --out "$RAW" -- lego --version
/usr/bin/time -v "$AGENT" --version > /dev/null 2> "$OUT/time-v-version.txt"

# --- 1. renew check at scale ------------------------------------------------------------------
want renew || SIZES=
for N in $SIZES; do
  log "renew check, N=$N"
  F=$W/fleet$N
  "$FLEET" --dir "$F" --count "$N" --certbot --lego --base-url "https://127.0.0.1:$CLOSED"
  cp -r "$W/lego-account/accounts" "$F/lego/"
  # Every certificate installed and not due, seen by `status`.
  "$AGENT" --config "$F/agent/config.toml" status --json > "$F/status.json"
  python3 - "$F/status.json" "$N" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == int(sys.argv[2]), f"status lists {len(rows)} certificates"
bad = [r for r in rows if r["state"] != "installed" or not r["next_action"].startswith("do nothing")]
assert not bad, f"not installed or due: {bad[:3]}"
EOF
  # cert-agent: the API is a closed port, so any call would fail the run (exit 0 expected).
  $MEASURE --label "agent-renew-$N" --reps "$REPS" --warmup 2 --out "$RAW" --meta n="$N" -- \
    "$AGENT" --config "$F/agent/config.toml" renew
  # The same against the live sandbox: its call log must stay empty.
  sed "s#^base_url = .*#base_url = \"$SB\"\nca_file = \"$SB_CA\"#" "$F/agent/config.toml" > "$F/agent/config-sandbox.toml"
  calls_clear
  "$AGENT" --config "$F/agent/config-sandbox.toml" renew > /dev/null
  calls_save "$F/calls.json"
  $CALLS count "$F/calls.json" > "$OUT/calls-noop-$N.json"
  /usr/bin/time -v "$AGENT" --config "$F/agent/config.toml" renew > /dev/null 2> "$OUT/time-v-agent-renew-$N.txt"

  C=$F/certbot
  $MEASURE --label "certbot-renew-$N" --reps "$REPS_CERTBOT" --out "$RAW" --meta n="$N" -- \
    certbot renew --config-dir "$C/config" --work-dir "$C/work" --logs-dir "$C/logs" \
    --no-random-sleep-on-renew -q

  lreps=$REPS_LEGO; lwarm=1
  if [ "$N" -gt "$LEGO_MAX" ]; then lreps=1; lwarm=0; fi
  $MEASURE --label "lego-renew-$N" --reps "$lreps" --warmup "$lwarm" --out "$RAW" --meta n="$N" -- \
    sh -c 'for i in $(seq 0 $(('"$N"' - 1))); do
             lego "$@" --path "'"$F/lego"'" --domains "c$i.bench.test" renew --days 30 2>/dev/null || exit 1
           done' lego "${LEGO_OPTS[@]}"
  rm -rf "$F/certbot" "$F/lego"
done

# --- 2. issuance cost -------------------------------------------------------------------------
if want issue; then
log "issuance: in-process parts"
"$ISSUE" --out "$OUT/issue-parts.json" > /dev/null

log "issuance: $ISSUE_N certificates in one run, $ISSUE_REPS times"
for r in $(seq "$ISSUE_REPS"); do
  F=$W/issue$ISSUE_N-$r
  "$FLEET" --dir "$F" --count "$ISSUE_N" --orders-only --base-url "$SB" --ca-file "$SB_CA" \
    --poll-interval 1 --webroot "$W/webroot"
  calls_clear
  $MEASURE --label "agent-issue-$ISSUE_N" --reps 1 --warmup 0 --out "$RAW" --meta n="$ISSUE_N" -- \
    "$AGENT" --config "$F/agent/config.toml" renew --wait 300
  calls_save "$W/calls-issue-$r.json"
done
$CALLS count "$W/calls-issue-1.json" --per "$ISSUE_N" > "$OUT/calls-issue.json"
F=$W/issue$ISSUE_N-1

log "no-op run and reissue of the $ISSUE_N issued certificates"
calls_clear
$MEASURE --label "agent-noop-sandbox-$ISSUE_N" --reps 5 --out "$RAW" -- \
  "$AGENT" --config "$F/agent/config.toml" renew
calls_save "$W/calls-noop.json"
$CALLS count "$W/calls-noop.json" > "$OUT/calls-noop-sandbox.json"
calls_clear
$MEASURE --label "agent-reissue-$ISSUE_N" --reps 1 --warmup 0 --out "$RAW" --meta n="$ISSUE_N" -- \
  "$AGENT" --config "$F/agent/config.toml" renew --force --wait 300
calls_save "$W/calls-reissue.json"
$CALLS count "$W/calls-reissue.json" --per "$ISSUE_N" > "$OUT/calls-reissue.json"

log "issuance: one certificate per process (cert-agent, certbot, lego)"
for i in $(seq 5); do
  F=$W/issue1-$i
  "$FLEET" --dir "$F" --count 1 --orders-only --base-url "$SB" --ca-file "$SB_CA" \
    --poll-interval 1 --webroot "$W/webroot"
  # Distinct names per run: the sandbox would otherwise see the same domain again.
  sed -i "s/c0.bench.test/one$i.bench.test/" "$F/agent/config.toml"
  $MEASURE --label agent-issue-1 --reps 1 --warmup 0 --out "$RAW" -- \
    "$AGENT" --config "$F/agent/config.toml" renew --wait 120
  if [ -n "$AGENT_NJ" ]; then
    "$FLEET" --dir "$F-nj" --count 1 --orders-only --base-url "$SB" --ca-file "$SB_CA" \
      --poll-interval 1 --webroot "$W/webroot"
    sed -i "s/c0.bench.test/nj$i.bench.test/" "$F-nj/agent/config.toml"
    $MEASURE --label agent-nojitter-issue-1 --reps 1 --warmup 0 --out "$RAW" -- \
      "$AGENT_NJ" --config "$F-nj/agent/config.toml" renew --wait 120
  fi
  C=$W/certbot-issue/$i; mkdir -p "$C"
  $MEASURE --label certbot-issue-1 --reps 1 --warmup 0 --out "$RAW" -- \
    certbot certonly --webroot -w "$W/acme-webroot" -d "cb$i.bench.test" --server "$ACME" \
    --config-dir "$C/config" --work-dir "$C/work" --logs-dir "$C/logs" \
    --register-unsafely-without-email --agree-tos --non-interactive --key-type ecdsa -q
  cp -r "$W/lego-account" "$W/lego-issue-$i"
  $MEASURE --label lego-issue-1 --reps 1 --warmup 0 --out "$RAW" -- \
    sh -c 'exec lego "$@" 2>/dev/null' lego "${LEGO_OPTS[@]}" --path "$W/lego-issue-$i" \
    --domains "lg$i.bench.test" run
done

fi

# --- 3. polling rounds ------------------------------------------------------------------------
if want poll; then
log "polling: $POLL_N pending certificates, poll_interval_secs = $POLL_INTERVAL"
# Validation files are looked for on a closed port: every order stays pending.
sbx -d "{\"http\": $CLOSED}" "$SB/_sandbox/dcv_ports" >/dev/null
F=$W/poll$POLL_N
"$FLEET" --dir "$F" --count "$POLL_N" --orders-only --base-url "$SB" --ca-file "$SB_CA" \
  --poll-interval "$POLL_INTERVAL" --webroot "$W/webroot"
calls_clear
set +e
# Ordering and publishing the validation files (one details call, one file and one self-check
# each) take a while; the wait leaves room for about four polling intervals after them.
"$AGENT" --config "$F/agent/config.toml" renew --wait $((POLL_INTERVAL * 4 + POLL_N / 4)) > /dev/null 2>&1
first=$?
# A second run right away (as a timer might start one): no certificate is polled early.
"$AGENT" --config "$F/agent/config.toml" renew --wait 1 > /dev/null 2>&1
second=$?
set -e
calls_save "$W/calls-poll.json"
$CALLS polling "$W/calls-poll.json" --interval "$POLL_INTERVAL" > "$OUT/calls-poll.json"
python3 - "$OUT/calls-poll.json" "$first" "$second" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); p["exit_codes"] = [int(sys.argv[2]), int(sys.argv[3])]
json.dump(p, open(sys.argv[1], "w"), indent=1)
EOF
fi

# --- 4b. daemon idle RSS (when the binary has the daemon command) -----------------------------
if want daemon && "$AGENT" run --help >/dev/null 2>&1; then
  log "daemon idle RSS with 1000 certificates"
  F=$W/fleet-daemon
  "$FLEET" --dir "$F" --count 1000 --base-url "https://127.0.0.1:$CLOSED"
  "$AGENT" --config "$F/agent/config.toml" run > "$W/daemon.log" 2>&1 &
  DPID=$!; PIDS+=($DPID)
  # The first run starts after a random delay of up to a minute; idle is after it.
  sleep 75
  grep -E 'VmRSS|VmHWM' /proc/$DPID/status | tr -s ' \t' ' ' | paste -sd ' ' > "$OUT/daemon-rss.txt" || true
  kill "$DPID" 2>/dev/null || true
fi

python3 - "$OUT/machine.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); m["load_after"] = open("/proc/loadavg").read().split()[:3]
json.dump(m, open(sys.argv[1], "w"), indent=1)
EOF
$MEASURE --summary "$RAW" > "$OUT/summary.json"
python3 "$ROOT/benches/report.py" "$OUT" > "$OUT/tables.md"
cat "$OUT/tables.md"
