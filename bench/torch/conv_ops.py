#!/usr/bin/env python3
"""The best single-call GFLOP/s of oneDNN (PyTorch's CPU convolutions) and
OpenBLAS (numpy's float32 matmul, one call) for each distinct convolution of
dml's presets at batch 64, one thread: what dml's own per-layer figures
(`go test -run XXX -bench ConvLayer ./trainer/model/`, BenchmarkConvLayer)
are measured against (issue 19).

For each convolution (in, out, k, stride, pad, input h×w) it prints:
  - oneDNN forward, and backward (input and weight gradients together),
    GFLOP/s, counting 2·out·in·k·k·oh·ow·batch per product as dml does;
  - OpenBLAS: the forward product as one SGEMM over the batch,
    (out × in·k·k)·(in·k·k × batch·oh·ow), as dml runs it.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/torch/conv_ops.py [--batch 64]

Needs torch and numpy (Debian's python3-torch, python3-numpy).
"""
import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# (name, in, out, k, stride, pad, h): the distinct convolutions of lenet5
# (1×28×28) and resnet20 (3×32×32), and how many times each occurs.
CONVS = [
    ("lenet5.conv1", 1, 6, 5, 1, 2, 28, 1),
    ("lenet5.conv2", 6, 16, 5, 1, 0, 14, 1),
    ("resnet20.conv1", 3, 16, 3, 1, 1, 32, 1),
    ("resnet20.16x32x32", 16, 16, 3, 1, 1, 32, 6),
    ("resnet20.16->32s2", 16, 32, 3, 2, 1, 32, 1),
    ("resnet20.shortcut2", 16, 32, 1, 2, 0, 32, 1),
    ("resnet20.32x16x16", 32, 32, 3, 1, 1, 16, 5),
    ("resnet20.32->64s2", 32, 64, 3, 2, 1, 16, 1),
    ("resnet20.shortcut3", 32, 64, 1, 2, 0, 16, 1),
    ("resnet20.64x8x8", 64, 64, 3, 1, 1, 8, 5),
]


def best(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, batch {a.batch}, best of {a.reps}")
    print(f"{'convolution':20s} {'times':>5s} {'MFLOP/prod':>10s} {'oneDNN fwd':>10s} {'oneDNN bwd':>10s} {'SGEMM fwd':>10s}   (GFLOP/s)")
    for name, cin, cout, k, s, p, h, times in CONVS:
        oh = (h + 2 * p - k) // s + 1
        flop = 2 * cout * cin * k * k * oh * oh * a.batch
        x = torch.rand(a.batch, cin, h, h, requires_grad=True)
        w = torch.rand(cout, cin, k, k, requires_grad=True)
        y = F.conv2d(x, w, stride=s, padding=p)
        g = torch.rand_like(y)
        tf = best(lambda: F.conv2d(x, w, stride=s, padding=p), a.reps)

        def bwd():
            out = F.conv2d(x, w, stride=s, padding=p)
            torch.autograd.grad(out, (x, w), g)

        tb = best(bwd, a.reps) - tf
        A = np.random.rand(cout, cin * k * k).astype(np.float32)
        B = np.random.rand(cin * k * k, a.batch * oh * oh).astype(np.float32)
        tg = best(lambda: A @ B, a.reps)
        print(f"{name:20s} {times:5d} {flop / 1e6:10.1f} {flop / tf / 1e9:10.1f} {2 * flop / tb / 1e9:10.1f} {flop / tg / 1e9:10.1f}")


if __name__ == "__main__":
    main()
