#!/usr/bin/python3
"""Loads a dml .npz into the equivalent PyTorch module with
load_state_dict(strict=True) and evaluates it on Fashion-MNIST's test set.

    /usr/bin/python3 bench/torch/check_npz.py --model lenet5 WEIGHTS.npz
        [--data-dir /usr/share/datasets/fashion-mnist]
    /usr/bin/python3 bench/torch/check_npz.py --model resnet20 --cifar-dir DIR WEIGHTS.npz
    /usr/bin/python3 bench/torch/check_npz.py --model-file NET.yaml WEIGHTS.npz

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
from models import HEADS, SHAPES, build  # noqa: E402
from ddp_mlp import load_split  # noqa: E402


class Layers(torch.nn.Module):
    """A dml model file's layers, each module under its name (PyTorch's
    state_dict keys are then dml's), run in order."""

    def __init__(self, named):
        super().__init__()
        self.order = []
        for i, (name, mod) in enumerate(named):
            key = name or f"_{i}"
            self.add_module(key, mod)
            self.order.append(key)

    def forward(self, x):
        for k in self.order:
            x = getattr(self, k)(x)
        return x


def from_model_file(path, in_shape=(1, 28, 28)):
    """The module of a model file's layers (no residual blocks; names
    without dots), for 1×28×28 inputs."""
    import yaml

    nn = torch.nn
    layers = yaml.safe_load(open(path))["layers"]
    c, h, w = in_shape
    named = []
    for spec in layers:
        kind, name = spec["kind"], spec.get("name", "")
        if kind == "linear":
            mod = nn.Linear(c * h * w, spec["out"], bias=not spec.get("no_bias", False))
            c, h, w = spec["out"], 1, 1
        elif kind == "conv":
            k, s, p = spec["kernel"], spec.get("stride", 1) or 1, spec.get("pad", 0)
            mod = nn.Conv2d(c, spec["out"], k, s, p, bias=not spec.get("no_bias", False))
            c, h, w = spec["out"], (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        elif kind in ("maxpool", "avgpool"):
            k = spec.get("kernel", 0) or h
            s = spec.get("stride", 0) or k
            mod = (nn.MaxPool2d if kind == "maxpool" else nn.AvgPool2d)(k, s)
            h, w = (h - k) // s + 1, (w - k) // s + 1
        elif kind == "flatten":
            mod = nn.Flatten()
            c, h, w = c * h * w, 1, 1
        elif kind == "relu":
            mod = nn.ReLU()
        elif kind == "gelu":
            mod = nn.GELU(approximate=spec.get("approximate", "none") or "none")
        elif kind == "dropout":
            mod = nn.Dropout(spec["p"])
        elif kind == "layernorm":
            mod = nn.LayerNorm(c)
        elif kind == "batchnorm":
            mod = nn.BatchNorm2d(c)
        else:
            sys.exit(f"check_npz: a model file's {kind} layer is not built here")
        named.append((name, mod))
    return Layers(named)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="lenet5")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--cifar-dir", help="evaluate on DIR/test_batch.bin (CIFAR-10's binary form) instead")
    ap.add_argument("--model-file", help="a dml model file (YAML) of 1×28×28 images: the module built from its layers")
    ap.add_argument("weights")
    a = ap.parse_args()
    arrays = np.load(a.weights)
    state = {k: torch.from_numpy(arrays[k].copy()) for k in arrays.files if k != "class_labels"}
    if a.model_file:
        net, shape = from_model_file(a.model_file), (1, 28, 28)
    else:
        classes = state[HEADS[a.model]].shape[0]
        net, shape = build(a.model, classes=classes, in_channels=SHAPES[a.model][0]), SHAPES[a.model]
    net.load_state_dict(state, strict=True)  # every key, every shape, nothing more
    net.eval()
    if a.cifar_dir:
        raw = np.fromfile(os.path.join(a.cifar_dir, "test_batch.bin"), dtype=np.uint8).reshape(-1, 3073)
        y = torch.from_numpy(raw[:, 0].astype(np.int64))
        x = torch.from_numpy(raw[:, 1:].astype(np.float32) / np.float32(255))
    else:
        x, y = load_split(a.data_dir, "t10k")
    x = x.reshape((-1,) + shape)
    with torch.no_grad():
        out = net(x)
        loss = F.cross_entropy(out, y).item()
        acc = (out.argmax(1) == y).double().mean().item()
    print(f"accuracy {acc:.4f} loss {loss:.4f} on {y.numel()} test samples")


if __name__ == "__main__":
    main()
