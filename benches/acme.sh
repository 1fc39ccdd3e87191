#!/usr/bin/env bash
# cert-agent as an ACME client, side by side with certbot and lego against the same Pebble in
# one run: issuing N certificates (wall time, CPU, peak RSS, requests Pebble answered), and
# `renew` with nothing due over M ACME certificates (requests to the CA must be 0). Installs
# certbot, lego, pebble and GNU time from Debian where missing (as root). Binds 127.0.0.1 only;
# everything lives in a temporary directory removed at the end (BENCH_KEEP=1 keeps it).
#
#   benches/acme.sh                          # N=100 issued, M=1000 for the no-op
#   BENCH_ISSUE_N=20 BENCH_NOOP_M=200 benches/acme.sh
#
# Knobs: BENCH_ISSUE_N (100), BENCH_NOOP_M (1000), BENCH_REPS (cert-agent no-op runs, 15),
# BENCH_REPS_CERTBOT (certbot no-op runs, 3), BENCH_CONCURRENCY (cert-agent's
# agent.concurrency, 8), BENCH_OUT (benches/results). Results: $OUT/acme-runs.jsonl (every
# run), $OUT/acme-summary.json (the table of docs/performance.md).
#
# Pebble runs with PEBBLE_VA_ALWAYS_VALID=1 (every challenge counts as answered, for every
# client alike: the figures are the clients' own cost, not a validation's) and
# PEBBLE_VA_NOSLEEP=1. certbot and lego are run the way they are used, one process per
# certificate; cert-agent issues every configured certificate in one `renew`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

ISSUE_N=${BENCH_ISSUE_N:-100}
NOOP_M=${BENCH_NOOP_M:-1000}
REPS=${BENCH_REPS:-15}
REPS_CERTBOT=${BENCH_REPS_CERTBOT:-3}
CONCURRENCY=${BENCH_CONCURRENCY:-8}
OUT=${BENCH_OUT:-$ROOT/benches/results}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

log() { printf '\n== %s\n' "$*" >&2; }

need=()
command -v certbot >/dev/null || need+=(certbot)
command -v lego >/dev/null || need+=(lego)
command -v pebble >/dev/null || need+=(pebble)
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]}"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  ($SUDO systemctl disable --now certbot.timer 2>/dev/null || true) >/dev/null 2>&1
fi

log "building (release)"
cargo build --release --locked -q --bin cert-agent
cargo build --release --locked -q --example bench_fleet
AGENT=$TARGET/release/cert-agent
FLEET=$TARGET/release/examples/bench_fleet
MEASURE="python3 $ROOT/benches/measure.py"

mkdir -p "$OUT"
RAW=$OUT/acme-runs.jsonl
: > "$RAW"
W=$(mktemp -d /tmp/cert-agent-acme-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ "${BENCH_KEEP:-0}" = 1 ] && echo "kept $W" >&2 || rm -rf "$W"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- Pebble -----------------------------------------------------------------------------------
PB=$W/pebble; mkdir -p "$PB" "$W/webroot"
PB_PORT=$(free_port); PB_MGMT=$(free_port); CLOSED=$(free_port)
# A CA and a server certificate signed by it (rustls refuses a CA certificate as a server's).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$PB/ca.key" \
  -out "$PB/ca.pem" -days 30 -subj /CN=bench-ca 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$PB/key.pem" \
  -out "$PB/server.csr" -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > "$PB/ext.cnf"
openssl x509 -req -in "$PB/server.csr" -CA "$PB/ca.pem" -CAkey "$PB/ca.key" -CAcreateserial \
  -out "$PB/cert.pem" -days 30 -extfile "$PB/ext.cnf" 2>/dev/null
