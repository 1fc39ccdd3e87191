#!/usr/bin/env bash
# Onboarding at scale, measured:
#   - `cert-agent discover` over N virtual hosts (default 1000): an `nginx -T` dump of N sites
#     (a port-80 server with the validation location and a TLS server each, one file per site
#     under sites-enabled) and an `apachectl -S` listing of N `<VirtualHost>` files, every site
#     with its own certificate and key on disk (discover reads both);
#   - the no-op `renew` over N installed certificates in one configuration file against the same
#     N certificates spread over N included files (`[agent] include`), runs alternating; the
#     latter also right after a change (its kept checked certificates removed before each run).
# Wall time, CPU and peak RSS per run from benches/measure.py; results in OUT (default
# benches/results/onboarding): runs.jsonl (every run), summary.json (median, min, max).
# Usage: benches/onboarding.sh [OUT_DIR]   (N=1000 REPS=20 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/onboarding}
N=${N:-1000}
REPS=${REPS:-20}
mkdir -p "$OUT"
cargo build --release --locked -q --bin cert-agent --example bench_fleet
TARGET=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
AGENT=$TARGET/release/cert-agent
FLEET=$TARGET/release/examples/bench_fleet
MEASURE="python3 benches/measure.py"
W=$(mktemp -d /tmp/onboarding-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
RAW=$OUT/runs.jsonl
: > "$RAW"

"$FLEET" --dir "$W/one" --count "$N"
"$FLEET" --dir "$W/frag" --count "$N" --fragments
test "$(ls "$W/frag/agent/conf.d" | wc -l)" -eq "$N"

# Both see every certificate installed and nothing due.
for f in one frag; do
  "$AGENT" --config "$W/$f/agent/config.toml" status --json > "$W/$f/status.json"
  python3 - "$W/$f/status.json" "$N" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == int(sys.argv[2]), len(rows)
assert all(r["state"] == "installed" for r in rows)
PY
done

# The dumps: site i uses the fleet's certificate cI and its key.
python3 - "$W" "$N" <<'PY'
import os, sys
w, n = sys.argv[1], int(sys.argv[2])
live = f"{w}/one/agent/live"
nginx = [f"# configuration file /etc/nginx/nginx.conf:\nevents {{}}\nhttp {{\n    include /etc/nginx/sites-enabled/*;\n}}\n\n"]
os.makedirs(f"{w}/apache/sites-enabled", exist_ok=True)
listing = ["VirtualHost configuration:\n*:80                   is a NameVirtualHost\n"]
for i in range(n):
    name, d = f"c{i}", f"c{i}.bench.test"
    nginx.append(
        f"# configuration file /etc/nginx/sites-enabled/{d}:\n"
        f"server {{\n    listen 80;\n    listen [::]:80;\n    server_name {d} www.{d};\n"
        f"    location ^~ /.well-known/pki-validation/ {{ root /srv/{d}; }}\n"
        f"    location / {{ return 301 https://$host$request_uri; }}\n}}\n"
        f"server {{\n    listen 443 ssl http2;\n    server_name {d} www.{d};\n"
        f"    ssl_certificate {live}/{name}/fullchain.pem;\n    ssl_certificate_key {live}/{name}/privkey.pem;\n"
        f"    root /srv/{d};\n}}\n\n")
    vf = f"{w}/apache/sites-enabled/{d}.conf"
    with open(vf, "w") as f:
        f.write(f"<VirtualHost *:80>\n    ServerName {d}\n    ServerAlias www.{d}\n    DocumentRoot /srv/{d}\n"
                f"    RewriteEngine On\n    RewriteCond %{{REQUEST_URI}} !^/\\.well-known/pki-validation/\n"
                f"    RewriteRule ^ https://%{{HTTP_HOST}}%{{REQUEST_URI}} [R=301,L]\n</VirtualHost>\n"
                f"<IfModule mod_ssl.c>\n<VirtualHost *:443>\n    ServerName {d}\n    ServerAlias www.{d}\n"
                f"    DocumentRoot /srv/{d}\n    SSLEngine on\n    SSLCertificateFile {live}/{name}/cert.pem\n"
                f"    SSLCertificateChainFile {live}/{name}/chain.pem\n    SSLCertificateKeyFile {live}/{name}/privkey.pem\n"
                f"</VirtualHost>\n</IfModule>\n")
    listing.append(f"         port 80 namevhost {d} ({vf}:1)\n                 alias www.{d}\n")
    listing.append(f"         port 443 namevhost {d} ({vf}:10)\n                 alias www.{d}\n")
open(f"{w}/nginx-T.txt", "w").write("".join(nginx))
open(f"{w}/apachectl-S.txt", "w").write("".join(listing))
PY

# Discovery finds every site, each one proposal with its document root.
for s in nginx:nginx-T apache:apachectl-S; do
  "$AGENT" --config "$W/none.toml" --json discover --server "${s%%:*}" --from "$W/${s#*:}.txt" > "$W/${s%%:*}.json"
  python3 - "$W/${s%%:*}.json" "$N" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2])
assert len(d["vhosts"]) == 2 * n, len(d["vhosts"])
assert len(d["proposals"]) == n, len(d["proposals"])
assert all(p["existing"] and p["existing"]["key_on_host"] and len(p["webroot"]) == 2 for p in d["proposals"])
PY
done

$MEASURE --label "discover-nginx-$N" --reps "$REPS" --warmup 2 --out "$RAW" --meta n="$N" -- \
  "$AGENT" --config "$W/none.toml" --json discover --server nginx --from "$W/nginx-T.txt"
$MEASURE --label "discover-apache-$N" --reps "$REPS" --warmup 2 --out "$RAW" --meta n="$N" -- \
  "$AGENT" --config "$W/none.toml" --json discover --server apache --from "$W/apachectl-S.txt"
# Alternating rounds, so that the machine's drift affects both alike. The included files'
# checked certificates are kept in state/config-cache.json by the first run that finds the
# files settled (unchanged for a second); "after-a-change" removes it before each run, as an
# edit of any file would, so those runs read and check every file and write the cache again.
CACHE=$W/frag/agent/state/config-cache.json
sleep 1
for _ in 1 2 3 4; do
  $MEASURE --label "renew-one-file-$N" --reps $((REPS / 4)) --warmup 1 --out "$RAW" --meta n="$N" -- \
    "$AGENT" --config "$W/one/agent/config.toml" renew
  $MEASURE --label "renew-$N-included-files-$N" --reps $((REPS / 4)) --warmup 1 --out "$RAW" --meta n="$N" -- \
    "$AGENT" --config "$W/frag/agent/config.toml" renew
  test -f "$CACHE"
  $MEASURE --label "renew-$N-included-files-$N-after-a-change" --reps $((REPS / 4)) --warmup 1 --out "$RAW" --meta n="$N" -- \
    sh -c 'rm -f "$1" && exec "$2" --config "$3" renew' sh "$CACHE" "$AGENT" "$W/frag/agent/config.toml"
done
$MEASURE --summary "$RAW" > "$OUT/summary.json"
python3 - "$OUT/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for label, v in s.items():
    w, c = v["wall_s"], v["cpu_s"]
    print(f"{label:32} wall {w['median']*1000:8.1f} ms ({w['min']*1000:.1f}–{w['max']*1000:.1f})"
          f"  cpu {c['median']*1000:8.1f} ms  rss {v['maxrss_kb']['median']/1024:.1f} MB")
PY
uptime
