#!/usr/bin/python3
"""OpenBLAS's single-call SGEMM rate at the MLP step's shapes, one thread.

    /usr/bin/python3 bench/ddp/gemm_shapes.py [--batch 64] [--hidden 512,256] [--ms 200]

The reference for issue 9's "achieved GFLOP/s per rank against OpenBLAS's
single-call figure at the same shapes": for every layer in → out of the MLP
784-h1-h2-10 at batch b it times the three matrix products of a training
step, each as one torch.mm call on contiguous float32 tensors (torch's CPU
fp32 matmul is a call of the libblas.so.3 it links, OpenBLAS here — with
Debian's reference BLAS on LD_LIBRARY_PATH the same call runs ~30× slower):

    forward        Y  = X·Wᵀ     [b×in]·[in×out]     2·b·in·out
    weight grad    dW = dYᵀ·X    [out×b]·[b×in]      2·b·in·out
    input grad     dX = dY·W     [b×out]·[out×in]    2·b·in·out (not the first layer)

(transposes as strided views, as torch's Linear passes them to BLAS). Each
shape runs for --ms milliseconds after a warm-up; the best of 5 such
rounds' mean call time is reported. The sum over a step's products gives
the compute floor of a step and the samples/s per rank it would allow if
nothing but these GEMMs ran (bias, ReLU, softmax, optimizer, AllReduce
excluded). torch's per-call overhead (a few µs) is included, so OpenBLAS
itself is slightly faster than printed. Prints a markdown table and a last
line `RESULT {json}`.
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import json
import time

import torch


def time_call(fn, ms):
    for _ in range(10):
        fn()
    best = float("inf")
    for _ in range(5):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt * 1e3 >= ms / 5:
                break
        best = min(best, dt / n)
    return best


def openblas_core(libs):
    """The kernel set OpenBLAS picked (openblas_get_corename), or "?"."""
    import ctypes
    for p in libs:
        if "openblas" in os.path.basename(p):
            try:
                lib = ctypes.CDLL(p)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                return lib.openblas_get_corename().decode()
            except (OSError, AttributeError):
                pass
    return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--ms", type=float, default=200, help="time per shape, ms")
    ap.add_argument("--no-bind", action="store_true", help="do not pin to CPU 0")
    args = ap.parse_args()
    if not args.no_bind:
        os.sched_setaffinity(0, {0})
    torch.set_num_threads(1)
    torch.manual_seed(0)
    b = args.batch
    sizes = [784] + [int(h) for h in args.hidden.split(",") if h] + [10]
    rows, step_sec, step_flops = [], 0.0, 0
    for i, (fin, fout) in enumerate(zip(sizes, sizes[1:])):
        x = torch.randn(b, fin)
        w = torch.randn(fout, fin)
        dy = torch.randn(b, fout)
        cases = [("forward X·Wᵀ", lambda: torch.mm(x, w.t()), (b, fin, fout)),
                 ("weight grad dYᵀ·X", lambda: torch.mm(dy.t(), x), (fout, b, fin))]
        if i > 0:
            cases.append(("input grad dY·W", lambda: torch.mm(dy, w), (b, fout, fin)))
        for name, fn, (m, k, n) in cases:
            sec = time_call(fn, args.ms)
            flops = 2 * m * k * n
            step_sec += sec
            step_flops += flops
            rows.append({"layer": f"{fin}→{fout}", "product": name, "m": m, "k": k, "n": n,
                         "us": sec * 1e6, "gflops": flops / sec / 1e9})
    libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.split()[-1].lower()})
    core = openblas_core(libs)
    print(f"SGEMM through torch.mm, 1 thread, batch {b}; BLAS mapped: {', '.join(libs)}; "
          f"OpenBLAS kernels: {core}\n")
    print("| layer | product | m×k×n | µs/call | GFLOP/s |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['layer']} | {r['product']} | {r['m']}×{r['k']}×{r['n']} | {r['us']:.1f} | {r['gflops']:.1f} |")
    agg = step_flops / step_sec / 1e9
    print(f"\n- a step's matrix products: {step_flops/b:,.0f} FLOPs per sample, {step_sec*1e6:.0f} µs "
          f"at batch {b}: {agg:.1f} GFLOP/s over the step's GEMMs, at most {b/step_sec:,.0f} samples/s per rank "
          f"if nothing else ran")
    print("RESULT " + json.dumps({"batch": b, "sizes": sizes, "rows": rows, "step_gemm_sec": step_sec,
                                  "step_gflops": agg, "flops_per_sample": step_flops / b,
                                  "gemm_bound_samples_per_sec_per_rank": b / step_sec, "blas": libs, "openblas_core": core}))


if __name__ == "__main__":
    main()
