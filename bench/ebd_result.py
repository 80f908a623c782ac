#!/usr/bin/python3
"""ebd_result - one ebd_bench.sh run directory -> one small JSON result.

    bench/ebd_result.py --run RUN_DIR --results DIR

Reads what bench/ebd_bench.sh left in RUN_DIR (meta.txt, result.txt,
writes*.txt, rss.csv, ebd-times.txt, ready-per-key.csv, operator-s1.prom)
and writes DIR/<UTC date of the run>/<config>-n<N>-<seq>.json (seq: the next
free number for that config and N on that date), printing its path. The
JSON's fields are described in bench/README.md ("Result files"); bench/report
reads them. Python 3 standard library only (Debian's /usr/bin/python3).
"""
import argparse
import calendar
import json
import math
import os
import re
import sys
import time

SCHEMA = 1
MAX_POINTS = 200  # RSS series points kept
EVENTS_PER_EBD = 2  # Installed, BecameReady


def read_kv(path):
    kv = {}
    try:
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if "=" in line:
                    k, v = line.split("=", 1)
                    kv[k] = v
    except FileNotFoundError:
        pass
    return kv


def num(v):
    """A key=value value as int or float; None if empty or not a number."""
    if v is None or v == "" or v == "-":
        return None
    try:
        return int(v)
    except ValueError:
        try:
            f = float(v)
            return f if math.isfinite(f) else None
        except ValueError:
            return None


def diff(a, b, nd=2):
    return round(b - a, nd) if a is not None and b is not None else None


def read_writes(path):
    """'verb resource code count' lines -> list of [verb, resource, code, count]."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) == 4:
                    rows.append([p[0], p[1], p[2], int(float(p[3]))])
    except FileNotFoundError:
        pass
    return rows


def wsum(rows, res_re, verb_re="."):
    r, v = re.compile(res_re), re.compile(verb_re)
    return sum(c for verb, res, code, c in rows if r.search(res) and v.search(verb))


OPERATOR_RES = r"^(ebdman\.example\.com/ebds/status|ebdman\.example\.com/vfms|core/configmaps|(core|events\.k8s\.io)/events)$"


def percentiles(values, nd=3):
    """Nearest-rank p50/p90/p99, min, max and count of a list of numbers."""
    if not values:
        return None
    v = sorted(values)

    def rank(p):
        return v[max(0, math.ceil(p / 100 * len(v)) - 1)]

    rnd = (lambda x: int(round(x))) if nd == 0 else (lambda x: round(x, nd))
    return {"n": len(v), "min": rnd(v[0]), "p50": rnd(rank(50)), "p90": rnd(rank(90)), "p99": rnd(rank(99)),
            "max": rnd(v[-1])}


def rfc3339(s):
    """'2026-12-01T13:35:00Z' -> epoch seconds (the API's 1 s resolution)."""
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


def per_ebd_seconds(path):
    lat, not_ready = [], 0
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) < 3:
                    not_ready += len(p) == 2
                    continue
                try:
                    lat.append(rfc3339(p[2]) - rfc3339(p[1]))
                except ValueError:
                    not_ready += 1
    except FileNotFoundError:
        return None
    out = percentiles(lat, 0)
    if out is None:
        return None
    out.update(resolution_s=1, not_ready=not_ready,
               source="Ready lastTransitionTime - creationTimestamp, one kubectl get after the run")
    return out


def per_ebd_ms(path, t0):
    """ready_count's per-EBD file: 'name,seen,ready' or 'name,ready' (comma or
    blank separated; an empty ready: never Ready). Times since the first
    create, in ms if a header line names its columns *_ms, else in seconds
    (epoch seconds are converted). Returns the Ready instants since the first
    create and, with 'seen' (the watch's first sight of the EBD, within its
    delay of the create), the per-EBD time to Ready, both in ms."""
    since, lat, scale, never = [], [], 1000.0, 0
    try:
        with open(path) as f:
            for line in f:
                p = [x.strip() for x in re.split(r"[,\s]", line.strip())]
                if len(p) < 2:
                    continue
                try:
                    ts = [float(x) if x else None for x in p[1:]]
                except ValueError:  # the header
                    scale = 1.0 if any(x.endswith("_ms") for x in p) else 1000.0
                    continue
                ts = [x - t0 if x is not None and x > 1e9 and t0 else x for x in ts]
                if ts[-1] is None:
                    never += 1
                    continue
                since.append(ts[-1] * scale)
                if len(ts) >= 2 and ts[0] is not None:
                    lat.append((ts[-1] - ts[0]) * scale)
    except FileNotFoundError:
        return None
    if not since:
        return None
    out = {"source": "ready_count per-EBD file (its watch's clock)", "never_ready": never,
           "ready_since_first_create": percentiles(since, 0)}
    if lat:
        out["time_to_ready_from_watch_add"] = percentiles(lat, 0)
    return out


