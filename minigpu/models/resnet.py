"""ResNet (He et al., 2015): residual connections let gradients skip layers.

A :class:`BasicBlock` computes ``relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))``. The
shortcut is the identity when shapes match, else a 1x1 strided convolution + BatchNorm
(PyTorch's "option B", named ``downsample`` as in torchvision). Because the block adds ``x``
back, the backward pass of ``+`` hands the upstream gradient straight to ``x``: even a deep
stack starts out close to the identity and trains.

The small ResNets for CIFAR-sized images (He et al. sec. 4.2) have a 3x3 stem, three stages of
widths (16, 32, 64) with stride (1, 2, 2), global average pooling and one linear layer:
depth = 6n + 2, so n = 1 is ``resnet8`` and n = 2 is ``resnet14``.
"""
from __future__ import annotations

from .. import nn
from ._util import check_input, check_input_size, check_positive


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers plus a shortcut; ``stride=2`` halves the image."""

    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = conv3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes))
        else:
            self.downsample = None

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)  # the residual addition


class ResNet(nn.Module):
    """``ResNet(blocks=(1, 1, 1), widths=(16, 32, 64), in_channels=3, num_classes=10,
    input_size=32)``: stage i has ``blocks[i]`` BasicBlocks of ``widths[i]`` channels; every
    stage after the first starts with stride 2. input_size must be divisible by
    2**(len(blocks) - 1)."""

    def __init__(self, blocks=(1, 1, 1), widths=(16, 32, 64), in_channels=3, num_classes=10,
                 input_size=32):
        super().__init__()
        blocks, widths = tuple(blocks), tuple(widths)
        if not blocks or len(blocks) != len(widths):
            raise ValueError(f"ResNet: blocks and widths need the same (non-zero) length, got "
                             f"blocks={blocks} and widths={widths}")
        check_positive("ResNet", in_channels=in_channels, num_classes=num_classes,
                       **{f"blocks[{i}]": b for i, b in enumerate(blocks)},
                       **{f"widths[{i}]": w for i, w in enumerate(widths)})
        check_input_size("ResNet", input_size, 2 ** (len(blocks) - 1))
        self.in_channels, self.input_size = in_channels, input_size
        self.conv1 = conv3x3(in_channels, widths[0])
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU()
        stages, planes = [], widths[0]
        for i, (count, width) in enumerate(zip(blocks, widths, strict=True)):
            stage = []
            for j in range(count):
                stage.append(BasicBlock(planes, width, stride=2 if (i > 0 and j == 0) else 1))
                planes = width
            stages.append(nn.Sequential(*stage))
        # layer1, layer2, ... as in torchvision, so state_dict keys read the same.
        for i, stage in enumerate(stages):
            setattr(self, f"layer{i + 1}", stage)
        self.num_stages = len(stages)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(planes, num_classes)

    def forward(self, x):
        check_input("ResNet", x, self.in_channels, self.input_size)
        x = self.relu(self.bn1(self.conv1(x)))
        for i in range(self.num_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(self.flatten(self.avgpool(x)))


def resnet8(**kwargs):
    """8 layers: stem + 3 stages x 1 BasicBlock x 2 convs + fc."""
    return ResNet(blocks=(1, 1, 1), **kwargs)


def resnet14(**kwargs):
    """14 layers: stem + 3 stages x 2 BasicBlocks x 2 convs + fc."""
    return ResNet(blocks=(2, 2, 2), **kwargs)
