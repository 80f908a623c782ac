#!/usr/bin/env python3
"""The table of bench/README.md section 10 from ns_crossover.sh's raw lines.

    bench/ns_crossover_report.py FILE

For each K and mode (per: a watch per namespace; cluster: one filtered
cluster watch): median (min-max) over the runs of the time and CPU to
synced, the bytes the apiserver sent until synced, the settled RSS and
threads, and over the churn window the CPU and the bytes sent; then, per
K, the ratio cluster/per of the medians (> 1: per-namespace cheaper)."""
import re
import statistics
import sys
from collections import defaultdict


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)


def main(path):
    runs = defaultdict(lambda: defaultdict(list))  # (k, mode) -> field -> values
    loads = []
    header = ""
    for line in open(path):
        line = line.strip()
        if line.startswith("#"):
            header = line
            continue
        kind = line.split(" ", 1)[0]
        f = fields(line)
        if kind == "load":
            loads.append(float(line.split()[1]))
            continue
        if kind not in ("synced", "window", "sent"):
            continue
        key = (int(f["k"]), f["mode"])
        for name, v in f.items():
            if name in ("k", "mode"):
                continue
            runs[key][kind + "." + name].append(float(v))
    cols = [
        ("sync ms", "synced.sync_ms", 1),
        ("sync CPU ms", "synced.sync_cpu_ms", 1),
        ("sent to sync KiB", "sent.sync", 1024),
        ("RSS MiB", "synced.rss_kb", 1024),
        ("threads", "synced.threads", 1),
        ("window CPU ms", "window.cpu_ms", 1),
        ("window sent KiB", "sent.window", 1024),
    ]
    print(header)
    print(f"load average (1 min) during the runs: {min(loads):.1f}-{max(loads):.1f}, "
          f"median {statistics.median(loads):.1f}")
    print()
    print("| K | mode | " + " | ".join(c[0] for c in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    ks = sorted({k for k, _ in runs})
    for k in ks:
        for mode in ("per", "cluster"):
            r = runs.get((k, mode))
            if not r:
                continue
            cells = []
            for _, name, div in cols:
                v = [x / div for x in r[name]]
                fmt = (lambda x: f"{x:.1f}") if div != 1 else (lambda x: f"{x:.0f}")
                cells.append(f"{fmt(statistics.median(v))} ({fmt(min(v))}-{fmt(max(v))})"
                             if len(v) > 1 else fmt(v[0]))
            print(f"| {k} | {mode} | " + " | ".join(cells) + " |")
    print()
    print("cluster / per, ratio of medians (> 1: a watch per namespace costs less)")
    print()
    print("| K | " + " | ".join(c[0] for c in cols if c[0] != "threads") + " |")
    print("|---|" + "---|" * (len(cols) - 1))
    for k in ks:
        p, c = runs.get((k, "per")), runs.get((k, "cluster"))
        if not p or not c:
            continue
        cells = []
        for title, name, _ in cols:
            if title == "threads":
                continue
            mp, mc = statistics.median(p[name]), statistics.median(c[name])
            cells.append(f"{mc / mp:.2f}" if mp else "-")
        print(f"| {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
