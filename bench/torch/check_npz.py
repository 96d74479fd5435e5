#!/usr/bin/python3
"""Loads a dml .npz into the equivalent PyTorch module with
load_state_dict(strict=True) and evaluates it on Fashion-MNIST's test set.

    /usr/bin/python3 bench/torch/check_npz.py --model lenet5 WEIGHTS.npz
        [--data-dir /usr/share/datasets/fashion-mnist]
    /usr/bin/python3 bench/torch/check_npz.py --model resnet20 --cifar-dir DIR WEIGHTS.npz

Prints `accuracy A loss L on N test samples`, as `dml eval` does, so the two
can be compared: the same weights must give the same accuracy (the loss may
differ in the last digits: float32 sums in another order). Needs Debian's
python3-torch and python3-numpy.
"""

import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ddp"))
from models import SHAPES, build  # noqa: E402
from ddp_mlp import load_split  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="lenet5")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--cifar-dir", help="evaluate on DIR/test_batch.bin (CIFAR-10's binary form) instead")
    ap.add_argument("weights")
    a = ap.parse_args()
    arrays = np.load(a.weights)
    state = {k: torch.from_numpy(arrays[k].copy()) for k in arrays.files if k != "class_labels"}
    classes = state["fc3.weight" if a.model == "lenet5" else "fc.weight"].shape[0]
    net = build(a.model, classes=classes, in_channels=SHAPES[a.model][0])
    net.load_state_dict(state, strict=True)  # every key, every shape, nothing more
    net.eval()
    if a.cifar_dir:
        raw = np.fromfile(os.path.join(a.cifar_dir, "test_batch.bin"), dtype=np.uint8).reshape(-1, 3073)
        y = torch.from_numpy(raw[:, 0].astype(np.int64))
        x = torch.from_numpy(raw[:, 1:].astype(np.float32) / np.float32(255))
    else:
        x, y = load_split(a.data_dir, "t10k")
    x = x.reshape((-1,) + SHAPES[a.model])
    with torch.no_grad():
        out = net(x)
        loss = F.cross_entropy(out, y).item()
        acc = (out.argmax(1) == y).double().mean().item()
    print(f"accuracy {acc:.4f} loss {loss:.4f} on {y.numel()} test samples")


if __name__ == "__main__":
    main()
