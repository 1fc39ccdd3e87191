#!/usr/bin/env bash
# Takeover within the lease, measured: a three-member etcd cluster on loopback, the sandbox
# (--instant), three hosts with their own nginx, each running `cert-agent run --interval 3600`
# (no scheduled run during the bench). KILLS times (default 10), one host (in turn) starts a
# reissue (`cert-agent reissue www`, the run a daemon makes when the certificate is due) while
# the sandbox holds every validation pending (it fetches from a closed port); once the other
# hosts serve the validation file, the leader is killed with SIGKILL. Then the CA is let
# through again when a new leader runs. Reports, median and worst over the kills:
#   - kill -> lease end: etcd deletes the leader key (an `etcdctl watch` of the key);
#   - lease end -> the new leader's run takes the lead (the next put of the leader key): the
#     daemons' reaction, the takeover jitter (0-5 s) and the run's start;
#   - kill -> every host serving the new serial (TLS handshakes, openssl s_client).
# Usage: benches/fleet-takeover.sh [OUT_DIR]   (default benches/results/fleet-takeover)
#   KILLS=10 LEASE=15 (lease_ttl_secs; 15 is the default) PROFILE=release|debug, and
#   benches/fleet-lib.sh's AGENT, SANDBOX, BUILD, KEEP
# Needs etcd, etcdctl, nginx, openssl, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/fleet-takeover}
KILLS=${KILLS:-10}
LEASE=${LEASE:-15}
mkdir -p "$OUT"
source benches/fleet-lib.sh

now() { date +%s.%N; }
PREFIX=/takeover/
DOMAIN=takeover.bench.test
dirs=()
for i in 1 2 3; do
  host "$W/host$i" "host$i" "$DOMAIN" "$PREFIX" fleet "$LEASE"
  dirs+=("$W/host$i")
