#!/usr/bin/env python3
"""PyTorch's side of the GPU CNN target (issue 19): one training step of
ResNet-20 at batch 128 (3x32x32) and LeNet-5 at batch 1024 (1x28x28) (or
--models: ResNet-50 at batch 64 on 3x224x224, VGG-16, AlexNet), eager,
cuDNN (benchmark mode on, as users run it), fp32 with TF32 off and on,
autocast bf16 (eager), and the whole fp32 step (forward, loss, backward,
optimizer) captured once with torch.cuda.graph and replayed (the fastest
PyTorch a user can write by hand); SGD momentum 0.9, lr 0.05; the batch
already on the device. The median of
--reps blocks of --block steps, after a warm-up block, in ms/step: the same
measurement as `go test -tags cuda -bench CNNStep ./cuda` (BenchmarkCNNStep).

    python3 bench/gpu/torch_cnn.py [--device cuda] [--out cnn.json]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from models import build  # noqa: E402

# The models --models may name, each at its batch and input; the default
# is resnet20,lenet5 (BenchmarkCNNStep's, DML_BENCH_CNNS's).
CASES = {"resnet20": (128, (3, 32, 32)), "lenet5": (1024, (1, 28, 28)), "resnet50": (64, (3, 224, 224)),
         "vgg16": (128, (3, 32, 32)), "alexnet": (128, (3, 32, 32))}


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def time_step(dev, name, batch, shape, tf32, block, reps, mode="eager"):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    net = build(name, classes=10, in_channels=shape[0], size=shape[1]).to(dev).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x = torch.rand((batch,) + shape, device=dev)
    y = torch.arange(batch, device=dev) % 10

    def step():
        opt.zero_grad(set_to_none=True)
        if mode == "bf16":
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                loss = F.cross_entropy(net(x), y)
        else:
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    if mode == "graph":
        # PyTorch's whole-network capture recipe: warm up on a side
        # stream, capture forward, backward and the optimizer step once,
        # then each step is one replay.
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            static_loss = F.cross_entropy(net(x), y)
            static_loss.backward()
            opt.step()

        def step():  # noqa: F811
            g.replay()
            return static_loss

    times = []
    for r in range(reps + 1):
        sync(dev)
        t0 = time.perf_counter()
        for _ in range(block):
            loss = step()
        sync(dev)
        if r > 0:  # the first block warms up (cuDNN's algorithm search)
            times.append((time.perf_counter() - t0) * 1e3 / block)
    med = statistics.median(times)
    return {"model": name, "batch": batch, "tf32": tf32, "mode": mode, "ms_per_step": med,
            "samples_per_s": batch / (med * 1e-3), "spread_pct": 100 * (max(times) - min(times)) / med,
            "last_loss": float(loss)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--batch", type=int, help="every model at this batch (default: 128 for resnet20, 1024 for lenet5)")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads (CPU runs)")
    ap.add_argument("--quick", action="store_true", help="batch 8, 1 block of 1 step (a smoke test on any machine)")
    ap.add_argument("--models", default="resnet20,lenet5", help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if a.threads:
        torch.set_num_threads(a.threads)
    rows = []
    for name in a.models.split(","):
        if name not in CASES:
            raise SystemExit(f"torch_cnn.py: unknown model {name!r} (want {', '.join(CASES)})")
        batch, shape = CASES[name]
        variants = [("eager", False), ("eager", True), ("bf16", False), ("graph", False)] if dev.type == "cuda" else [("eager", False)]
        for mode, tf32 in variants:
            if a.quick:
                r = time_step(dev, name, 8, shape, tf32, 1, 1, mode)
            else:
                r = time_step(dev, name, a.batch or batch, shape, tf32, a.block, a.reps, mode)
            rows.append(r)
            print(f"{r['model']:9s} batch {r['batch']:5d} {mode:5s} tf32 {str(r['tf32']):5s} {r['ms_per_step']:9.3f} ms/step "
                  f"{r['samples_per_s']:10.0f} samples/s (spread {r['spread_pct']:.1f}%)", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": str(dev), "torch": torch.__version__,
                       "gpu": torch.cuda.get_device_name() if dev.type == "cuda" else None, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
