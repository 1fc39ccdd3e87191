# Shared by the fleet benches (sourced): binaries, a three-member etcd cluster on loopback, the
# sandbox, and hosts: one certificate on their own nginx (`host`), or many (`scale_host`).
# Expects `set -euo pipefail` and the repository root as the working directory. Knobs
# (environment):
#   PROFILE=debug  uses the debug binaries (no release build); default release
#   AGENT=PATH     the cert-agent binary (default: the PROFILE build; AGENT_BIN too)
#   SANDBOX=PATH   the partner-sandbox binary (default: the PROFILE build)
#   BUILD=0        builds nothing (with AGENT and SANDBOX: binaries built elsewhere)
#   KEEP=1         keeps the work directory (logs, state directories) and names it
export PATH="$PATH:/usr/sbin:/sbin"
PROFILE=${PROFILE:-release}
if [ "${BUILD:-1}" = 1 ]; then
  if [ "$PROFILE" = release ]; then
    cargo build --release --locked -q -p partner-sandbox --bin partner-sandbox
    cargo build --release --locked -q --bin cert-agent
  else
    cargo build --locked -q -p partner-sandbox --bin partner-sandbox
    cargo build --locked -q --bin cert-agent
  fi
fi
if [ -z "${AGENT:-${AGENT_BIN:-}}" ] || [ -z "${SANDBOX:-}" ]; then
  TARGET=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
fi
AGENT=${AGENT:-${AGENT_BIN:-$TARGET/$PROFILE/cert-agent}}
SANDBOX=${SANDBOX:-$TARGET/$PROFILE/partner-sandbox}

W=$(mktemp -d /tmp/fleet-bench.XXXXXX)
chmod 755 "$W"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  find "$W" -name nginx.pid 2>/dev/null | while read -r f; do kill "$(cat "$f")" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $W" >&2; else rm -rf "$W"; fi
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- etcd ------------------------------------------------------------------------------------
CLUSTER=""; ENDPOINTS=""; EP=()
declare -a CP PP
for i in 0 1 2; do CP[$i]=$(port); PP[$i]=$(port); CLUSTER+="m$i=http://127.0.0.1:${PP[$i]},"; done
CLUSTER=${CLUSTER%,}
for i in 0 1 2; do
  etcd --name "m$i" --data-dir "$W/etcd-$i" \
    --listen-client-urls "http://127.0.0.1:${CP[$i]}" --advertise-client-urls "http://127.0.0.1:${CP[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${PP[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${PP[$i]}" \
    --initial-cluster "$CLUSTER" --initial-cluster-state new --initial-cluster-token bench \
    --logger zap --log-level error >"$W/etcd-$i.log" 2>&1 &
  PIDS+=($!)
  EP+=("http://127.0.0.1:${CP[$i]}")
  ENDPOINTS+="\"http://127.0.0.1:${CP[$i]}\", "
done
ENDPOINTS=${ENDPOINTS%, }
for _ in $(seq 200); do curl -sf "${EP[0]}/health" | grep -q '"health":"true"' && break; sleep 0.1; done

# --- sandbox ---------------------------------------------------------------------------------
SB_PORT=$(port)
"$SANDBOX" serve --listen "127.0.0.1:$SB_PORT" --data "$W/sandbox" --instant >"$W/sandbox.log" 2>&1 &
PIDS+=($!)
SB=https://127.0.0.1:$SB_PORT
SB_CA=$W/sandbox/api-ca.pem
for _ in $(seq 100); do [ -f "$SB_CA" ] && curl -sf --cacert "$SB_CA" "$SB/_sandbox/clock" >/dev/null && break; sleep 0.1; done
sbx() { curl -sf --cacert "$SB_CA" "$@"; }
printf 'sandbox' > "$W/password"; chmod 600 "$W/password"
head -c 32 /dev/urandom > "$W/fleet.key"; chmod 600 "$W/fleet.key"