done
http_ports=$(for d in "${dirs[@]}"; do cat "$d/http_port"; done | paste -sd, -)
CLOSED=$(port)   # nothing listens here: the CA's checks fail and the validation stays pending
dcv_open()   { sbx -d "{\"http\": [$http_ports], \"https\": 0, \"balance\": \"all\"}" "$SB/_sandbox/dcv_ports" >/dev/null; }
dcv_closed() { sbx -d "{\"http\": $CLOSED, \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null; }

# Every change of the leader key, one line each: "TIME PUT HOST" or "TIME DELETE" (the watch
# ends with this process).
python3 -u -c '
import signal, subprocess, sys, time
watch = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
signal.signal(signal.SIGTERM, lambda *_: (watch.kill(), sys.exit(0)))
kind = None
for line in watch.stdout:
    line = line.strip()
    t = time.time()
    if line in ("PUT", "DELETE"):
        kind, at = line, t
        if line == "DELETE":
            print(f"{at:.3f} DELETE", flush=True)
    elif kind == "PUT" and not line.startswith("/"):
        print(f"{at:.3f} PUT {line}", flush=True)
        kind = None
' etcdctl --endpoints "$(IFS=,; echo "${EP[*]}")" watch "${PREFIX}leader" > "$W/leader.log" &
PIDS+=($!)

# The serial each host serves (TLS handshake), space-separated ("-": none).
served() {
  local out=() s
  for d in "${dirs[@]}"; do
    s=$(echo | timeout 5 openssl s_client -connect "127.0.0.1:$(cat "$d/https_port")" -servername "$DOMAIN" 2>/dev/null \
      | openssl x509 -noout -serial 2>/dev/null | sed 's/^serial=0*//' || true)
    out+=("${s:--}")
  done
  echo "${out[@]}"
}
reissues() { sbx "$SB/_sandbox/calls" | python3 -c '
import json, sys
print(sum(1 for c in json.load(sys.stdin) if c["method"] == "POST" and c["path"].endswith("/reissue")))'; }

# The first certificate: host1 validates alone, the others install it.
sbx -d "{\"http\": $(cat "$W/host1/http_port"), \"https\": 0}" "$SB/_sandbox/dcv_ports" >/dev/null
"$AGENT" --config "$W/host1/config.toml" renew --wait 60 >/dev/null
for i in 2 3; do "$AGENT" --config "$W/host$i/config.toml" renew >/dev/null; done
dcv_open
for i in 1 2 3; do
  "$AGENT" --config "$W/host$i/config.toml" run --interval 3600 >"$W/host$i/daemon.log" 2>&1 &
  PIDS+=($!)
done
sleep 65   # the daemons' first runs (within a minute of their start) are over: nothing due

echo "kill,killed_host,kill_to_lease_end_s,lease_end_to_new_lead_s,kill_to_all_serving_s,new_leader" > "$OUT/kills.csv"
for k in $(seq 1 "$KILLS"); do
  h=$(( (k - 1) % 3 + 1 ))
  before=$(served)
  old=${before%% *}
  dcv_closed
  sent=$(reissues)
  "$AGENT" --config "$W/host$h/config.toml" reissue www --wait 300 >"$W/reissue-$k.log" 2>&1 &
  leader_pid=$!
  # Validation pending: the reissue was sent and the other hosts serve the validation file.
  other=$(( h % 3 + 1 ))
  pending() {
    [ "$(reissues)" -gt "$sent" ] && [ -n "$(ls -A "$W/host$other/www/.well-known/pki-validation" 2>/dev/null)" ]
  }
  for _ in $(seq 300); do pending && break; sleep 0.2; done
  pending || { echo "kill $k: no pending validation on host$other" >&2; cat "$W/reissue-$k.log" >&2; exit 1; }
  sleep 1
  lines=$(wc -l < "$W/leader.log")
  kill -9 "$leader_pid"; t_kill=$(now)
  wait "$leader_pid" 2>/dev/null || true
  # The lease ends (DELETE), a daemon's run takes the lead (PUT): the CA is let through.
  ended=""; taken=""; new_leader=""
  for _ in $(seq 1200); do
    while read -r t what who; do
      [ "$what" = DELETE ] && [ -z "$ended" ] && ended=$t
      [ "$what" = PUT ] && [ -n "$ended" ] && [ -z "$taken" ] && { taken=$t; new_leader=$who; }
    done < <(tail -n +"$((lines + 1))" "$W/leader.log")
    [ -n "$taken" ] && break
    sleep 0.1
  done
  [ -n "$taken" ] || { echo "kill $k: no takeover" >&2; tail -n 20 "$W"/host*/daemon.log >&2; exit 1; }
  dcv_open
  for _ in $(seq 1200); do
    read -r a b c <<<"$(served)"
    [ "$a" != "$old" ] && [ "$a" != - ] && [ "$a" = "$b" ] && [ "$b" = "$c" ] && break
    sleep 0.1
  done
  t_all=$(now)
  [ "$a" != "$old" ] && [ "$a" = "$b" ] && [ "$b" = "$c" ] \
    || { echo "kill $k: the hosts serve $a $b $c" >&2; exit 1; }
  python3 -c "print(f'$k,host$h,{$ended - $t_kill:.3f},{$taken - $ended:.3f},{$t_all - $t_kill:.3f},$new_leader')" >> "$OUT/kills.csv"
  tail -n 1 "$OUT/kills.csv"
  sleep 3   # the new leader gives the lead up and the followers record their installs
done

grep -h "taking over" "$W"/host*/daemon.log > "$OUT/takeover-lines.txt" || true
sbx "$SB/_sandbox/calls" > "$OUT/calls.json"
python3 - "$OUT" "$LEASE" "$KILLS" "$PROFILE" <<'EOF' | tee "$OUT/summary.txt"
import csv, json, statistics, sys
out, lease, kills, profile = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = list(csv.DictReader(open(f"{out}/kills.csv")))
calls = json.load(open(f"{out}/calls.json"))
reissues = sum(1 for c in calls if c["method"] == "POST" and c["path"].endswith("/reissue"))
orders = sum(1 for c in calls if c["method"] == "POST" and c["path"].endswith("/order"))
print(f"fleet of 3 hosts, lease_ttl_secs = {lease}, {len(rows)} kills of the leader during a "
      f"pending validation ({profile} build)")
for key, what in [("kill_to_lease_end_s", "kill -> lease end (leader key deleted)"),
                  ("lease_end_to_new_lead_s", "lease end -> new leader's run takes the lead"),
                  ("kill_to_all_serving_s", "kill -> every host serving the new serial")]:
    v = [float(r[key]) for r in rows]
    print(f"  {what}: median {statistics.median(v):.3f} s, worst {max(v):.3f} s")
print(f"  new leaders: {', '.join(sorted({r['new_leader'] for r in rows}))}")
print(f"  Partner API: {orders} POST /order (the first certificate), {reissues} reissues "
      f"for {kills} kills (one per kill, none repeated by the new leader)")
EOF
