#!/usr/bin/env python3
"""Reads the sandbox call log (GET /_sandbox/calls, a JSON array) and summarises the API traffic.

    calls.py count CALLS.json [--per N]
        calls in total and by endpoint kind (and per certificate when --per N)
    calls.py polling CALLS.json --interval S
        polling of pending certificates: list pages and status calls per poll interval (windows
        of poll_interval_secs from the first poll), and the shortest time between two status
        calls of one certificate and between two list rounds

Endpoint kinds: signin, products, order, list (GET /api/v1/ssl_certificates?page=...), details
(GET /ssl_certificates/ID), status, dcv, download_bundle, download, reissue, other.
"""

import argparse
import collections
import datetime
import json
import re
import sys

ID = re.compile(r"^/api/v1/ssl_certificates/(\d+)(/[a-z_]+)?$")


def kind(c):
    path, method = c["path"], c["method"]
    if path.endswith("/users/signin"):
        return "signin", None
    if path == "/api/v1/products":
        return "products", None
    if path == "/api/v1/order":
        return "order", None
    if path == "/api/v1/ssl_certificates" or path.endswith("/our_ssl_certificates"):
        return "list", None
    m = ID.match(path)
    if m:
        cid, sub = int(m.group(1)), (m.group(2) or "")[1:]
        return (sub or "details"), cid
    return f"other {method} {path}", None


def ts(c):
    return datetime.datetime.fromisoformat(c["time"].replace("Z", "+00:00")).timestamp()


def count(calls, per):
    by = collections.Counter(kind(c)[0] for c in calls)
    out = {"total": len(calls), "by_kind": dict(sorted(by.items()))}
    if per:
        out["per_certificate"] = round(len(calls) / per, 3)
        out["by_kind_per_certificate"] = {k: round(v / per, 3) for k, v in sorted(by.items())}
    out["errors"] = sum(1 for c in calls if c["status"] >= 400)
    return out


def polling(calls, interval):
    calls = sorted(calls, key=ts)
    polls = [c for c in calls if kind(c)[0] in ("list", "status")]
    if not polls:
        return {"rounds": 0}
    t0 = ts(polls[0])
    # Windows of one poll interval from the first poll: what the API sees per interval.
    windows = collections.defaultdict(lambda: {"list": 0, "status": 0, "details": 0, "dcv": 0})
    for c in calls:
        k, _ = kind(c)
        t = ts(c)
        if t < t0 or k not in ("list", "status", "details", "dcv"):
            continue
        windows[int((t - t0) // interval)][k] += 1
    last = max(windows)
    per_window = [windows[i] for i in range(last + 1)]
    # Per certificate: its status calls (a status call is the per-certificate poll the API
    # limits); list pages are calls for the whole account.
    status = collections.defaultdict(list)
    seen = set()
    for c in calls:
        k, cid = kind(c)
        if cid is not None:
            seen.add(cid)
        if k == "status":
            status[cid].append(ts(c))
    gaps = [b - a for v in status.values() for a, b in zip(v, v[1:])]
    list_times = [ts(c) for c in calls if kind(c)[0] == "list"]
    bursts = []
    for t in list_times:
        if bursts and t - bursts[-1] < 1.0:
            continue
        bursts.append(t)
    return {
        "certificates_seen": len(seen),
        "poll_interval_secs": interval,
        "windows": per_window,
        "status_calls_total": sum(len(v) for v in status.values()),
        "list_calls_total": len(list_times),
        "min_seconds_between_status_calls_of_one_certificate": round(min(gaps), 3) if gaps else None,
        "min_seconds_between_list_rounds": round(min(b - a for a, b in zip(bursts, bursts[1:])), 3)
        if len(bursts) > 1 else None,
        "by_kind": count(calls, 0)["by_kind"],
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["count", "polling"])
    p.add_argument("file")
    p.add_argument("--per", type=int, default=0)
    p.add_argument("--interval", type=float, default=300)
    a = p.parse_args()
    calls = json.load(open(a.file))
    if a.mode == "count":
        out = count(calls, a.per)
    else:
        out = polling(calls, a.interval)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    sys.exit(main())
