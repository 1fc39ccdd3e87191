#!/usr/bin/env bash
# The no-op `cert-agent renew` on one host at 100, 1,000 and 10,000 installed certificates,
# nothing due (docs/performance.md, "One host at scale"): wall time, CPU and peak RSS, median
# (min-max) of several runs, for each layout of the configuration (one file; one included file
# per certificate) and each path of the run:
#   - summary: the due summary (state_dir/due.json) in place, as every run after the first:
#              the configuration is not parsed (its sources re-listed and digested);
#   - full:    the summary removed before each run (`sh -c 'rm -f …; exec cert-agent …'`),
#              so the run reads every record as it did before the summary existed.
# certbot renews the same certificates side by side at 1,000 (and at every size up to
# BENCH_CERTBOT_MAX), laid out as certbot 2.x writes them; installed with apt-get if missing.
# The API is a closed port on 127.0.0.1: any call would fail the run.
#
#   benches/onehost-scale.sh
#   SIZES="100 1000" REPS=11 benches/onehost-scale.sh
#
# Knobs (environment): SIZES (100 1000 10000), REPS (cert-agent runs per figure, 21),
# REPS_CERTBOT (5), BENCH_CERTBOT_MAX (1000), LAYOUTS (one included), OUT
# (benches/results/onehost-scale), AGENT (a cert-agent binary to measure instead of the
# release build), FLEET (the bench_fleet example that lays out the host; with AGENT and FLEET
# both given nothing is built), BENCH_KEEP=1 keeps the temporary directory.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

SIZES=${SIZES:-"100 1000 10000"}
REPS=${REPS:-21}
REPS_CERTBOT=${REPS_CERTBOT:-5}
CERTBOT_MAX=${BENCH_CERTBOT_MAX:-1000}
LAYOUTS=${LAYOUTS:-"one included"}
OUT=${OUT:-$ROOT/benches/results/onehost-scale}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

log() { printf '\n== %s\n' "$*" >&2; }

need=()
command -v certbot >/dev/null || need+=(certbot)
[ -x /usr/bin/time ] || need+=(time)
command -v python3 >/dev/null || need+=(python3)
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]}"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  ($SUDO systemctl disable --now certbot.timer 2>/dev/null || true) >/dev/null 2>&1
fi

if [ -z "${AGENT:-}" ] || [ -z "${FLEET:-}" ]; then
  log "building (release)"
  cargo build --release --locked -q --bin cert-agent --example bench_fleet
fi
AGENT=${AGENT:-$TARGET/release/cert-agent}
FLEET=${FLEET:-$TARGET/release/examples/bench_fleet}
MEASURE="python3 $ROOT/benches/measure.py"

mkdir -p "$OUT"
RAW=$OUT/runs.jsonl
: > "$RAW"
W=$(mktemp -d /tmp/cert-agent-onehost.XXXXXX)
cleanup() { [ "${BENCH_KEEP:-0}" = 1 ] && echo "kept $W" >&2 || rm -rf "$W"; }
trap cleanup EXIT

python3 - "$OUT/machine.json" "$AGENT" <<'EOF'
import json, os, platform, subprocess, sys
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception: return ""
json.dump({
  "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
  "cores": os.cpu_count(),
  "kernel": platform.release(),
  "os": sh(". /etc/os-release; echo $PRETTY_NAME"),
  "certbot": sh("certbot --version 2>&1"),
  "cert_agent": sh(sys.argv[2] + " --version"),
  "commit": sh("git rev-parse --short HEAD"),
  "load_before": open("/proc/loadavg").read().split()[:3],
  "date": sh("date -u +%Y-%m-%dT%H:%M:%SZ"),
}, open(sys.argv[1], "w"), indent=1)
EOF

CLOSED=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
for N in $SIZES; do
  for L in $LAYOUTS; do
    log "N=$N, layout $L"
    F=$W/$L-$N
    extra=()
    [ "$L" = included ] && extra+=(--fragments)
    certbot=()
    [ "$L" = one ] && [ "$N" -le "$CERTBOT_MAX" ] && certbot+=(--certbot)
    "$FLEET" --dir "$F" --count "$N" --base-url "https://127.0.0.1:$CLOSED" "${extra[@]}" "${certbot[@]}"
    CONF=$F/agent/config.toml
    STATE=$F/agent/state
    # Every certificate installed and quiet (`status`), then two runs: the first keeps the
    # included files' certificates and writes the summary, the second uses both.
    "$AGENT" --config "$CONF" status --json > "$F/status.json"
    python3 - "$F/status.json" "$N" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == int(sys.argv[2]), f"status lists {len(rows)} certificates"
