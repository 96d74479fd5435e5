#!/usr/bin/python3
"""PyTorch DDP baseline for issue 33's GPT target: nanoGPT's module
(bench/torch/gpt.py) trained as `dml train --model gpt --data text` trains.

    /usr/bin/python3 bench/ddp/ddp_gpt.py --init INIT.npz --text FILE \\
        [--ranks 2] [--epochs 1] [--max-steps N] [--batch 16] [--seq-len 128]
        [--heads 4] [--lr 1e-3] [--warmup-epochs 0.1] [--weight-decay 0.1]
        [--no-bind]

What it mirrors of dml's run (compare_gpt.sh runs both):

* Model: nanoGPT's GPT (gpt.py: the same module tree, head tied), loaded
  from INIT.npz (dml train --max-steps 0 --save INIT.npz) with
  load_state_dict(strict=True): both sides start from the same weights.
* Data: the text's windows as dml cuts them (window r = bytes r·T …
  r·T+T), the last tenth held out when dml holds it out (no --test); each
  epoch a DistributedSampler permutation (dml shuffles each rank's strided
  shard with its own stream: the same windows per epoch, another order).
* Loss: nanoGPT's, the mean cross-entropy over every position; the
  gradient the mean over the ranks (DDP), as dml's.
* Optimizer: torch.optim.AdamW(lr, betas (0.9, 0.999), eps 1e-8,
  weight_decay) on every parameter (dml's AdamW decays every parameter:
  nanoGPT's own configure_optimizers exempts biases and norms), the rate of
  each step dml's: linear warm-up from 0 over --warmup-epochs (fractional
  epoch = epoch − 1 + step/steps), then constant.
* tokens/s per epoch: (tokens trained on by all ranks) / (rank 0's wall
  time from the start of the epoch to its last step), the test evaluation
  outside it (dml's samples/s × seq len).
* Threads: one per rank (torch.set_num_threads(1)), rank r pinned to CPU r
  unless --no-bind.

Prints one line per epoch on rank 0 and a last line `RESULT {json}`.
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import json
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from gpt import all_windows, gpt_from_state  # noqa: E402


def worker(rank, args, port):
    world = args.ranks
    if not args.no_bind:
        try:
            os.sched_setaffinity(0, {rank % os.cpu_count()})
        except OSError:
            pass
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    with open(args.text, "rb") as f:
        w = all_windows(f.read(), args.seq_len)
    if args.test:
        with open(args.test, "rb") as f:
            test = all_windows(f.read(), args.seq_len)
        train = w
    else:
        cut = w.shape[0] - max(1, w.shape[0] // 10)
        train, test = w[:cut], w[cut:]
    init = np.load(args.init)
    state = {k: torch.from_numpy(init[k]) for k in init.files}
    net = gpt_from_state(state, args.heads)
    net.load_state_dict(state, strict=True)
    model = DDP(net)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=args.weight_decay)
    sampler = DistributedSampler(range(train.shape[0]), num_replicas=world, rank=rank, shuffle=True, seed=1, drop_last=False)
    test_mine = test[rank::world]
    epochs, step_total = [], 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        dist.barrier()
        t0 = time.perf_counter()
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)), dtype=torch.int64)
        steps = (order.numel() + args.batch - 1) // args.batch
        loss_sum, seen, ran = 0.0, 0, 0
        for s, lo in enumerate(range(0, order.numel(), args.batch)):
            if args.max_steps >= 0 and step_total >= args.max_steps:
                break
            e = epoch - 1 + s / steps
            for g in opt.param_groups:
                g["lr"] = args.lr * e / args.warmup_epochs if e < args.warmup_epochs else args.lr
            xy = train.index_select(0, order[lo:lo + args.batch])
            logits = model(xy[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), xy[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * xy.shape[0]
            seen += xy.shape[0]
            ran += 1
            step_total += 1
        wall = time.perf_counter() - t0
        tot = torch.tensor([loss_sum, float(seen)], dtype=torch.float64)
        dist.all_reduce(tot)
        model.eval()
        with torch.no_grad():
            tl = 0.0
            for lo in range(0, test_mine.shape[0], 256):
                xy = test_mine[lo:lo + 256]
                out = net(xy[:, :-1])
                tl += torch.nn.functional.cross_entropy(out.reshape(-1, out.size(-1)), xy[:, 1:].reshape(-1), reduction="sum").item() / args.seq_len
        ev = torch.tensor([tl, float(test_mine.shape[0])], dtype=torch.float64)
        dist.all_reduce(ev)
        st = {"epoch": epoch, "steps": ran, "loss": tot[0].item() / max(tot[1].item(), 1), "test_loss": ev[0].item() / ev[1].item(),
              "samples_per_sec": tot[1].item() / wall, "tokens_per_sec": tot[1].item() * args.seq_len / wall, "wall_sec": wall}
        epochs.append(st)
        if rank == 0:
            print(f"epoch {epoch:3d}  loss {st['loss']:.4f}  test_loss {st['test_loss']:.4f}  {st['tokens_per_sec']:9.0f} tokens/s  {wall:6.1f}s", flush=True)
        if args.max_steps >= 0 and step_total >= args.max_steps:
            break
    if rank == 0:
        print("RESULT " + json.dumps({"torch": torch.__version__, "ranks": world, "epochs": epochs}), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--init", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--test")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=-1)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup-epochs", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--no-bind", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args, port), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
