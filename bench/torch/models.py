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


class BasicBlock(nn.Module):
    """He et al.'s basic block, as dml's block layer (option B shortcut)."""

    def __init__(self, inp, out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.shortcut = nn.Sequential()
        if stride != 1 or inp != out:
            self.shortcut = nn.Sequential(nn.Conv2d(inp, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class ResNet20(nn.Module):
    """dml's --model resnet20 (trainer/model/presets.go), for 3×32×32."""

    def __init__(self, classes=10, in_channels=3):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        chans, inp = [16, 32, 64], 16
        for stage, ch in enumerate(chans):
            blocks = []
            for b in range(3):
                blocks.append(BasicBlock(inp, ch, 2 if b == 0 and stage > 0 else 1))
                inp = ch
            setattr(self, f"layer{stage + 1}", nn.Sequential(*blocks))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class VGG16(nn.Module):
    """dml's --model vgg16 (trainer/model/presets.go): torchvision's
    vgg16_bn layout (features.N, classifier.N) with a classifier of width
    512 for 32×32 images (4096 from 224×224, where it is vgg16_bn)."""

    def __init__(self, classes=10, in_channels=3, size=32):
        super().__init__()
        layers, c = [], in_channels
        for ch, convs in [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]:
            for _ in range(convs):
                layers += [nn.Conv2d(c, ch, 3, padding=1), nn.BatchNorm2d(ch), nn.ReLU(inplace=True)]
                c = ch
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        width, flat = (4096, 512 * (size // 32) ** 2) if size >= 224 else (512, 512 * (size // 32) ** 2)
        self.classifier = nn.Sequential(nn.Linear(flat, width), nn.ReLU(True), nn.Dropout(0.5),
                                        nn.Linear(width, width), nn.ReLU(True), nn.Dropout(0.5), nn.Linear(width, classes))

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (stride on conv2), as dml's bottleneck."""

    def __init__(self, inp, width, stride):
        super().__init__()
        out = 4 * width
        self.conv1 = nn.Conv2d(inp, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or inp != out:
            self.downsample = nn.Sequential(nn.Conv2d(inp, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    """dml's --model resnet50: torchvision's resnet50 (its 7×7 stride-2
    stem and padded max pool) for images of 64 pixels a side or more,
    CIFAR's stem (conv1 3×3, stride 1, no max pool) below."""

    def __init__(self, classes=10, in_channels=3, size=32):
        super().__init__()
        self.imagenet = size >= 64
        if self.imagenet:
            self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, 64, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        inp = 64
        for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(inp, width, 2 if b == 0 and stage > 0 else 1))
                inp = 4 * width
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layer))
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        if self.imagenet:
            x = F.max_pool2d(x, 3, 2, 1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class AlexNet(nn.Module):
    """dml's --model alexnet: AlexNet for 32×32 images with local response
    normalisation (size 5, alpha 1e-4, beta 0.75, k 2) after the first two
    convolutions; torchvision's alexnet names (features.N, classifier.N)."""

    def __init__(self, classes=10, in_channels=3):
        super().__init__()
        lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)  # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 64, 5, padding=2), nn.ReLU(True), lrn(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(True), lrn(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(3, 2))
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), nn.Linear(256 * 3 * 3, 4096), nn.ReLU(True),
            nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(True), nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def build(name, classes=10, in_channels=1, size=32):
    if name == "lenet5":
        return LeNet5(classes, in_channels)
    if name == "resnet20":
        return ResNet20(classes, in_channels)
    if name == "vgg16":
        return VGG16(classes, in_channels)
    if name == "resnet50":
        return ResNet50(classes, in_channels, size)
    if name == "alexnet":
        return AlexNet(classes, in_channels)
    raise SystemExit(f"unknown model {name!r} (want lenet5, resnet20, vgg16, resnet50 or alexnet)")


# Input shape (C, H, W) each preset is evaluated on in these scripts.
SHAPES = {"lenet5": (1, 28, 28), "resnet20": (3, 32, 32), "vgg16": (3, 32, 32), "resnet50": (3, 32, 32), "alexnet": (3, 32, 32)}

# The array whose first dimension is the classes.
HEADS = {"lenet5": "fc3.weight", "resnet20": "fc.weight", "vgg16": "classifier.6.weight", "resnet50": "fc.weight", "alexnet": "classifier.6.weight"}
