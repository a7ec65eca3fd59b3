"""VGG (Simonyan & Zisserman, 2014): depth from one repeated pattern.

Only 3x3 convolutions (padding 1, size kept) and 2x2 max-pools (size halved). A configuration
list says it all: a number is a conv layer with that many output channels (followed by ReLU,
and BatchNorm2d before it when ``batch_norm=True``), ``"M"`` is a max-pool. Two stacked 3x3
convolutions see a 5x5 window with fewer weights than one 5x5 convolution, and a ReLU between.
"""
from __future__ import annotations

import numbers

from .. import nn
from ._util import check_input, check_input_size, check_positive

# Small configurations in the spirit of VGG-11/13/16 (same layer pattern, 1/4-1/8 the width).
VGG_CFGS = {
    "vgg-tiny": (16, "M", 32, "M", 64, "M"),
    "vgg11": (16, "M", 32, "M", 64, 64, "M", 128, 128, "M"),
    "vgg13": (16, 16, "M", 32, 32, "M", 64, 64, "M", 128, 128, "M"),
    "vgg16": (16, 16, "M", 32, 32, "M", 64, 64, 64, "M", 128, 128, 128, "M"),
}


class VGG(nn.Module):
    """``VGG(cfg="vgg11", in_channels=3, num_classes=10, input_size=32, batch_norm=False,
    hidden=128, dropout=0.5)``; ``cfg`` is a name of :data:`VGG_CFGS` or a list such as
    ``[16, "M", 32, "M"]``. input_size must be divisible by 2**(number of "M")."""

    def __init__(self, cfg="vgg11", in_channels=3, num_classes=10, input_size=32,
                 batch_norm=False, hidden=128, dropout=0.5):
        super().__init__()
        if isinstance(cfg, str):
            if cfg not in VGG_CFGS:
                raise ValueError(f"VGG: unknown cfg {cfg!r}; expected one of {sorted(VGG_CFGS)} "
                                 f"or a list of channel counts and 'M'")
            cfg = VGG_CFGS[cfg]
        cfg = tuple(cfg)
        for item in cfg:
            if item != "M" and (not isinstance(item, numbers.Integral) or item < 1):
                raise ValueError(f"VGG: cfg entries must be positive channel counts or 'M', "
                                 f"got {item!r}")
        if not any(item != "M" for item in cfg):
            raise ValueError("VGG: cfg needs at least one convolution")
        check_positive("VGG", in_channels=in_channels, num_classes=num_classes, hidden=hidden)
        pools = cfg.count("M")
        check_input_size("VGG", input_size, 2 ** pools)
        self.cfg, self.in_channels, self.input_size = cfg, in_channels, input_size
        layers, channels = [], in_channels
        for item in cfg:
            if item == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
                continue
            layers.append(nn.Conv2d(channels, item, kernel_size=3, padding=1))
            if batch_norm:
                layers.append(nn.BatchNorm2d(item))
            layers.append(nn.ReLU())
            channels = item
        self.features = nn.Sequential(*layers)
        side = input_size // 2 ** pools
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(channels * side * side, hidden), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        check_input("VGG", x, self.in_channels, self.input_size)
        return self.classifier(self.features(x))


def vgg(name="vgg11", **kwargs):
    """``vgg("vgg16", batch_norm=True, input_size=32)``: a :class:`VGG` from a named cfg."""
    return VGG(cfg=name, **kwargs)
