#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel gpu__time_duration (a --csv report on
stdin) by kernel name, per step: ncu-sum.py STEPS < ncu.csv. Prints the
kernels by total device time, with calls per step and the share."""
import csv
import sys

steps = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith('"'))]
if not rows:
    sys.exit("ncu-sum: no CSV rows on stdin")
head, body = rows[0], rows[1:]
ki, mi, ui, vi = (head.index(k) for k in ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value"))
scale = {"ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "nsecond": 1e-6, "msecond": 1.0, "ms": 1.0}
by = {}
for r in body:
    if r[mi] != "gpu__time_duration.sum":
        continue
    name = r[ki].split("(")[0][:70]
    ms = float(r[vi].replace(",", "")) * scale.get(r[ui], 1e-6)
    n, t = by.get(name, (0, 0.0))
    by[name] = (n + 1, t + ms)
total = sum(t for _, t in by.values())
print(f"  device time of the kernels: {total / steps:.3f} ms/step ({sum(n for n, _ in by.values()) / steps:.0f} kernels/step)")
for name, (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:30]:
    print(f"  {t / steps:8.3f} ms/step {100 * t / total:5.1f}% {n / steps:5.0f} calls/step  {name}")
