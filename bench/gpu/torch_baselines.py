#!/usr/bin/env python3
"""PyTorch baselines for dml's CUDA backend, on the GPU machine's own PyTorch.

  python3 bench/gpu/torch_baselines.py --out $OUT/torch.json [--quick] [--compile]

(a) SGEMM: torch.matmul in fp32 with TF32 off ("fp32", cuBLAS's exact fp32
    path) and with TF32 on ("tf32"), at 1024^3, 4096^3 and the GEMMs of an MLP
    784-1024-1024-10 step at batch 1024 (forward x.W^T, weight gradient
    dz^T.x, input gradient dz.W), with the transposes as dml's Backend
    passes them (PyTorch hands cuBLAS transposed views, no copies).
    Each case rotates among enough input sets that together they are >= 4x
    the L2 cache, so repeats do not read their operands from L2. Two timings:
      graph: a CUDA graph of `inner` products (launch gaps removed) replayed,
             CUDA events around each replay; median over replays / inner;
      eager: CUDA events around `inner` back-to-back eager calls; median.
    GFLOP/s = 2.M.N.K / time. The error of one product against a float64
    reference shows which mode really ran (fp32 ~1e-7, tf32 ~1e-4).
(b) One training step of MLP 784-1024-1024-10 (nn.Linear + ReLU), batch 1024,
    cross-entropy (mean), SGD lr 0.05 momentum 0.9 (dml's Momentum: PyTorch's
    heavy-ball SGD, no dampening, no Nesterov), eager, fp32 (TF32 off):
      device: batches already on the GPU (rotating among 64 batches);
      h2d_pinned: each batch copied from pinned host memory (non_blocking);
      h2d_pageable: each batch copied from ordinary host memory.
    CUDA events around blocks of `block` steps; median over blocks / block;
    samples/s = batch / step time. The same step with TF32 on, for context.
(c) --compile: the same step as one CUDA graph (torch.cuda.graph, the
    whole-network capture recipe of PyTorch's docs) and under torch.compile.

The JSON at --out is rewritten after every section, so a run cut short still
leaves what it measured. A table goes to stdout.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

L2_BYTES_FALLBACK = 60 * 1024 * 1024


TF32_API = "fp32_precision" if hasattr(torch.backends, "fp32_precision") else "allow_tf32"


def set_tf32(on):
    """TF32 on or off for fp32 matmul (and cuDNN). torch >= 2.9 has the
    fp32_precision settings and warns when they are mixed with the legacy ones
    (allow_tf32, set_float32_matmul_precision), so one API or the other. The
    GEMM table's error against float64 shows which mode really ran."""
    mode = "tf32" if on else "ieee"
    if TF32_API == "fp32_precision":
        torch.backends.fp32_precision = mode
        torch.backends.cuda.matmul.fp32_precision = mode
        for name in ("cudnn", "cudnn.conv", "cudnn.rnn"):
            obj = torch.backends
            try:
                for part in name.split("."):
                    obj = getattr(obj, part)
                obj.fp32_precision = mode
            except Exception:
                pass
        return
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")


