#!/usr/bin/env python3
"""npzdiff.py A.npz B.npz: per array, max |A-B| and ||A-B||/||A|| (A is the reference)."""
import sys

import numpy as np

a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
worst = 0.0
for k in sorted(a.files):
    x, y = a[k].astype(np.float64), b[k].astype(np.float64)
    rel = np.linalg.norm(x - y) / max(np.linalg.norm(x), 1e-30)
    worst = max(worst, rel)
    print(f"  {k:16s} {str(x.shape):14s} max|diff| {np.abs(x - y).max():.3g}  ||diff||/||ref|| {rel:.3g}")
print(f"  worst relative norm difference {worst:.3g}")
