#!/usr/bin/env python3
"""gemm-variants.py: time SGEMM kernel variants (cubins built from
kernels/cu/gemm.cu with different tuning macros, see gemm-variants.sh)
against torch.matmul (cuBLAS, fp32, TF32 off) on the same GPU in one process,
and check every result against float64.

Our kernels are loaded with the driver API through ctypes (cuModuleLoadData
on torch's context) and launched with cuLaunchKernel on torch's stream, so
both sides are timed the same way: `inner` products rotating over enough
input sets to be >= 4x the L2 (at least 2) captured into a CUDA graph,
replayed between two CUDA events, median over --reps replays; GFLOP/s =
2mnk / time per product.

Also measures module start-up: cuModuleLoadData of the compute_90 PTX (JIT,
with the driver's JIT cache disabled) against the sm_90 cubins, each in a
fresh process.
"""
import argparse
import ctypes
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import time

CU = None


def cu():
    global CU
    if CU is None:
        CU = ctypes.CDLL("libcuda.so.1")
    return CU


def chk(r, what):
    if r != 0:
        s = ctypes.c_char_p()
        cu().cuGetErrorString(r, ctypes.byref(s))
        raise RuntimeError(f"{what}: CUDA error {r} {s.value}")


def load_module(image: bytes):
    m = ctypes.c_void_p()
    buf = ctypes.create_string_buffer(image, len(image) + 1)  # NUL-terminated for PTX
    chk(cu().cuModuleLoadData(ctypes.byref(m), buf), "cuModuleLoadData")
    return m


def get_fn(mod, name):
    f = ctypes.c_void_p()
    r = cu().cuModuleGetFunction(ctypes.byref(f), mod, name.encode())
    if r != 0:
        return None
    return f