cat > "$PB/config.json" <<EOF
{"pebble": {"listenAddress": "127.0.0.1:$PB_PORT", "managementListenAddress": "127.0.0.1:$PB_MGMT",
 "certificate": "$PB/cert.pem", "privateKey": "$PB/key.pem", "httpPort": $CLOSED, "tlsPort": $CLOSED,
 "ocspResponderURL": "", "externalAccountBindingRequired": false}}
EOF
PEBBLE_VA_NOSLEEP=1 PEBBLE_VA_ALWAYS_VALID=1 PEBBLE_WFE_NONCEREJECT=0 \
  pebble -config "$PB/config.json" >"$PB/log" 2>&1 &
PIDS+=($!)
ACME=https://127.0.0.1:$PB_PORT/dir
for _ in $(seq 50); do curl -sf --cacert "$PB/ca.pem" "$ACME" >/dev/null && break; sleep 0.2; done
export LEGO_CA_CERTIFICATES=$PB/ca.pem REQUESTS_CA_BUNDLE=$PB/ca.pem
# Requests Pebble answered so far (one log line per request).
requests() { grep -c -- ' -> calling handler()' "$PB/log" || true; }
declare -A REQ

# cert-agent's configuration: M certificates of the ACME CA `pebble`, files only.
agent_config() { # DIR COUNT PREFIX
  local dir=$1 count=$2 prefix=$3
  mkdir -p "$dir/state" "$dir/out"
  {
    printf '[agent]\nstate_dir = "%s/state"\nconcurrency = %s\n\n[preflight]\nhttp = false\n\n' "$dir" "$CONCURRENCY"
    printf '[acme.pebble]\ndirectory = "%s"\ncontact = "bench@bench.test"\nca_file = "%s"\n\n' "$ACME" "$PB/ca.pem"
    printf '[defaults]\nissuer = "pebble"\nwebroot = "%s"\nserver = "none"\n' "$W/webroot"
    for i in $(seq 0 $((count - 1))); do
      printf '\n[[certificate]]\nname = "%s%d"\ndomains = ["%s%d.bench.test"]\n' "$prefix" "$i" "$prefix" "$i"
      printf 'fullchain_path = "%s/out/%s%d.pem"\nkey_path = "%s/out/%s%d.key"\n' "$dir" "$prefix" "$i" "$dir" "$prefix" "$i"
    done
  } > "$dir/config.toml"
}

# --- 1. issuing N certificates ----------------------------------------------------------------
log "issuing $ISSUE_N certificates: cert-agent (one run)"
A=$W/agent-issue
agent_config "$A" "$ISSUE_N" a
before=$(requests)
$MEASURE --label "acme-agent-issue-$ISSUE_N" --reps 1 --warmup 0 --out "$RAW" --meta n="$ISSUE_N" -- \
  "$AGENT" --config "$A/config.toml" renew --wait 600
