#!/usr/bin/python3
"""One training step of a dml preset in PyTorch, in float64, against dml's.

    /usr/bin/python3 bench/torch/one_step.py --model vgg16 --cifar-dir DIR \\
        --batch 4 --lr 0.1 INIT.npz AFTER.npz
    /usr/bin/python3 bench/torch/one_step.py --model gpt --text FILE \\
        --seq-len 16 --heads 2 --batch 4 --lr 0.1 INIT.npz AFTER.npz

INIT.npz is `dml train --max-steps 0 --save INIT.npz` (the initial weights),
AFTER.npz the weights after `--max-steps 1` with the same flags: one rank,
--shuffle=false, --optimizer sgd, --lr, --batch, on --data cifar10 in DIR.
The PyTorch module of bench/torch/models.py loads INIT (strict), takes the
first --batch training images (data_batch_1.bin's first records), and makes
one SGD step of the mean cross-entropy in float64, batch norm in training
mode. Dropout draws dml's own mask (kernels.DropoutBits of each sample's
key, the layer's salt and the element), so both sides drop the same
elements. Prints the largest difference over every parameter and buffer,
relative to each tensor's largest value, and exits 1 above --tol.

For gpt (bench/torch/gpt.py, nanoGPT's module, its head tied), the batch is
the first --batch windows of --text (dml's --data text: window r is bytes
r·T … r·T+T, T = --seq-len) and the loss nanoGPT's, the mean over every
position; --heads is the model's (the .npz's shapes do not say it).
"""

import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import gpt_from_state, windows  # noqa: E402
from models import HEADS, SHAPES, build  # noqa: E402

M = 0xFFFFFFFF


def fmix(h):
    """MurmurHash3's finaliser: on a Python int, or on a uint64 array
    holding 32-bit values."""
    if isinstance(h, np.ndarray):
        m = np.uint64(M)
        h = h & m
        h ^= h >> np.uint64(16)
        h = (h * np.uint64(0x85EBCA6B)) & m
        h ^= h >> np.uint64(13)
        h = (h * np.uint64(0xC2B2AE35)) & m
        h ^= h >> np.uint64(16)
        return h
    h &= M
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M
    h ^= h >> 16
    return h


def row_key(seed, epoch, sample):
    """kernels.DropoutRowKey."""
    h = fmix((sample & M) ^ fmix(((sample >> 32) + 0x27D4EB2F) & M))
    h = fmix(h ^ fmix((epoch + 0x165667B1) & M))
    return fmix(h ^ fmix((seed & M) ^ fmix(((seed >> 32) + 0x9E3779B9) & M)))


class DmlDropout(nn.Module):
    """Inverted dropout with dml's mask for the rows of the batch."""

    def __init__(self, p, salt, keys):
        super().__init__()
        self.p, self.salt, self.keys = p, salt, keys

    def forward(self, x):
        cols = np.arange(x.shape[1], dtype=np.uint64)
        th = np.uint64(min(int(np.floor(np.ldexp(self.p, 32))), M))
        inner = fmix((cols * np.uint64(0x9E3779B9) + np.uint64(self.salt)) & np.uint64(M))
        keep = np.stack([fmix(np.uint64(k) ^ inner) >= th for k in self.keys])
        return x * torch.from_numpy(keep.astype(np.float64)).to(x.dtype) / (1 - self.p)


# Each preset's dropout layers: their salt, dml's node index.
SALTS = {"vgg16": [47, 50], "alexnet": [16, 19], "resnet50": [], "resnet20": []}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--cifar-dir")
    ap.add_argument("--text", help="gpt: the --data text file")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("-v", action="store_true", help="print every tensor's difference")
    ap.add_argument("init")
    ap.add_argument("after")
    a = ap.parse_args()
    init, after = np.load(a.init), np.load(a.after)
    state = {k: torch.from_numpy(init[k].astype(np.float64)) for k in init.files if k != "class_labels"}
    keys = [row_key(a.seed, 1, r) for r in range(a.batch)]
    if a.model == "gpt":
        with open(a.text, "rb") as f:
            x32, y = windows(f.read(), a.seq_len, a.batch)
    else:
        raw = np.fromfile(os.path.join(a.cifar_dir, "data_batch_1.bin"), dtype=np.uint8).reshape(-1, 3073)[: a.batch]
        y = torch.from_numpy(raw[:, 0].astype(np.int64))
        x32 = torch.from_numpy(raw[:, 1:].astype(np.float32) / np.float32(255)).reshape((-1,) + SHAPES[a.model])

    def step(dtype):
        """The step in dtype: the module's state after it, and the loss."""
        if a.model == "gpt":
            net = gpt_from_state(state, a.heads).to(dtype)
            net.load_state_dict(state, strict=True)
            loss = net.loss(x32, y)
            loss.backward()
            with torch.no_grad():
                for p in net.parameters():
                    p -= a.lr * p.grad
            return {k: v.detach().double().numpy() for k, v in net.state_dict().items()}, loss.item()
        net = build(a.model, classes=state[HEADS[a.model]].shape[0], in_channels=SHAPES[a.model][0]).to(dtype)
        net.load_state_dict(state, strict=True)  # every key, every shape
        salts = list(SALTS[a.model])
        for parent in net.modules():
            for name, child in parent.named_children():
                if isinstance(child, nn.Dropout):
                    setattr(parent, name, DmlDropout(child.p, salts.pop(0), keys))
        if salts:
            sys.exit(f"one_step: {a.model} has fewer dropout layers than its salts")
        net.train()
        loss = F.cross_entropy(net(x32.to(dtype)), y)
        loss.backward()
        with torch.no_grad():
            for p in net.parameters():
                p -= a.lr * p.grad
        return {k: v.detach().double().numpy() for k, v in net.state_dict().items()}, loss.item()

    ref, loss = step(torch.float64)
    f32, _ = step(torch.float32)

    def rel(got, want):
        return np.max(np.abs(got.astype(np.float64) - want)) / max(1.0, np.max(np.abs(want)))

    worst, at, worst32 = 0.0, "", 0.0
    for k, want in ref.items():
        d, d32 = rel(after[k], want), rel(f32[k], want)
        if a.v:
            print(f"{d:.3g} {d32:.3g} {k}")
        if d > worst:
            worst, at = d, k
        worst32 = max(worst32, d32)
    # Within float32 rounding: at most --tol, or 10 times what PyTorch's
    # own float32 step differs by (a deep network amplifies rounding).
    bound = max(a.tol, 10 * worst32)
    print(f"loss {loss:.6f}; largest difference {worst:.3g} (relative, at {at}); PyTorch float32's {worst32:.3g}; bound {bound:.3g}")
    sys.exit(1 if worst > bound else 0)


if __name__ == "__main__":
    main()