def rss_series(path, t0):
    """rss.csv (epoch,VmRSS,RssAnon,RssFile kB,cpu_s) -> at most MAX_POINTS
    [t since the first create, rss, anon, file] (kB); over that, each of
    MAX_POINTS consecutive buckets keeps its sample of highest VmRSS."""
    pts = []
    try:
        with open(path) as f:
            for line in f:
                p = line.strip().split(",")
                if len(p) >= 4:
                    try:
                        pts.append([round(float(p[0]) - (t0 or 0), 1), int(p[1]), int(p[2]), int(p[3])])
                    except ValueError:
                        pass
    except FileNotFoundError:
        return None
    if not pts:
        return None
    samples = len(pts)
    if samples > MAX_POINTS:
        kept = []
        for b in range(MAX_POINTS):
            lo, hi = b * samples // MAX_POINTS, (b + 1) * samples // MAX_POINTS
            kept.append(max(pts[lo:hi], key=lambda x: x[1]))
        pts = kept
    return {"columns": ["t_s", "rss_kib", "anon_kib", "file_kib"], "samples": samples,
            "interval_s": 1, "downsampled": "max VmRSS per bucket" if samples > MAX_POINTS else "no",
            "points": pts}


def prom_sum(path, name, label_re):
    total, r = 0, re.compile(label_re)
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name + "{") and r.search(line):
                    try:
                        total += float(line.split()[-1])
                    except ValueError:
                        pass
    except FileNotFoundError:
        return None
    return int(total)


