#!/usr/bin/env bash
# One host issuing many certificates in one run under the Partner API's 5-minute polling rule
# (`poll_interval_secs = 300`): N new orders against the sandbox (`--instant`: the CA issues
# as soon as the validation file is fetched), then `cert-agent renew` — wall time, peak RSS,
# and the sandbox's call log by endpoint. Binds 127.0.0.1 only; a temporary directory is
# removed at the end (BENCH_KEEP=1 keeps it). BENCH_CONCURRENCY=N sets `[agent] concurrency`.
#
#   benches/issue-scale.sh              # N = 1000
#   BENCH_ISSUE_N=100 benches/issue-scale.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
N=${BENCH_ISSUE_N:-1000}
POLL=${BENCH_POLL_INTERVAL:-300}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
log() { printf '\n== %s\n' "$*" >&2; }

cargo build --release --locked -q --bin cert-agent
cargo build --release --locked -q -p partner-sandbox --bin partner-sandbox
cargo build --release --locked -q --example bench_fleet
AGENT=$TARGET/release/cert-agent
SANDBOX=$TARGET/release/partner-sandbox
FLEET=$TARGET/release/examples/bench_fleet

W=$(mktemp -d /tmp/cert-agent-issue.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${BENCH_KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

SB_PORT=$(free_port); DCV_PORT=$(free_port)
mkdir -p "$W/webroot"
"$SANDBOX" serve --listen "127.0.0.1:$SB_PORT" --data "$W/sandbox" --instant \
  --dcv-http-port "$DCV_PORT" >"$W/sandbox.log" 2>&1 &
PIDS+=($!)
# The validation files are served by nginx when there is one (the sandbox's validator fetches
# every file at once), else by Python's one-threaded server (slower: the CA's side then bounds
# the run's time).
if command -v nginx >/dev/null; then
  mkdir -p "$W/nginx"
  cat >"$W/nginx.conf" <<NGINX
$( [ "$(id -u)" -eq 0 ] && echo 'user root;' )
worker_processes 2;
pid $W/nginx.pid;
error_log $W/nginx/error.log;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  server { listen 127.0.0.1:$DCV_PORT; root $W/webroot; }
}
NGINX
  nginx -c "$W/nginx.conf" -p "$W/nginx" >/dev/null 2>&1 &
else
  python3 -m http.server "$DCV_PORT" --bind 127.0.0.1 --directory "$W/webroot" >/dev/null 2>&1 &
fi
PIDS+=($!)
SB=https://127.0.0.1:$SB_PORT
SB_CA=$W/sandbox/api-ca.pem
for _ in $(seq 100); do [ -f "$SB_CA" ] && curl -sf --cacert "$SB_CA" "$SB/_sandbox/clock" >/dev/null && break; sleep 0.1; done

F=$W/fleet
"$FLEET" --dir "$F" --count "$N" --orders-only --base-url "$SB" --ca-file "$SB_CA" \
  --poll-interval "$POLL" --webroot "$W/webroot"
# The names are the benchmark's own (no DNS): the pre-flight's DNS checks are left out, as
# the HTTP one is (bench_fleet), so that the figure is the agent's and the API's.
sed -i 's/^http = false$/http = false\ncaa = false\ndnssec = false/' "$F/agent/config.toml"
# BENCH_CONCURRENCY: `[agent] concurrency` (default: the agent's, 4).
if [ -n "${BENCH_CONCURRENCY:-}" ]; then
  sed -i "s/^\[agent\]$/[agent]\nconcurrency = $BENCH_CONCURRENCY/" "$F/agent/config.toml"
fi
curl -sf --cacert "$SB_CA" -X POST "$SB/_sandbox/calls/clear" >/dev/null
log "issuing $N certificates in one run (poll_interval_secs = $POLL)"
start=$(date +%s.%N); date -u +%H:%M:%S.%N >&2
/usr/bin/time -f '%M' -o "$W/rss" ${BENCH_WRAP:-} "$AGENT" --config "$F/agent/config.toml" --json renew --wait 900 \
  >"$W/run.json" 2>"$W/run.err" || echo "exit $?" >&2
end=$(date +%s.%N); date -u +%H:%M:%S.%N >&2
curl -sf --cacert "$SB_CA" "$SB/_sandbox/calls" >"$W/calls.json"
python3 - "$W/run.json" "$W/calls.json" "$start" "$end" "$W/rss" "$N" <<'PY'
import json, sys, collections, re
run, calls, start, end, rss, n = sys.argv[1:]
report = json.load(open(run))
kinds = collections.Counter(c["outcome"] for c in report["certificates"])
log = json.load(open(calls))
log = log.get("calls", log) if isinstance(log, dict) else log
by = collections.Counter()
for c in log:
    path = re.sub(r"/\d+", "/{id}", c["path"])
    by[f'{c["method"]} {path}'] += 1
print(f"certificates: {n}; outcomes: {dict(kinds)}")
print(f"wall time: {float(end) - float(start):.2f} s; peak RSS: {int(open(rss).read().split()[-1]) / 1024:.1f} MiB")
print(f"calls: {sum(by.values())} ({sum(by.values()) / int(n):.2f} per certificate)")
for k, v in sorted(by.items(), key=lambda kv: -kv[1]):
    print(f"  {v:6d}  {k}")
PY
