#!/usr/bin/python3
"""PyTorch DDP baseline for issues 9 and 19: the MLP (or, with --model
lenet5, the CNN) `dml train` runs, on the same data.

    /usr/bin/python3 bench/ddp/ddp_mlp.py [--ranks 2] [--epochs 3] [--batch 64]
        [--model mlp|lenet5] [--hidden 512,256] [--lr 0.05] [--momentum 0.9]
        [--weight-decay 0] [--seed 1] [--data-dir /usr/share/datasets/fashion-mnist]
        [--no-bind]

--model lenet5 trains bench/torch/models.py's LeNet5 (dml's preset, the same
parameter names and layouts) on the images as 1×28×28; everything else below
holds for it too (its convolutions go through oneDNN in torch 1.13).

Run it with Debian's /usr/bin/python3 (python3-torch 1.13), not a pyenv
python3 that has no torch. It starts --ranks processes itself
(torch.multiprocessing.spawn; no torchrun), joined by torch.distributed's
gloo backend over 127.0.0.1, and trains with DistributedDataParallel.

What it mirrors of `dml train --model mlp --data fashion-mnist` (and where
it differs; see compare.sh's header for why the differences do not bias the
samples/s comparison):

* Model: Linear(784, h1), ReLU, Linear(h1, h2), ReLU, Linear(h2, 10), mean
  softmax cross-entropy (F.cross_entropy). Weights: torch's default
  nn.Linear init (Kaiming-uniform a=√5, i.e. U(±1/√fan_in) for weights and
  biases), seeded by --seed; dml uses its own seeded init.
* Optimizer: torch.optim.SGD(lr, momentum, weight_decay, dampening=0,
  nesterov=False): v = μ·v + (g + wd·w); w -= lr·v, the rule in dml's
  kernels/optim (momentumAt). dml's defaults: --lr 0.05 --momentum 0.9
  --weight-decay 0.
* Data: the four gzip IDX files, pixels scaled as float32(p)/255 (dml's
  trainer/data/idx.go), whole sets in memory; a step gathers its rows with
  index_select (dml gathers rows too; no DataLoader, no worker processes).
* Sharding: DistributedSampler(shuffle=True, seed, drop_last=False), a fresh
  permutation each epoch (set_epoch), rank r taking positions r, r+N, … of
  it: disjoint shards of 30000 at 2 ranks, 469 steps of 64 per rank (the
  last one 48), like dml's 469 steps. dml shards by index strides and
  shuffles each shard with its own PCG stream, so the sample order differs.
* Gradient: DDP averages the ranks' mean-loss gradients; with equal local
  batches that is the gradient of the mean loss over the global batch,
  which is what dml's fused AllReduce computes.
* samples/s, per epoch: (samples trained on by all ranks in the epoch) /
  (rank 0's wall time from the start of the epoch — including drawing the
  epoch's order — to the end of its last optimizer step). Test evaluation
  is outside it, as in dml's trainer/engine/loop.go (SamplesPerSec = seen / wall,
  wall taken before EndEpoch and Evaluate). loss and train_acc are the
  mean over the epoch's samples of all ranks, summed by one all_reduce after
  the clock stops (dml carries them in every step's AllReduce).
* Test accuracy: each rank scores test rows rank, rank+N, … after every
  epoch and one all_reduce sums the counts (dml's evaluateShard does the
  same), all 10000 rows.
* Threads: OMP/OPENBLAS/MKL_NUM_THREADS=1 before torch loads,
  torch.set_num_threads(1) and set_num_interop_threads(1) per rank, and
  (unless --no-bind) rank r pinned to CPU r mod nproc, like
  `mpirun --bind-to core`.

BLAS: Debian's python3-torch is built with BLAS_INFO=generic and calls the
libblas.so.3 the alternatives system selects (OpenBLAS 0.3.21 pthread,
Cooperlake kernels, on our machine). nn.Linear's fp32 products go through
it: with Debian's reference BLAS put first on LD_LIBRARY_PATH the same
64×784×512 forward drops from ~75 to ~2 GFLOP/s. libdnnl (oneDNN) is
mapped too but not used for fp32 Linear in torch 1.13.

Where DDP's step goes (2 ranks, one core each, 2026-11-22): the step's
compute alone is ~2.6 ms in one process; a gloo all_reduce of the 535,818
gradients (2.1 MB) takes ~3.1 ms on loopback TCP; DDP's step is ~8 ms.
Unpinning the ranks (--no-bind) measured slightly slower, not faster.

Prints one line per epoch on rank 0, the BLAS library torch has mapped,
and a last line `RESULT {json}`.
"""

