#!/usr/bin/env python3
"""How long a reloaded nginx still serves the old certificate on some connections.

One nginx (worker_processes 1, as in the tests) on a free loopback port; RELOADS times
(default 10, 1.5 s apart) its certificate files are swapped and `nginx -s reload` is sent,
then handshakes follow back to back for one second. Reports, median and worst:
  - reload -> the first handshake with the new certificate (what the agent's served check
    waits for);
  - that first handshake -> the last one with the old certificate (the old worker still
    accepting while it drains), and how many old ones came after the first new one.
Usage: benches/nginx-reload-drain.py [RELOADS]   Needs nginx and openssl.
"""
import os, shutil, socket, ssl, statistics, subprocess, sys, tempfile, time

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
reloads = int(sys.argv[1]) if len(sys.argv) > 1 else 10
w = tempfile.mkdtemp(prefix="reload-drain.")
os.makedirs(f"{w}/logs"); os.makedirs(f"{w}/tmp")
for n in "ab":
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj",
                    f"/CN={n}.test", "-days", "2", "-keyout", f"{w}/{n}.key", "-out",
                    f"{w}/{n}.pem"], check=True, capture_output=True)
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
conf = f"""worker_processes 1;
pid {w}/nginx.pid;
error_log {w}/logs/error.log;
events {{}}
http {{ access_log off; client_body_temp_path {w}/tmp; proxy_temp_path {w}/tmp;
  fastcgi_temp_path {w}/tmp; uwsgi_temp_path {w}/tmp; scgi_temp_path {w}/tmp;
  server {{ listen 127.0.0.1:{port} ssl; ssl_certificate {w}/cur.pem;
           ssl_certificate_key {w}/cur.key; }} }}
"""
open(f"{w}/nginx.conf", "w").write(conf)
nginx = [NGINX, "-p", f"{w}/", "-c", f"{w}/nginx.conf", "-e", f"{w}/logs/error.log"]


def use(n):
    shutil.copy(f"{w}/{n}.pem", f"{w}/cur.pem"); shutil.copy(f"{w}/{n}.key", f"{w}/cur.key")


ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE


def served():
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        with ctx.wrap_socket(c) as t:
            return "b" if b"b.test" in t.getpeercert(binary_form=True) else "a"


use("a")
subprocess.run(nginx, check=True)
first, drain, late = [], [], []
try:
    for r in range(reloads):
        time.sleep(1.5)
        new = "b" if r % 2 == 0 else "a"
        use(new)
        t0 = time.monotonic()
        subprocess.run(nginx + ["-s", "reload"], check=True, capture_output=True)
        seen = []
        while time.monotonic() - t0 < 1.0:
            seen.append((time.monotonic() - t0, served()))
        t_new = next((t for t, x in seen if x == new), None)
        if t_new is None:
            print(f"reload {r}: the new certificate was not served within 1 s")
            continue
        old_after = [t for t, x in seen if x != new and t > t_new]
        first.append(t_new)
        drain.append((max(old_after) - t_new) if old_after else 0.0)
        late.append(len(old_after))
finally:
    subprocess.run(nginx + ["-s", "stop"], capture_output=True)
    time.sleep(0.2)
    shutil.rmtree(w, ignore_errors=True)


def show(v):
    return f"median {statistics.median(v) * 1000:.0f} ms, worst {max(v) * 1000:.0f} ms"


print(f"nginx reloads: {len(first)} of {reloads}")
print(f"  reload -> first handshake with the new certificate: {show(first)}")
print(f"  first new -> last old handshake (old worker draining): {show(drain)}; "
      f"old handshakes after the first new: median {statistics.median(late):.0f}, worst {max(late)}")