REQ[agent]=$(( $(requests) - before ))
issued=$(ls "$A/out"/*.pem | wc -l)
[ "$issued" -eq "$ISSUE_N" ] || { echo "cert-agent installed $issued of $ISSUE_N" >&2; exit 1; }

log "issuing $ISSUE_N certificates: certbot (one process each)"
C=$W/certbot
before=$(requests)
$MEASURE --label "acme-certbot-issue-$ISSUE_N" --reps 1 --warmup 0 --out "$RAW" --meta n="$ISSUE_N" -- \
  sh -c 'for i in $(seq 0 $(('"$ISSUE_N"' - 1))); do
           certbot certonly --webroot -w "'"$W/webroot"'" -d "c$i.bench.test" --server "'"$ACME"'" \
             --config-dir "'"$C"'/config" --work-dir "'"$C"'/work" --logs-dir "'"$C"'/logs" \
             --register-unsafely-without-email --agree-tos --non-interactive --key-type ecdsa -q || exit 1
         done'
REQ[certbot]=$(( $(requests) - before ))

log "issuing $ISSUE_N certificates: lego (one process each)"
L=$W/lego
LEGO_OPTS=(--server "$ACME" --email bench@bench.test --accept-tos --http --http.webroot "$W/webroot" --key-type ec256 --path "$L")
before=$(requests)
$MEASURE --label "acme-lego-issue-$ISSUE_N" --reps 1 --warmup 0 --out "$RAW" --meta n="$ISSUE_N" -- \
  sh -c 'for i in $(seq 0 $(('"$ISSUE_N"' - 1))); do
           lego "$@" --domains "l$i.bench.test" run 2>/dev/null >/dev/null || exit 1
         done' lego "${LEGO_OPTS[@]}"
REQ[lego]=$(( $(requests) - before ))

# --- 2. renew with nothing due over M ACME certificates ---------------------------------------
log "no-op renew over $NOOP_M ACME certificates"
B=$W/agent-noop
agent_config "$B" "$NOOP_M" n
"$AGENT" --config "$B/config.toml" renew --wait 1200 > /dev/null
# The run after issuance asks each certificate's renewal window once (Pebble offers none).
"$AGENT" --config "$B/config.toml" renew > /dev/null
before=$(requests)
$MEASURE --label "acme-agent-noop-$NOOP_M" --reps "$REPS" --warmup 2 --out "$RAW" --meta n="$NOOP_M" -- \
  "$AGENT" --config "$B/config.toml" renew
REQ[noop]=$(( $(requests) - before ))

# certbot's own layout of M lineages, none due (as benches/run.sh makes it).
F=$W/fleet$NOOP_M
"$FLEET" --dir "$F" --count "$NOOP_M" --certbot --base-url "https://127.0.0.1:$CLOSED" > /dev/null
$MEASURE --label "acme-certbot-noop-$NOOP_M" --reps "$REPS_CERTBOT" --out "$RAW" --meta n="$NOOP_M" -- \
  certbot renew --config-dir "$F/certbot/config" --work-dir "$F/certbot/work" \
  --logs-dir "$F/certbot/logs" --no-random-sleep-on-renew -q

# --- summary ----------------------------------------------------------------------------------
python3 - "$RAW" "$OUT/acme-summary.json" "$ISSUE_N" "$NOOP_M" \
  "${REQ[agent]}" "${REQ[certbot]}" "${REQ[lego]}" "${REQ[noop]}" <<'EOF'
import json, statistics, sys
raw, out, n, m = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
req = dict(zip(["agent", "certbot", "lego", "noop"], map(int, sys.argv[5:9])))
runs = [json.loads(l) for l in open(raw)]
def med(label, key):
    v = [r[key] for r in runs if r["label"] == label]
    return statistics.median(v) if v else None
s = {"issue_n": n, "noop_m": m}
for tool in ["agent", "certbot", "lego"]:
    label = f"acme-{tool}-issue-{n}"
    s[f"issue_{tool}"] = {"wall_s": med(label, "wall_s"), "cpu_s": (med(label, "user_s") or 0) + (med(label, "sys_s") or 0),
                          "max_rss_kb": med(label, "maxrss_kb"), "requests": req[tool]}
for tool in ["agent", "certbot"]:
    label = f"acme-{tool}-noop-{m}"
    s[f"noop_{tool}"] = {"wall_s": med(label, "wall_s"), "cpu_s": (med(label, "user_s") or 0) + (med(label, "sys_s") or 0),
                         "max_rss_kb": med(label, "maxrss_kb")}
s["noop_agent"]["requests"] = req["noop"]
a, c, l = s["issue_agent"]["wall_s"], s["issue_certbot"]["wall_s"], s["issue_lego"]["wall_s"]
s["issue_vs_certbot"] = round(c / a, 1)
s["issue_vs_lego"] = round(l / a, 1)
s["noop_vs_certbot"] = round(s["noop_certbot"]["wall_s"] / s["noop_agent"]["wall_s"], 1)
json.dump(s, open(out, "w"), indent=1)
print(json.dumps(s, indent=1))
EOF