def machine():
    m = {"nproc": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    m["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            m["mem_kib"] = int(f.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return m


def build(run):
    meta, r = read_kv(os.path.join(run, "meta.txt")), read_kv(os.path.join(run, "result.txt"))
    n = num(r.get("n"))
    t0 = num(r.get("t0_epoch"))
    w = read_writes(os.path.join(run, "writes.txt"))
    ws = read_writes(os.path.join(run, "writes-steady.txt"))
    wr = read_writes(os.path.join(run, "writes-at-ready.txt"))
    prom = os.path.join(run, "operator-s1.prom")
    op = lambda rows: wsum(rows, OPERATOR_RES)
    posts = {g: wsum(w, r"^%s/events$" % re.escape(g), r"^POST$") for g in ("core", "events.k8s.io")}
    expected = EVENTS_PER_EBD * n if n else None
    cpu0, cpur, cpue = (num(r.get(k)) for k in ("op_cpu_idle0_s", "op_cpu_ready_s", "op_cpu_end_s"))
    mach = machine()
    mach.update(nproc=num(r.get("nproc")) or mach["nproc"], load_start=num(r.get("load_start")),
                load_end=num(r.get("load_end")))
    gm = meta.get("gomemlimit") or None
    res = {
        "schema": SCHEMA,
        "config": meta.get("config") or r.get("config") or r.get("operator"),
        "operator": meta.get("operator") or r.get("operator"),
        "gomemlimit": gm,
        "commit": r.get("commit"),
        "started_utc": r.get("started_utc"),
        "n": n,
        "workers": num(r.get("workers")) or num(meta.get("workers")),
        "parallel_creates": num(meta.get("parallel")),
        "poll": r.get("poll"),
        "ok": r.get("ok") == "1",
        "ready": num(r.get("ready_count")),
        "operator_died": r.get("operator_died"),
        "campaign": None,
        "machine": mach,
        "time_s": {
            "creates": num(r.get("create_s")),
            "all_ready": num(r.get("ready_s")),
            "last_create_to_ready": num(r.get("last_create_to_ready_s")),
        },
        "per_ebd_ready_s": per_ebd_seconds(os.path.join(run, "ebd-times.txt")),
        "per_ebd_ready_ms": per_ebd_ms(os.path.join(run, "ready-per-key.csv"), t0),
        "cpu_s": {
            "operator": {
                "startup_to_idle0": cpu0,
                "to_ready": cpur,
                "to_ready_kernel": num(r.get("op_cpu_sys_ready_s")),
                "to_end": cpue,
                "total": num(r.get("op_cpu_total_s")),
                "per_ebd_ms_to_ready": round(cpur * 1000 / n, 3) if cpur is not None and n else None,
            },
            "apiserver": {"to_ready": diff(num(r.get("api_cpu_s0")), num(r.get("api_cpu_ready"))),
                          "to_end": diff(num(r.get("api_cpu_s0")), num(r.get("api_cpu_end")))},
            "etcd": {"to_ready": diff(num(r.get("etcd_cpu_s0")), num(r.get("etcd_cpu_ready"))),
                     "to_end": diff(num(r.get("etcd_cpu_s0")), num(r.get("etcd_cpu_end")))},
            "window": "S0 (just before the first create) to all Ready, and to the end (S2)",
        },
        "memory_kib": {
            "peak_vmhwm": num(r.get("op_vmhwm_kb")),
            "idle0": {k: num(r.get("idle0_%s_kb" % k)) for k in ("rss", "anon", "file")},
            "settled": {k: num(r.get("settled_%s_kb" % k)) for k in ("rss", "anon", "file")},
        },
        "rss_series": rss_series(os.path.join(run, "rss.csv"), t0),
        "writes": {
            "window": "S0 (just before the first create) to S1 (all Ready + 10 s)",
            "operator": {
                "ebds_status": wsum(w, r"^ebdman\.example\.com/ebds/status$"),
                "vfms": wsum(w, r"^ebdman\.example\.com/vfms$"),
                "configmaps": wsum(w, r"^core/configmaps$"),
                "events": wsum(w, r"^(core|events\.k8s\.io)/events$"),
                "total": op(w),
                "at_all_ready": op(wr),
            },
            "operator_per_ebd": round(op(w) / n, 4) if n else None,
            "status_per_ebd": round(wsum(w, r"^ebdman\.example\.com/ebds/status$") / n, 4) if n else None,
            "operator_own_count": prom_sum(prom, "rest_client_requests_total", r'method="(POST|PUT|PATCH|DELETE)"'),
            "vfm_sim": wsum(w, r"^ebdman\.example\.com/vfms/status$"),
            "benchmark": wsum(w, r"^(ebdman\.example\.com/ebds|core/namespaces)$", r"^POST$"),
            "other": sum(x[3] for x in w) - op(w) - wsum(w, r"^ebdman\.example\.com/vfms/status$")
            - wsum(w, r"^(ebdman\.example\.com/ebds|core/namespaces)$", r"^POST$"),
            "by_request": w,
        },
        "events": {
            "posts": posts,
            "patches": wsum(w, r"^(core|events\.k8s\.io)/events$", r"^(PATCH|PUT|APPLY)$"),
            "expected": expected,
            "delivered": round(sum(posts.values()) / expected, 4) if expected else None,
            "dropped": prom_sum(prom, "kcr_events_total", r'result="dropped"') or 0,
        },
        "steady": {
            "window": "S1 (all Ready + 10 s) to S2 (+ 20 s)",
            "operator_writes": op(ws),
            "all_writes": sum(x[3] for x in ws),
            "by_request": ws,
        },
    }
    if meta.get("campaign"):
        res["campaign"] = {"id": meta["campaign"], "pair": num(meta.get("pair")), "vs": meta.get("vs") or None,
                           "order": meta.get("order") or None}
    return res


def dump(obj):
    """Indented JSON with each list on one line, lists of lists (the series,
    the requests) one row a line."""
    lists = {}

    def walk(o):
        if isinstance(o, dict):
            return {k: walk(v) for k, v in o.items()}
        if isinstance(o, list) and o:
            token = "@@%d@@" % len(lists)
            lists[token] = o
            return token
        return o

    text = json.dumps(walk(obj), indent=1)
    for token, rows in lists.items():
        if all(isinstance(x, list) for x in rows):
            m = re.search(r'\n( *)[^\n]*"%s"' % token, text)
            pad = "\n" + m.group(1) + " "
            body = "[" + pad + ("," + pad).join(json.dumps(x, separators=(",", ":")) for x in rows) + "]"
        else:
            body = json.dumps(rows)
        text = text.replace('"%s"' % token, body)
    return text + "\n"


def safe(s):
    return re.sub(r"[^A-Za-z0-9+=._-]", "_", s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--results", required=True)
    a = ap.parse_args()
    res = build(a.run)
    if not res["n"]:
        sys.exit("ebd_result: %s has no result.txt with n=" % a.run)
    day = (res["started_utc"] or time.strftime("%Y-%m-%dT", time.gmtime()))[:10]
    d = os.path.join(a.results, day)
    os.makedirs(d, exist_ok=True)
    stem = "%s-n%d-" % (safe(res["config"]), res["n"])
    seqs = [int(f[len(stem):-5]) for f in os.listdir(d)
            if f.startswith(stem) and f.endswith(".json") and f[len(stem):-5].isdigit()]
    path = os.path.join(d, "%s%03d.json" % (stem, max(seqs, default=0) + 1))
    with open(path + ".tmp", "w") as f:
        f.write(dump(res))
    os.rename(path + ".tmp", path)
    print(path)


if __name__ == "__main__":
    main()