# ---------------------------------------------------------------- start-up
def startup_child(kind, files, parallel):
    """Runs in a fresh process: context, then load the files; prints JSON."""
    import threading
    c = cu()
    chk(c.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    chk(c.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    t0 = time.perf_counter()
    chk(c.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
    chk(c.cuCtxSetCurrent(ctx), "setcurrent")
    t1 = time.perf_counter()
    images = [open(f, "rb").read() for f in files]
    per = [0.0] * len(images)

    def one(i):
        chk(c.cuCtxSetCurrent(ctx), "setcurrent")
        s = time.perf_counter()
        load_module(images[i])
        per[i] = time.perf_counter() - s

    t2 = time.perf_counter()
    if parallel:
        th = [threading.Thread(target=one, args=(i,)) for i in range(len(images))]
        [t.start() for t in th]
        [t.join() for t in th]
    else:
        for i in range(len(images)):
            one(i)
    t3 = time.perf_counter()
    print(json.dumps({"kind": kind, "parallel": parallel, "ctx_s": t1 - t0, "load_s": t3 - t2,
                      "per": {os.path.basename(f): p for f, p in zip(files, per)}}))


def startup(dirname):
    ptx = sorted(glob.glob(os.path.join(dirname, "*.compute_90.ptx")))
    cub = sorted(glob.glob(os.path.join(dirname, "*.sm_90.cubin")))
    out = []
    env = dict(os.environ, CUDA_CACHE_DISABLE="1")
    for kind, files in (("ptx-jit", ptx), ("cubin", cub)):
        for par in (False, True):
            r = subprocess.run([sys.executable, __file__, "--startup-child", kind, "--par", str(int(par))] + files,
                               env=env, capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                out.append({"kind": kind, "parallel": par, "error": r.stderr[-2000:]})
            else:
                out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return out


# ---------------------------------------------------------------- GEMM
CASES = [  # name, m, n, k, transA, transB (cuda/bench_test.go gemmCases)
    ("square1024", 1024, 1024, 1024, False, False),
    ("square4096", 4096, 4096, 4096, False, False),
    ("fwdL1_x.W1T", 1024, 1024, 784, False, True),
    ("fwdL2_h1.W2T", 1024, 1024, 1024, False, True),
    ("fwdL3_h2.W3T", 1024, 10, 1024, False, True),
    ("dWL1_dz1T.x", 1024, 784, 1024, True, False),
    ("dWL2_dz2T.h1", 1024, 1024, 1024, True, False),
    ("dWL3_dz3T.h2", 10, 1024, 1024, True, False),
    ("dXL3_dz3.W3", 1024, 1024, 10, False, False),
    ("dXL2_dz2.W2", 1024, 1024, 1024, False, False),
]
L2 = 60 << 20


def main():
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".gemmv")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default="gemm-variants.json")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    print(f"# {props.name} cc {props.major}.{props.minor} {sms} SMs, torch {torch.__version__}", flush=True)

    results = {"device": props.name, "startup": None, "cases": {}, "checks": []}
    results["startup"] = startup(a.dir)
    for s in results["startup"]:
        print("startup", json.dumps(s), flush=True)

    # Variants: VARIANT.cubin with dml_sgemm_* (BM=128, BN from the name).
    variants = {}
    for f in sorted(glob.glob(os.path.join(a.dir, "v_*.cubin"))):
        name = os.path.basename(f)[2:-6]
        if a.only and name not in a.only.split(","):
            continue
        variants[name] = load_module(open(f, "rb").read())
    base = variants.get("s2") or next(iter(variants.values()))

    def kernels_for(tA, tB):
        sfx = ("t" if tA else "n") + ("t" if tB else "n")
        ks = []
        for v, mod in variants.items():
            bn = 64 if "bn64" in v else 128
            ks.append((f"{v}", get_fn(mod, "dml_sgemm_" + sfx), 128, bn, "tile"))
        ks.append(("g64", get_fn(base, "dml_sgemm64_" + sfx), 64, 64, "tile"))
        return ks, sfx

    def skinny_fn(m, n, sfx):
        if n <= 16:
            return get_fn(base, "dml_sgemm_skinnyn_" + sfx), "n"
        if m <= 16:
            return get_fn(base, "dml_sgemm_skinnym_" + sfx), "m"
        return None, None

    stream_of = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def make_launch(fn, grid, block, m, n, k, A, lda, B, ldb, C, ldc, alpha=1.0, beta=0.0):
        args = [ctypes.c_longlong(m), ctypes.c_longlong(n), ctypes.c_longlong(k), ctypes.c_float(alpha),
                ctypes.c_uint64(A.data_ptr()), ctypes.c_longlong(lda), ctypes.c_uint64(B.data_ptr()),
                ctypes.c_longlong(ldb), ctypes.c_float(beta), ctypes.c_uint64(C.data_ptr()), ctypes.c_longlong(ldc)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p) for x in args])
        gx, gy = grid

        def go():
            chk(cu().cuLaunchKernel(fn, gx, gy, 1, block, 1, 1, 0, stream_of(), params, None), "cuLaunchKernel")
        go.keep = (args, params)
        return go

    def grid_tile(m, n, bm, bn):
        return (math.ceil(n / bn), min(math.ceil(m / bm), 65535))

    def grid_skinny(m, n, side, tA, tB):
        wide = m if side == "n" else n
        contig = (tA if side == "n" else (not tB))
        w = 8 if contig else 1
        return (max(1, math.ceil(wide / w)), 1)

    def time_graph(fns, reps):
        """fns: list of callables, one product each (rotating sets)."""
        # warm up and estimate
        for f in fns[:2]:
            f()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for f in fns:
            f()
        e1.record()
        torch.cuda.synchronize()
        est = max(e0.elapsed_time(e1) / len(fns), 1e-3)
        inner = max(len(fns), int(math.ceil(1.0 / est)))
        inner = min(inner, 2000)
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                for i in range(inner):
                    fns[i % len(fns)]()
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            e0.record()
            g.replay()
            e1.record()
            torch.cuda.synchronize()
            ts.append(e0.elapsed_time(e1) / inner)
        del g
        return statistics.median(ts)

    gen = torch.Generator(device=dev).manual_seed(1)
    for (cname, m, n, k, tA, tB) in CASES:
        per_set = 4 * (m * k + k * n + m * n)
        nsets = max(2, math.ceil(4 * L2 / per_set))
        sets = []
        for _ in range(nsets):
            A = torch.randn((k, m) if tA else (m, k), device=dev, generator=gen)
            B = torch.randn((n, k) if tB else (k, n), device=dev, generator=gen)
            C = torch.empty((m, n), device=dev)
            sets.append((A, B, C))
        lda = m if tA else k
        ldb = k if tB else n
        A0, B0, _ = sets[0]
        opA = A0.double().t() if tA else A0.double()
        opB = B0.double().t() if tB else B0.double()
        ref = opA @ opB
        refabs = opA.abs() @ opB.abs()
        flop = 2.0 * m * n * k
        row = {"m": m, "n": n, "k": k, "tA": tA, "tB": tB, "sets": nsets, "kernels": {}}
        # torch
        tfns = [(lambda A=A, B=B, C=C: torch.matmul(A.t() if tA else A, B.t() if tB else B, out=C)) for A, B, C in sets]
        t = time_graph(tfns, a.reps)
        row["torch"] = {"ms": t, "gflops": flop / t / 1e6}
        ks, sfx = kernels_for(tA, tB)
        sk, side = skinny_fn(m, n, sfx)
        if sk is not None:
            ks.append(("skinny" + side, sk, None, None, side))
        for (kname, fn, bm, bn, kind) in ks:
            if fn is None:
                continue
            grid = grid_tile(m, n, bm, bn) if kind == "tile" else grid_skinny(m, n, kind, tA, tB)
            fns = [make_launch(fn, grid, 256, m, n, k, A, lda, B, ldb, C, n) for A, B, C in sets]
            sets[0][2].fill_(float("nan"))
            fns[0]()
            torch.cuda.synchronize()
            C0 = sets[0][2].clone()
            fns[0]()
            torch.cuda.synchronize()
            det = bool(torch.equal(C0.view(torch.int32), sets[0][2].view(torch.int32)))
            err = ((C0.double() - ref).abs() / refabs.clamp_min(1e-30)).max().item()
            t = time_graph(fns, a.reps)
            row["kernels"][kname] = {"ms": t, "gflops": flop / t / 1e6, "ratio": row["torch"]["ms"] / t,
                                     "relerr": err, "deterministic": det}
            print(f"{cname:14s} {kname:10s} {t*1e3:9.1f} us {flop/t/1e6:9.0f} GF/s  x{row['torch']['ms']/t:5.2f}"
                  f"  err {err:.1e} det {det}", flush=True)
        print(f"{cname:14s} {'torch':10s} {row['torch']['ms']*1e3:9.1f} us {row['torch']['gflops']:9.0f} GF/s", flush=True)
        results["cases"][cname] = row
        del sets
        torch.cuda.empty_cache()

    # Correctness of the skinny kernels and the tile kernels on odd shapes,
    # alpha/beta, every transpose, against float64.
    shapes = [(1, 1, 1), (17, 3, 1000), (3, 1025, 777), (1000, 16, 33), (5, 20, 0), (33, 17, 4099), (300, 1, 50),
              (1, 300, 50), (130, 129, 7)]
    worst = 0.0
    for (m, n, k) in shapes:
        for tA in (False, True):
            for tB in (False, True):
                sfx = ("t" if tA else "n") + ("t" if tB else "n")
                A = torch.randn((k, m) if tA else (m, k), device=dev, generator=gen)
                B = torch.randn((n, k) if tB else (k, n), device=dev, generator=gen)
                C = torch.randn((m, n), device=dev, generator=gen)
                opA = A.double().t() if tA else A.double()
                opB = B.double().t() if tB else B.double()
                ref = 1.5 * (opA @ opB) + 0.5 * C.double()
                refabs = 1.5 * (opA.abs() @ opB.abs()) + 0.5 * C.double().abs()
                cands = [("skinnyn", get_fn(base, "dml_sgemm_skinnyn_" + sfx), grid_skinny(m, n, "n", tA, tB)),
                         ("skinnym", get_fn(base, "dml_sgemm_skinnym_" + sfx), grid_skinny(m, n, "m", tA, tB))]
                for v, mod in variants.items():
                    bn = 64 if "bn64" in v else 128
                    cands.append((v, get_fn(mod, "dml_sgemm_" + sfx), grid_tile(m, n, 128, bn)))
                for (kn, fn, grid) in cands:
                    Cw = C.clone()
                    make_launch(fn, grid, 256, m, n, k, A, m if tA else k, B, k if tB else n, Cw, n, 1.5, 0.5)()
                    torch.cuda.synchronize()
                    e = ((Cw.double() - ref).abs() / refabs.clamp_min(1e-30)).max().item()
                    worst = max(worst, e)
                    if not (e <= 1e-5):
                        results["checks"].append(f"FAIL {kn} {sfx} {m}x{n}x{k}: rel err {e}")
                        print(f"FAIL {kn} {sfx} {m}x{n}x{k}: rel err {e}", flush=True)
    results["checks"].append(f"odd shapes: worst rel err {worst:.2e}")
    print(f"odd shapes x 4 transposes x all kernels: worst rel err {worst:.2e}", flush=True)
    json.dump(results, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--startup-child":
        startup_child(sys.argv[2], sys.argv[5:], sys.argv[4] == "1")
    else:
        main()