import os

# Before torch (and the BLAS it links) is loaded, in the parent and in the
# spawned children, which re-import this module.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
           "BLIS_NUM_THREADS", "GOTO_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import gzip
import json
import socket
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


# The models trained on random 3×32×32 images (throughput only).
SYNTHETIC = ["resnet20", "vgg16", "resnet50", "alexnet"]

def read_idx(path):
    """Reads a (gzip) IDX file into a numpy uint8 array of its shape."""
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise SystemExit(f"{path}: not an unsigned-byte IDX file")
    shape = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise SystemExit(f"{path}: {data.size} bytes of data, shape {shape}")
    return data.reshape(shape)


def find(data_dir, base):
    for p in (os.path.join(data_dir, base + ".gz"), os.path.join(data_dir, base)):
        if os.path.exists(p):
            return p
    raise SystemExit(f"{data_dir}/{base}.gz not found: install dataset-fashion-mnist (make deps)")


def load_split(data_dir, prefix):
    x = read_idx(find(data_dir, prefix + "-images-idx3-ubyte"))
    y = read_idx(find(data_dir, prefix + "-labels-idx1-ubyte"))
    # float32(p)/255 in float32, as dml's byteScale table.
    x = x.reshape(x.shape[0], -1).astype(np.float32) / np.float32(255)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def blas_libraries():
    """The BLAS/LAPACK/oneDNN libraries mapped into this process."""
    libs = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            base = os.path.basename(p).lower()
            if p.startswith("/") and any(k in base for k in ("blas", "lapack", "mkl", "dnnl", "blis")):
                if p not in libs:
                    libs.append(os.path.realpath(p) if os.path.islink(p) else p)
    return sorted(set(libs))