# --- hosts -----------------------------------------------------------------------------------
# nginx_for DIR DOMAIN: nginx on free ports (DIR/http_port, DIR/https_port) serving DIR/www
# over HTTP (the default server of its port) and a placeholder certificate (DIR/out) over
# HTTPS, started.
nginx_for() {
  local d=$1 domain=$2
  mkdir -p "$d/www" "$d/out" "$d/nginx/logs" "$d/nginx/tmp" "$d/state"
  openssl req -x509 -newkey rsa:2048 -nodes -subj "/CN=$domain" -days 2 \
    -keyout "$d/out/privkey.pem" -out "$d/out/fullchain.pem" 2>/dev/null
  local hp sp; hp=$(port); sp=$(port)
  echo "$hp" > "$d/http_port"; echo "$sp" > "$d/https_port"
  cat > "$d/nginx/nginx.conf" <<EOF
pid $d/nginx/nginx.pid;
error_log $d/nginx/logs/error.log;
events {}
http {
  access_log off;
  client_body_temp_path $d/nginx/tmp; proxy_temp_path $d/nginx/tmp; fastcgi_temp_path $d/nginx/tmp;
  uwsgi_temp_path $d/nginx/tmp; scgi_temp_path $d/nginx/tmp;
  server { listen 127.0.0.1:$hp; server_name $domain; root $d/www; }
  server { listen 127.0.0.1:$sp ssl; server_name $domain;
           ssl_certificate $d/out/fullchain.pem; ssl_certificate_key $d/out/privkey.pem; root $d/www; }
}
EOF
  nginx -p "$d/nginx/" -c "$d/nginx/nginx.conf" -e "$d/nginx/logs/error.log"
}

# agent_config DIR: DIR/config.toml with [api] (the sandbox) and [agent] (DIR/state).
agent_config() {
  local d=$1
  mkdir -p "$d/state"
  cat > "$d/config.toml" <<EOF
[api]
base_url = "$SB"
login = "partner@sandbox.test"
password_file = "$W/password"
ca_file = "$SB_CA"

# The bench's names are in no DNS: the sandbox reaches the hosts by port, and no CAA or
# DNSSEC answer is asked for them (10,000 questions to the machine's resolver otherwise).
[preflight]
http = false
caa = false
dnssec = false

# Last: the callers append [agent] keys.
[agent]
state_dir = "$d/state"
allow_orders = true
poll_interval_secs = 2
EOF
}

# fleet_config DIR NAME PREFIX [LEASE]: appends [fleet] (the cluster above, this bench's key).
fleet_config() {
  local d=$1 name=$2 prefix=$3 lease=${4:-}
  cat >> "$d/config.toml" <<EOF

[fleet]
endpoints = [$ENDPOINTS]
# The cluster listens on loopback without TLS; no etcd user.
insecure_plaintext = true
host = "$name"
prefix = "$prefix"
secret_file = "$W/fleet.key"
EOF
  [ -z "$lease" ] || echo "lease_ttl_secs = $lease" >> "$d/config.toml"
}

# nginx_argv DIR: the argv of DIR's nginx (TOML array items, without the action).
nginx_argv() {
  local d=$1
  echo "\"nginx\", \"-p\", \"$d/nginx/\", \"-c\", \"$d/nginx/nginx.conf\", \"-e\", \"$d/nginx/logs/error.log\""
}

# host DIR NAME DOMAIN PREFIX [fleet [LEASE]]: nginx on free ports with a placeholder, and a
# config of one certificate "www" (with [fleet] when asked, lease_ttl_secs = LEASE when given).
host() {
  local d=$1 name=$2 domain=$3 prefix=$4 fleet=${5:-} lease=${6:-}
  nginx_for "$d" "$domain"
  agent_config "$d"
  cat >> "$d/config.toml" <<EOF

[[certificate]]
name = "www"
domains = ["$domain"]
product_id = 1101
country = "DE"
region = "Berlin"
city = "Berlin"
webroot = "$d/www"
server = "nginx"
fullchain_path = "$d/out/fullchain.pem"
key_path = "$d/out/privkey.pem"
configtest_command = [$(nginx_argv "$d"), "-t"]
reload_command = [$(nginx_argv "$d"), "-s", "reload"]
verify_address = "127.0.0.1:$(cat "$d/https_port")"
EOF
  [ -z "$fleet" ] || fleet_config "$d" "$name" "$prefix" "$lease"
}

