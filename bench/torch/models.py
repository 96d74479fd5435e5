"""The torch.nn modules of dml's network presets, with the same parameter
names (state_dict keys) and layouts, so that a dml .npz loads into them with
load_state_dict(strict=True) and numbers can be compared layer for layer.

    from models import build
    net = build("lenet5", classes=10, in_channels=1)
"""

import torch.nn as nn
import torch.nn.functional as F


class LeNet5(nn.Module):
    """dml's --model lenet5 (trainer/model/presets.go): for 28×28 images."""

    def __init__(self, classes=10, in_channels=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def build(name, classes=10, in_channels=1):
    if name == "lenet5":
        return LeNet5(classes, in_channels)
    raise SystemExit(f"unknown model {name!r} (want lenet5)")


# Input shape (C, H, W) each preset is evaluated on in these scripts.
SHAPES = {"lenet5": (1, 28, 28)}