def worker(rank, args, port):
    world = args.ranks
    if not args.no_bind:
        try:
            os.sched_setaffinity(0, {rank % os.cpu_count()})
        except OSError as e:
            print(f"rank {rank}: cannot pin to a core: {e}", file=sys.stderr)
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)

    if args.model in SYNTHETIC:
        # Throughput only (as dml's --data synthetic-images): random images,
        # a quarter as many more for the test set.
        g = torch.Generator().manual_seed(args.seed)
        n = args.synthetic
        px = 3 * args.side * args.side
        xtr, ytr = torch.rand(n, px, generator=g), torch.randint(0, 10, (n,), generator=g)
        xte, yte = torch.rand(n // 4, px, generator=g), torch.randint(0, 10, (n // 4,), generator=g)
    else:
        xtr, ytr = load_split(args.data_dir, "train")
        xte, yte = load_split(args.data_dir, "t10k")
    xte_mine, yte_mine = xte[rank::world].contiguous(), yte[rank::world].contiguous()

    torch.manual_seed(args.seed)
    if args.model != "mlp":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
        from models import SHAPES, build
        shape = (-1,) + SHAPES[args.model]
        if args.model in SYNTHETIC:
            shape = (-1, 3, args.side, args.side)
        # The side decides resnet50's stem (torchvision's from 64 pixels, as
        # dml's preset): without it, 224×224 images ran through CIFAR's
        # stem, about 16 times the work dml's network does.
        net = build(args.model, classes=10, in_channels=shape[1], size=shape[2])
        xtr, xte_mine = xtr.reshape(shape).contiguous(), xte_mine.reshape(shape).contiguous()
    else:
        sizes = [xtr.shape[1]] + args.hidden + [10]
        net = mlp(sizes)
    model = DDP(net)  # broadcasts rank 0's initial weights
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay, dampening=0, nesterov=False)
    sampler = DistributedSampler(range(xtr.shape[0]), num_replicas=world, rank=rank,
                                 shuffle=True, seed=args.seed, drop_last=False)

    # One matmul so the BLAS is mapped, then report it.
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))
    libs = blas_libraries()
    if rank == 0:
        print(f"torch {torch.__version__}, {world} ranks, gloo, threads/rank {torch.get_num_threads()}, "
              f"BLAS mapped: {', '.join(libs) or 'none found'}", flush=True)

    epochs = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        dist.barrier()  # both ranks start the clock together (dml's ranks are in step from the last AllReduce)
        t0 = time.perf_counter()
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)), dtype=torch.int64)
        loss_sum = 0.0
        correct = 0
        seen = 0
        steps = 0
        for lo in range(0, order.numel(), args.batch):
            idx = order[lo:lo + args.batch]
            x = xtr.index_select(0, idx)
            y = ytr.index_select(0, idx)
            out = model(x)
            loss = F.cross_entropy(out, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            n = idx.numel()
            loss_sum += loss.item() * n
            correct += int((out.argmax(1) == y).sum())
            seen += n
            steps += 1
        wall = time.perf_counter() - t0  # rank 0's clock is the one reported

        tot = torch.tensor([loss_sum, float(correct), float(seen)], dtype=torch.float64)
        dist.all_reduce(tot)
        model.eval()
        with torch.no_grad():
            c = (net(xte_mine).argmax(1) == yte_mine).sum().double()
        ev = torch.stack([c, torch.tensor(float(yte_mine.numel()), dtype=torch.float64)])
        dist.all_reduce(ev)
        st = {
            "epoch": epoch, "steps": steps, "loss": tot[0].item() / tot[2].item(),
            "train_acc": tot[1].item() / tot[2].item(), "test_acc": ev[0].item() / ev[1].item(),
            "samples_per_sec": tot[2].item() / wall, "wall_sec": wall, "samples": int(tot[2].item()),
        }
        epochs.append(st)
        if rank == 0:
            print(f"epoch {epoch:3d}  loss {st['loss']:.4f}  train_acc {st['train_acc']:.4f}  "
                  f"test_acc {st['test_acc']:.4f}  {st['samples_per_sec']:9.0f} samples/s  "
                  f"{wall:6.1f}s", flush=True)

    if rank == 0:
        res = {
            "framework": "pytorch-ddp", "torch": torch.__version__, "backend": "gloo",
            "ranks": world, "batch": args.batch, "model": args.model, "hidden": args.hidden, "lr": args.lr,
            "momentum": args.momentum, "weight_decay": args.weight_decay,
            "threads_per_rank": torch.get_num_threads(), "bound": not args.no_bind,
            "blas": libs, "epochs": epochs,
            "mean_samples_per_sec": sum(e["samples_per_sec"] for e in epochs) / len(epochs),
            "test_acc": epochs[-1]["test_acc"],
        }
        print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--model", default="mlp", choices=["mlp", "lenet5"] + SYNTHETIC)
    ap.add_argument("--side", type=int, default=32,
                    help="the synthetic images' side (3×side×side; resnet50 at 224 is torchvision's)")
    ap.add_argument("--synthetic", type=int, default=4096,
                    help="resnet20, vgg16, resnet50, alexnet: training samples of random 3x32x32 images (throughput only)")
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--no-bind", action="store_true", help="do not pin rank r to CPU r")
    args = ap.parse_args()
    args.hidden = [int(h) for h in args.hidden.split(",") if h]
    if args.ranks < 1 or args.epochs < 1 or args.batch < 1:
        ap.error("--ranks, --epochs and --batch must be ≥ 1")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(args, free_port()), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