# The reload wrapper of scale_host's hosts: one line per reload in DIR/reloads, then the web
# server's own reload (when its argv follows).
cat > "$W/reload" <<'EOF'
#!/bin/sh
d=$1; shift
date +%s.%N >> "$d/reloads"
[ $# -eq 0 ] || exec "$@"
EOF
chmod 755 "$W/reload"

# scale_host DIR NAME PREFIX C KIND DOMAIN [LEASE]: a host of C certificates c0..c(C-1) for
# cI.DOMAIN (c0 in out/fullchain.pem, nginx's; the others in out/cI.pem; every file in
# DIR/out, none in the default /etc/ssl/cert-agent/NAME/, which the hosts on this machine
# would share), KIND nginx (its own nginx, started: configtest, reload and c0's verification
# against it) or none (files only); every reload through $W/reload (counted in DIR/reloads);
# [agent] concurrency = CONCURRENCY when set, its metrics file DIR/metrics.prom; [fleet] with
# lease_ttl_secs = LEASE when given.
scale_host() {
  local d=$1 name=$2 prefix=$3 c=$4 kind=$5 domain_of=$6 lease=${7:-}
  if [ "$kind" = nginx ]; then nginx_for "$d" "c0.$domain_of"; else mkdir -p "$d/www" "$d/out"; fi
  agent_config "$d"
  [ -z "${CONCURRENCY:-}" ] || echo "concurrency = $CONCURRENCY" >> "$d/config.toml"
  echo "metrics_file = \"$d/metrics.prom\"" >> "$d/config.toml"
  fleet_config "$d" "$name" "$prefix" "$lease"
  local argv="" verify=""
  if [ "$kind" = nginx ]; then argv=", $(nginx_argv "$d")"; verify="127.0.0.1:$(cat "$d/https_port")"; fi
  python3 - "$d" "$c" "$kind" "$domain_of" "$W/reload" "$argv" "$verify" >> "$d/config.toml" <<'EOF'
import sys
d, c, kind, dom, wrap, argv, verify = sys.argv[1:]
out = []
reload_args = ', "-s", "reload"' if argv else ""
for i in range(int(c)):
    pem, key = (f"{d}/out/fullchain.pem", f"{d}/out/privkey.pem") if i == 0 else (f"{d}/out/c{i}.pem", f"{d}/out/c{i}.key")
    lines = [
        "", "[[certificate]]", f'name = "c{i}"', f'domains = ["c{i}.{dom}"]', "product_id = 1101",
        'country = "DE"', 'region = "Berlin"', 'city = "Berlin"', f'webroot = "{d}/www"',
        f'server = "{kind}"', f'fullchain_path = "{pem}"', f'key_path = "{key}"',
        f'cert_path = "{d}/out/c{i}.crt"', f'chain_path = "{d}/out/c{i}.chain"',
        f'reload_command = ["{wrap}", "{d}"{argv}{reload_args}]',
    ]
    if kind == "nginx":
        lines.append(f'configtest_command = [{argv[2:]}, "-t"]')
        lines.append(f'verify_address = "{verify if i == 0 else ""}"')
    out.extend(lines)
print("\n".join(out))
EOF
}

record() { python3 - "$1" <<'EOF'
import json, sys, datetime
try:
    r = json.load(open(sys.argv[1]))["installed"]
    t = datetime.datetime.fromisoformat(r["installed_at"].replace("Z", "+00:00")).timestamp()
    print(r["serial"].lstrip("0").upper(), f"{t:.3f}")
except Exception:
    print("- 0")
EOF
}

# --- etcd measures (the members' /metrics; etcdctl) --------------------------------------------
# etcd_messages: the gRPC messages received by every member, by method, as sorted "METHOD
# COUNT" lines (every request, and every message on a stream: a watch's progress requests, a
# lease's renewals).
etcd_messages() {
  for e in "${EP[@]}"; do curl -sf "$e/metrics"; done |
    awk -F'[{}]' '/^grpc_server_msg_received_total/ {
        split($2, l, ","); for (i in l) if (l[i] ~ /^grpc_method=/) { m = l[i]; gsub(/grpc_method=|"/, "", m) }
        n = split($3, v, " "); s[m] += v[n] }
      END { for (m in s) printf "%s %d\n", m, s[m] }' | sort
}
# etcd_sent_bytes: the bytes every member sent its gRPC clients (answers, watch events).
etcd_sent_bytes() {
  for e in "${EP[@]}"; do curl -sf "$e/metrics"; done |
    awk '/^etcd_network_client_grpc_sent_bytes_total / {s += $2} END {printf "%d\n", s}'
}
# msg_total FILE: the sum of an etcd_messages file.
msg_total() { awk '{s += $2} END {printf "%d", s}' "$1"; }
# msg_by_method BEFORE AFTER: "METHOD N, " for every method that received messages between.
msg_by_method() { join -a2 -e0 -o 0,1.2,2.2 "$1" "$2" | awk '$3 - $2 > 0 {printf "%s%s %d", n++ ? ", " : "", $1, $3 - $2}'; }
# etcd_db: "TOTAL IN_USE", the database size in bytes of the largest member and the size in
# use (etcd 3.4: dbSizeInUse is not in `endpoint status`; the metric is).
etcd_db() {
  local e total=0 use=0 t u
  for e in "${EP[@]}"; do
    read -r t u < <(curl -sf "$e/metrics" | awk '
      /^etcd_mvcc_db_total_size_in_bytes / {t = $2} /^etcd_mvcc_db_total_size_in_use_in_bytes / {u = $2}
      END {printf "%d %d\n", t, u}')
    [ "$t" -gt "$total" ] && total=$t
    [ "$u" -gt "$use" ] && use=$u
  done
  echo "$total $use"
}
# etcd_census OUTFILE: the keys under the fleet's prefix by kind (the path with the host's and
# the certificate's names taken out: `certs/*/state`, `hosts/*/proof/*`), each kind's count
# and its bytes of key and value as etcd holds them (sealed), one line per kind.
etcd_census() {
  ETCDCTL_API=3 etcdctl --endpoints "${EP[0]}" get --prefix "$PREFIX" -w json |
    python3 -c '
import base64, collections, json, re, sys
prefix = sys.argv[1]
kinds = collections.OrderedDict()
for kv in json.load(sys.stdin).get("kvs", []):
    key = base64.b64decode(kv["key"]).decode("utf-8", "replace")[len(prefix):]
    value = base64.b64decode(kv.get("value", ""))
    p = key.split("/")
    if p[0] == "certs" and len(p) == 3: kind = "certs/*/" + p[2]
    elif p[0] == "hosts" and len(p) == 3: kind = "hosts/*/" + p[2]
    elif p[0] == "hosts" and len(p) == 4: kind = "hosts/*/" + p[2] + "/*"
    elif p[0] in ("chains", "manifest", "dcv", "acme") and len(p) >= 2: kind = p[0] + "/*"
    else: kind = key
    n, k, v = kinds.get(kind, (0, 0, 0))
    kinds[kind] = (n + 1, k + len(key) + len(prefix), v + len(value))
print("kind count key_bytes value_bytes value_mean")
for kind, (n, k, v) in sorted(kinds.items()):
    print(f"{kind} {n} {k} {v} {v / n:.0f}")
' "$PREFIX" > "$1"
}
# etcd_compact_defrag: the history (every superseded value) compacted away at the current
# revision, then every member's file defragmented. Prints the revision.
etcd_compact_defrag() {
  local eps rev; eps=$(IFS=,; echo "${EP[*]}")
  rev=$(ETCDCTL_API=3 etcdctl --endpoints "${EP[0]}" endpoint status -w json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])')
  # --physical: each member has freed the compacted revisions before it is defragmented (a
  # member defragmented before that keeps them: its file was found twice the others').
  ETCDCTL_API=3 etcdctl --endpoints "$eps" compact --physical "$rev" >/dev/null
  ETCDCTL_API=3 etcdctl --endpoints "$eps" --command-timeout 120s defrag >/dev/null
  echo "$rev"
}

# crl_lead_due DIR: the next `renew` on DIR takes the lead as a scheduled run does once per
# `[revocation] refresh_secs` to record the CRLs' verdicts (a run with nothing else due no
# longer leads): the times of its last lead and of its first run without one are set back.
crl_lead_due() {
  python3 - "$1/state/fleet-leads.json" <<'PY'
import json, os, sys
f = sys.argv[1]
try:
    d = json.load(open(f))
except (OSError, ValueError):
    sys.exit(0)
for k in ("led_at", "idle_since"):
    if d.get(k) is not None:
        d[k] = 0
tmp = f + ".tmp"
with open(tmp, "w") as o:
    json.dump(d, o)
os.chmod(tmp, 0o600)
os.rename(tmp, f)
PY
}
