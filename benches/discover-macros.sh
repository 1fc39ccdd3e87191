#!/usr/bin/env bash
# Discovery of N Apache sites made by mod_macro templates (default 1000), measured:
#   - a Debian-style tree (mods-enabled/macro.load, conf-enabled/macros.conf, one
#     sites-enabled file of `Use` lines): every site a port-80 and a TLS virtual host made by a
#     `Site` macro that uses a `VHost` and an `SSLHost` macro, its own certificate and key on
#     disk (ECDSA P-256, as the fleet's; with RSA 2048 keys, checking that each key belongs to
#     its certificate takes most of the time); a `_default_:443` block without ServerName;
#   - the real `apache2 -S` of that tree, given to `cert-agent discover --server apache --from`;
#   - names listed by apache against names proposed and names left out (every listed name is
#     to be one or the other), and the wall time, CPU and peak RSS of discovery (REPS runs).
# BEFORE=PATH: another cert-agent binary whose figures are printed alongside (names proposed
# and left out), for a before/after count. Results in OUT (default
# benches/results/discover-macros): runs.jsonl, summary.json, counts.json.
# Usage: benches/discover-macros.sh [OUT_DIR]   (N=1000 REPS=20 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benches/results/discover-macros}
N=${N:-1000}
REPS=${REPS:-20}
mkdir -p "$OUT"
cargo build --release --locked -q --bin cert-agent
TARGET=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
AGENT=$TARGET/release/cert-agent
MEASURE="python3 benches/measure.py"
APACHE=$(command -v apache2 || command -v httpd)
MODULES=/usr/lib/apache2/modules
W=$(mktemp -d /tmp/discover-macros-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
RAW=$OUT/runs.jsonl
: > "$RAW"

R=$W/etc/apache2
mkdir -p "$R"/{mods,conf,sites}-{available,enabled} "$W/ssl"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj /CN=bench.test \
  -keyout "$W/ssl/one.key" -out "$W/ssl/one.pem" 2>/dev/null
python3 - "$W" "$N" "$MODULES" "$("$APACHE" -l)" <<'PY'
import os, shutil, sys
w, n, modules, compiled = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
r = f"{w}/etc/apache2"
conf = [f"ServerRoot {r}\nPidFile {r}/httpd.pid\nDefaultRuntimeDir {r}\nErrorLog {r}/error.log\n"]
for name, source in [("mpm_event", "event.c"), ("unixd", "mod_unixd.c"), ("authz_core", "mod_authz_core.c"),
                     ("alias", "mod_alias.c"), ("ssl", "mod_ssl.c")]:
    if source not in compiled and os.path.isfile(f"{modules}/mod_{name}.so"):
        conf.append(f"LoadModule {name}_module {modules}/mod_{name}.so\n")
conf.append("IncludeOptional mods-enabled/*.load\nListen 80\nListen 443\n"
            "IncludeOptional conf-enabled/*.conf\nIncludeOptional sites-enabled/*.conf\n")
open(f"{r}/apache2.conf", "w").write("".join(conf))
def enable(kind, name, text):
    open(f"{r}/{kind}-available/{name}", "w").write(text)
    os.symlink(f"{r}/{kind}-available/{name}", f"{r}/{kind}-enabled/{name}")
enable("mods", "macro.load", f"LoadModule macro_module {modules}/mod_macro.so\n")
enable("conf", "macros.conf",
       "<Macro VHost $name $domain>\n<VirtualHost *:80>\n  ServerName $domain\n  ServerAlias www.$domain\n"
       "  DocumentRoot /srv/$name\n</VirtualHost>\n</Macro>\n"
       "<Macro SSLHost $name $domain>\n<VirtualHost *:443>\n  ServerName $domain\n  ServerAlias www.$domain\n"
       f"  DocumentRoot /srv/$name\n  SSLEngine on\n  SSLCertificateFile {w}/ssl/$name.pem\n"
       f"  SSLCertificateKeyFile {w}/ssl/$name.key\n</VirtualHost>\n</Macro>\n"
       "<Macro Site $name $domain>\n  Use VHost $name $domain\n  Use SSLHost $name $domain\n</Macro>\n")
uses = []
for i in range(n):
    for ext in ("pem", "key"):
        shutil.copyfile(f"{w}/ssl/one.{ext}", f"{w}/ssl/s{i}.{ext}")
    uses.append(f"Use Site s{i} s{i}.bench.test\n")
enable("sites", "hosting.conf", "".join(uses))
enable("sites", "default-ssl.conf",
       f"<VirtualHost _default_:443>\n  SSLEngine on\n  SSLCertificateFile {w}/ssl/one.pem\n"
       f"  SSLCertificateKeyFile {w}/ssl/one.key\n</VirtualHost>\n")
PY
"$APACHE" -d "$R" -f "$R/apache2.conf" -S > "$W/apachectl-S.txt" 2>&1

count() {
  "$1" --config "$W/none.toml" --json discover --server apache --from "$W/apachectl-S.txt" > "$W/found.json"
  python3 - "$W/apachectl-S.txt" "$W/found.json" "$2" <<'PY'
import json, sys
listed = set()
for line in open(sys.argv[1]):
    t = line.strip()
    if t.startswith("alias ") or t.startswith("wild alias "):
        listed.add(t.split()[-1].lower())
    elif " (" in t and t.endswith(")"):
        listed.add(t.split(" (", 1)[0].split()[-1].lower())
d = json.load(open(sys.argv[2]))
proposed = {n for p in d["proposals"] for n in p["domains"]}
left = {s["name"] for s in d["skipped"]}
print(json.dumps({"binary": sys.argv[3], "listed": len(listed), "proposed": len(proposed),
                  "left_out": len(left), "accounted": len(listed & (proposed | left)),
                  "unaccounted": sorted(listed - proposed - left)[:5]}))
PY
}
{
  if [ -n "${BEFORE:-}" ]; then count "$BEFORE" before; fi
  count "$AGENT" after
} | tee "$OUT/counts.json"
python3 - "$OUT/counts.json" <<'PY'
import json, sys
after = [json.loads(l) for l in open(sys.argv[1])][-1]
assert after["accounted"] == after["listed"], after
PY

$MEASURE --label "discover-apache-macros-$N" --reps "$REPS" --warmup 2 --out "$RAW" --meta n="$N" -- \
  "$AGENT" --config "$W/none.toml" --json discover --server apache --from "$W/apachectl-S.txt"
$MEASURE --summary "$RAW" > "$OUT/summary.json"
python3 - "$OUT/summary.json" <<'PY'
import json, sys
for label, v in json.load(open(sys.argv[1])).items():
    w, c = v["wall_s"], v["cpu_s"]
    print(f"{label:32} wall {w['median']*1000:8.1f} ms ({w['min']*1000:.1f}–{w['max']*1000:.1f})"
          f"  cpu {c['median']*1000:8.1f} ms  rss {v['maxrss_kb']['median']/1024:.1f} MB")
PY
uptime