class Timer:
    """Device-side timing: CUDA events on the GPU, perf_counter on the CPU."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def time_ms(self, fn, reps):
        """Run fn reps times, each bracketed; return the list of times in ms."""
        out = []
        if self.cuda:
            evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
            for s, e in evs:
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
            out = [s.elapsed_time(e) for s, e in evs]
        else:
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                out.append((time.perf_counter() - t) * 1e3)
        return out


def gemm_cases(batch):
    """(name, M, N, K, transA, transB): C[MxN] = op(A).op(B), A stored KxM if
    transA else MxK, B stored NxK if transB else KxN."""
    b = batch
    return [
        ("square 1024", 1024, 1024, 1024, False, False),
        ("square 4096", 4096, 4096, 4096, False, False),
        ("fwd L1  x.W1^T", b, 1024, 784, False, True),
        ("fwd L2  h1.W2^T", b, 1024, 1024, False, True),
        ("fwd L3  h2.W3^T", b, 10, 1024, False, True),
        ("dW L1  dz1^T.x", 1024, 784, b, True, False),
        ("dW L2  dz2^T.h1", 1024, 1024, b, True, False),
        ("dW L3  dz3^T.h2", 10, 1024, b, True, False),
        ("dX L3  dz3.W3", b, 1024, 10, False, False),
        ("dX L2  dz2.W2", b, 1024, 1024, False, False),
    ]


def bench_gemm(dev, timer, name, M, N, K, ta, tb, args, l2):
    set_bytes = 4 * (M * K + K * N + M * N)
    nsets = max(2, min(64, math.ceil(4 * l2 / set_bytes)))
    if args.quick:
        nsets = 2
    g = torch.Generator(device=dev).manual_seed(1)
    sets = []
    for _ in range(nsets):
        a = torch.randn((K, M) if ta else (M, K), device=dev, generator=g)
        b = torch.randn((N, K) if tb else (K, N), device=dev, generator=g)
        c = torch.empty((M, N), device=dev)
        sets.append((a.t() if ta else a, b.t() if tb else b, c))
    flop = 2.0 * M * N * K
    # inner: enough products per timed region that it lasts >= ~1 ms.
    est_s = flop / 30e12 + 4e-6
    inner = max(nsets, int(math.ceil(1e-3 / est_s / nsets)) * nsets)
    inner = min(inner, 512) if not args.quick else nsets

    def run_inner():
        for i in range(inner):
            a, b, c = sets[i % nsets]
            torch.matmul(a, b, out=c)

    # accuracy of one product against float64 on the same inputs
    a, b, c = sets[0]
    torch.matmul(a, b, out=c)
    ref = torch.matmul(a.double(), b.double())
    rel = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()

    for _ in range(3):
        run_inner()
    timer.sync()
    reps = 5 if args.quick else args.reps
    eager = statistics.median(timer.time_ms(run_inner, reps)) / inner

    graph = None
    if timer.cuda and not args.no_graph:
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                run_inner()
            torch.cuda.current_stream().wait_stream(s)
            gr = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gr):
                run_inner()
            for _ in range(3):
                gr.replay()
            timer.sync()
            graph = statistics.median(timer.time_ms(gr.replay, reps)) / inner
            del gr
        except Exception as e:  # report, keep the eager figure
            print(f"  graph capture failed for {name}: {e}", file=sys.stderr)
    del sets
    best = graph if graph is not None else eager
    return {
        "name": name, "M": M, "N": N, "K": K, "transA": ta, "transB": tb,
        "input_sets": nsets, "inner": inner, "reps": reps,
        "ms_graph": graph, "ms_eager": eager,
        "gflops_graph": flop / (graph * 1e-3) / 1e9 if graph else None,
        "gflops_eager": flop / (eager * 1e-3) / 1e9,
        "gflops": flop / (best * 1e-3) / 1e9,
        "rel_err_vs_fp64": rel,
    }


def make_mlp(dev, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(784, 1024), nn.ReLU(),
        nn.Linear(1024, 1024), nn.ReLU(),
        nn.Linear(1024, 10),
    ).to(dev)


def bench_step(dev, timer, args, mode, tf32=False, variant="eager"):
    """Median time of one training step, in ms, and samples/s."""
    set_tf32(tf32)
    batch = args.batch
    nb = 4 if args.quick else 64
    g = torch.Generator(device="cpu").manual_seed(2)
    xs_host = torch.randn(nb, batch, 784, generator=g)
    ys_host = torch.randint(0, 10, (nb, batch), generator=g)
    if mode == "h2d_pinned" and timer.cuda:
        xs_host, ys_host = xs_host.pin_memory(), ys_host.pin_memory()
    xs_dev, ys_dev = xs_host.to(dev), ys_host.to(dev)

    model = make_mlp(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x_static = torch.empty(batch, 784, device=dev)
    y_static = torch.empty(batch, dtype=torch.long, device=dev)
    counter = [0]

    def fetch():
        i = counter[0] % nb
        counter[0] += 1
        if mode == "device":
            return xs_dev[i], ys_dev[i]
        nbk = mode == "h2d_pinned"
        return xs_host[i].to(dev, non_blocking=nbk), ys_host[i].to(dev, non_blocking=nbk)

    def step_eager(m):
        x, y = fetch()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    info = {}
    if variant == "eager":
        def one():
            step_eager(model)
    elif variant == "compile":
        t0 = time.perf_counter()
        cm = torch.compile(model)
        for _ in range(3):
            step_eager(cm)
        timer.sync()
        info["compile_s"] = time.perf_counter() - t0

        def one():
            step_eager(cm)
    elif variant == "cuda_graph":
        def body():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x_static), y_static)
            loss.backward()
            opt.step()
            return loss
        x_static.copy_(xs_dev[0])
        y_static.copy_(ys_dev[0])
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                body()
        torch.cuda.current_stream().wait_stream(s)
        gr = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(gr):
            body()

        def one():
            x, y = fetch()
            x_static.copy_(x, non_blocking=True)
            y_static.copy_(y, non_blocking=True)
            gr.replay()
    else:
        raise ValueError(variant)

    for _ in range(5 if args.quick else 20):
        one()
    timer.sync()
    block = 2 if args.quick else args.block

    def run_block():
        for _ in range(block):
            one()

    reps = 3 if args.quick else args.step_reps
    times = timer.time_ms(run_block, reps)
    ms = statistics.median(times) / block
    # sanity: the step trains (loss on a fixed batch goes down) and is finite
    with torch.no_grad():
        final = F.cross_entropy(model(xs_dev[0]), ys_dev[0]).item()
    set_tf32(False)
    r = {
        "variant": variant, "data": mode, "tf32": tf32, "batch": batch,
        "block": block, "blocks": reps,
        "ms_per_step": ms, "ms_min": min(times) / block, "ms_max": max(times) / block,
        "samples_per_s": batch / (ms * 1e-3), "loss_after": final,
    }
    r.update(info)
    return r


def bench_copy(dev, timer, args):
    n = (64 if args.quick else 1024) * 1024 * 1024 // 4
    a = torch.randn(n, device=dev)
    b = torch.empty_like(a)
    b.copy_(a)
    timer.sync()
    ms = statistics.median(timer.time_ms(lambda: b.copy_(a), 5 if args.quick else 20))
    out = {"d2d_bytes": 8 * n, "d2d_ms": ms, "d2d_GBps": 8 * n / (ms * 1e-3) / 1e9}
    if timer.cuda:
        h = torch.empty(1024 * 784 * (16 if args.quick else 64), pin_memory=True)
        d = torch.empty(h.shape, device=dev)
        d.copy_(h, non_blocking=True)
        timer.sync()
        ms = statistics.median(timer.time_ms(lambda: d.copy_(h, non_blocking=True), 10))
        out.update({"h2d_pinned_bytes": 4 * h.numel(), "h2d_pinned_GBps": 4 * h.numel() / (ms * 1e-3) / 1e9})
        hp = torch.empty(h.shape)
        ms = statistics.median(timer.time_ms(lambda: d.copy_(hp), 10))
        out["h2d_pageable_GBps"] = 4 * h.numel() / (ms * 1e-3) / 1e9
    del a, b
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=50, help="timed repeats per GEMM case")
    ap.add_argument("--block", type=int, default=20, help="steps per timed block")
    ap.add_argument("--step-reps", type=int, default=25, help="timed blocks per training-step variant")
    ap.add_argument("--compile", action="store_true", help="(c): also the step as a CUDA graph and under torch.compile")
    ap.add_argument("--no-graph", action="store_true", help="GEMMs: eager timing only")
    ap.add_argument("--quick", action="store_true", help="tiny repeat counts (smoke test)")
    ap.add_argument("--skip-gemm", action="store_true")
    args = ap.parse_args()

    dev = torch.device(args.device)
    timer = Timer(dev)
    res = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "python": platform.python_version(), "device": str(dev), "tf32_api": TF32_API,
        "gemm": [], "step": [],
    }
    l2 = L2_BYTES_FALLBACK
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        l2 = getattr(p, "L2_cache_size", 0) or L2_BYTES_FALLBACK
        res.update({
            "gpu": p.name, "sm_count": p.multi_processor_count,
            "capability": f"{p.major}.{p.minor}", "gpu_mem_GiB": p.total_memory / 2**30,
            "l2_bytes": l2, "cublas": torch.backends.cuda.preferred_blas_library().name
            if hasattr(torch.backends.cuda, "preferred_blas_library") else None,
        })

    def save():
        if args.out:
            with open(args.out, "w") as f:
                json.dump(res, f, indent=1)

    print(f"# torch {torch.__version__} (CUDA {torch.version.cuda}) on {res.get('gpu', dev)}", flush=True)
    res["copy"] = bench_copy(dev, timer, args)
    c = res["copy"]
    print(f"# device-to-device copy {c['d2d_GBps']:.0f} GB/s (read+write)"
          + (f"; host->device pinned {c['h2d_pinned_GBps']:.1f} GB/s, pageable {c['h2d_pageable_GBps']:.1f} GB/s"
             if "h2d_pinned_GBps" in c else ""), flush=True)
    save()

    if not args.skip_gemm:
        print("\n## SGEMM, torch.matmul (GFLOP/s = 2MNK/t; graph: CUDA-graph replay, eager: back-to-back calls)")
        print(f"{'case':18} {'M':>5} {'N':>5} {'K':>5} {'tA':>2} {'tB':>2} | {'fp32 graph':>10} {'fp32 eager':>10} {'relerr':>8} | {'tf32 graph':>10} {'tf32 eager':>10} {'relerr':>8}")
        for (name, M, N, K, ta, tb) in gemm_cases(args.batch):
            if args.quick and dev.type == "cpu" and M * N * K > 2**30:
                continue  # smoke test on a CPU: skip 4096^3
            row = {}
            for prec in ("fp32", "tf32"):
                set_tf32(prec == "tf32")
                r = bench_gemm(dev, timer, name, M, N, K, ta, tb, args, l2)
                r["precision"] = prec
                res["gemm"].append(r)
                row[prec] = r
                save()
            set_tf32(False)

            def fmt(v):
                return f"{v:10.0f}" if v is not None else f"{'-':>10}"
            print(f"{name:18} {M:5} {N:5} {K:5} {'T' if ta else 'N':>2} {'T' if tb else 'N':>2} | "
                  + " | ".join(f"{fmt(row[p]['gflops_graph'])} {fmt(row[p]['gflops_eager'])} {row[p]['rel_err_vs_fp64']:8.1e}" for p in ("fp32", "tf32")),
                  flush=True)

    print(f"\n## MLP 784-1024-1024-10 training step, batch {args.batch}, SGD lr 0.05 momentum 0.9, cross-entropy mean")
    print(f"{'variant':12} {'data':13} {'tf32':>5} | {'ms/step':>8} {'min':>7} {'max':>7} | {'samples/s':>10} | loss after")
    plan = [("eager", "device", False), ("eager", "h2d_pinned", False), ("eager", "h2d_pageable", False),
            ("eager", "device", True)]
    if args.compile and dev.type == "cuda":
        plan += [("cuda_graph", "device", False), ("cuda_graph", "h2d_pinned", False), ("compile", "device", False)]
    for variant, mode, tf32 in plan:
        try:
            r = bench_step(dev, timer, args, mode, tf32=tf32, variant=variant)
        except Exception as e:
            r = {"variant": variant, "data": mode, "tf32": tf32, "error": f"{type(e).__name__}: {e}"}
            print(f"{variant:12} {mode:13} {str(tf32):>5} | failed: {r['error'][:200]}", flush=True)
            res["step"].append(r)
            save()
            continue
        res["step"].append(r)
        save()
        extra = f" (compile {r['compile_s']:.0f} s)" if "compile_s" in r else ""
        print(f"{variant:12} {mode:13} {str(tf32):>5} | {r['ms_per_step']:8.3f} {r['ms_min']:7.3f} {r['ms_max']:7.3f} | {r['samples_per_s']:10.0f} | {r['loss_after']:.4f}{extra}", flush=True)
    save()
    print(f"\n# JSON: {args.out}" if args.out else "")


if __name__ == "__main__":
    main()