bad = [r for r in rows if r["state"] != "installed" or not r["next_action"].startswith("do nothing")]
assert not bad, f"not installed or due: {bad[:3]}"
EOF
    # The first run writes each record once (what the CRL check saw); records changed within
    # the last second are not kept, so the second run, two seconds later, keeps them all.
    "$AGENT" --config "$CONF" renew > /dev/null
    sleep 2
    "$AGENT" --config "$CONF" renew > /dev/null
    "$AGENT" --config "$CONF" -v renew 2> "$F/verbose.txt" > /dev/null
    grep -q "due summary: $N of $N certificate(s) quiet" "$F/verbose.txt" \
      || { echo "the summary did not hold every certificate at N=$N ($L)" >&2; grep "due summary" "$F/verbose.txt" >&2; exit 1; }
    grep -q "the configuration not parsed" "$F/verbose.txt" \
      || { echo "the configuration was parsed at N=$N ($L)" >&2; grep "due summary" "$F/verbose.txt" >&2; exit 1; }
    $MEASURE --label "summary-$L-$N" --reps "$REPS" --warmup 2 --out "$RAW" \
      --meta n="$N" --meta layout="$L" --meta path=summary -- "$AGENT" --config "$CONF" renew
    /usr/bin/time -v "$AGENT" --config "$CONF" renew > /dev/null 2> "$OUT/time-v-summary-$L-$N.txt"
    $MEASURE --label "full-$L-$N" --reps "$REPS" --warmup 2 --out "$RAW" \
      --meta n="$N" --meta layout="$L" --meta path=full -- \
      sh -c 'rm -f "$1/due.json"; exec "$2" --config "$3" renew' sh "$STATE" "$AGENT" "$CONF"
    if [ "${#certbot[@]}" -gt 0 ]; then
      C=$F/certbot
      $MEASURE --label "certbot-$N" --reps "$REPS_CERTBOT" --out "$RAW" --meta n="$N" -- \
        certbot renew --config-dir "$C/config" --work-dir "$C/work" --logs-dir "$C/logs" \
        --no-random-sleep-on-renew -q
    fi
    rm -rf "$F"
  done
done

$MEASURE --summary "$RAW" > "$OUT/summary.json"
python3 - "$OUT/summary.json" "$OUT/machine.json" > "$OUT/tables.md" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1])); m = json.load(open(sys.argv[2]))
def ms(v): return f"{v*1e3:.1f} ms" if v < 1 else f"{v:.2f} s"
def fig(label, k="wall_s"):
    x = s[label][k]; return f"{ms(x['median'])} ({ms(x['min'])}–{ms(x['max'])})"
def mib(label): return f"{s[label]['maxrss_kb']['median']/1024:.1f} MiB"
print(f"Machine: {m['cpu']}, {m['cores']} cores, {m['os']}, kernel {m['kernel']}; {m['cert_agent']} ({m['commit']}); {m['certbot']}; {m['date']}, load before {' '.join(m['load_before'])}.\n")
print("| N | layout | path | wall, median (min–max) | CPU | peak RSS |")
print("|---:|---|---|---|---|---|")
for label, v in s.items():
    meta = v["meta"]
    if "path" not in meta: continue
    print(f"| {meta['n']} | {meta['layout']} | {meta['path']} | {fig(label)} | {ms(v['cpu_s']['median'])} | {mib(label)} |")
for label, v in s.items():
    if not label.startswith("certbot-"): continue
    n = v["meta"]["n"]
    print(f"\ncertbot renew, N = {n}: {fig(label)}, CPU {ms(v['cpu_s']['median'])}, peak RSS {mib(label)}")
    for lay in ("one", "included"):
        for path in ("summary", "full"):
            l = f"{path}-{lay}-{n}"
            if l in s:
                r = v["wall_s"]["median"] / s[l]["wall_s"]["median"]
                c = v["cpu_s"]["median"] / s[l]["cpu_s"]["median"]
                print(f"- certbot ÷ cert-agent ({lay}, {path}): **{c:.0f}×** in CPU, {r:.0f}× in wall time")
EOF
cat "$OUT/tables.md"
