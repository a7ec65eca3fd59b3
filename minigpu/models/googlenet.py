"""GoogLeNet (Szegedy et al., 2014): the Inception block looks at several scales at once.

One :class:`Inception` block runs four branches on the same input and concatenates their
outputs along the channel axis (``minigpu.cat(..., dim=1)``; its backward splits the gradient
back into the four branches):

    1x1 conv | 1x1 conv -> 3x3 conv | 1x1 conv -> 5x5 conv | 3x3 max-pool -> 1x1 conv

The cheap 1x1 "reduce" convolutions shrink the channel count before the expensive 3x3 and 5x5
ones. The small GoogLeNet here: a 3x3 stem, two Inception blocks, a max-pool, two more blocks,
global average pooling, dropout and one linear layer (the original has nine blocks and two
auxiliary classifiers).
"""
from __future__ import annotations

from .. import nn
from ..ops import cat
from ._util import check_input, check_input_size, check_positive


class Inception(nn.Module):
    """``Inception(in_channels, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj)``: out
    channels = ch1x1 + ch3x3 + ch5x5 + pool_proj, spatial size unchanged."""

    def __init__(self, in_channels, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj):
        super().__init__()
        self.branch1 = nn.Sequential(nn.Conv2d(in_channels, ch1x1, kernel_size=1), nn.ReLU())
        self.branch2 = nn.Sequential(
            nn.Conv2d(in_channels, ch3x3red, kernel_size=1), nn.ReLU(),
            nn.Conv2d(ch3x3red, ch3x3, kernel_size=3, padding=1), nn.ReLU())
        self.branch3 = nn.Sequential(
            nn.Conv2d(in_channels, ch5x5red, kernel_size=1), nn.ReLU(),
            nn.Conv2d(ch5x5red, ch5x5, kernel_size=5, padding=2), nn.ReLU())
        self.branch4 = nn.Sequential(
            nn.MaxPool2d(kernel_size=3, stride=1, padding=1),
            nn.Conv2d(in_channels, pool_proj, kernel_size=1), nn.ReLU())
        self.out_channels = ch1x1 + ch3x3 + ch5x5 + pool_proj

    def forward(self, x):
        return cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], dim=1)


class GoogLeNet(nn.Module):
    """``GoogLeNet(in_channels=3, num_classes=10, input_size=32, width=8, dropout=0.2)``;
    ``width`` scales every branch (the first block has 4 * width output channels)."""

    def __init__(self, in_channels=3, num_classes=10, input_size=32, width=8, dropout=0.2):
        super().__init__()
        check_positive("GoogLeNet", in_channels=in_channels, num_classes=num_classes,
                       width=width)
        check_input_size("GoogLeNet", input_size, 2)
        w = width
        self.in_channels, self.input_size = in_channels, input_size
        self.conv1 = nn.Sequential(nn.Conv2d(in_channels, 2 * w, kernel_size=3, padding=1),
                                   nn.ReLU())
        # (in, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj): the original's proportions.
        self.inception3a = Inception(2 * w, w, w, 2 * w, w // 2 or 1, w // 2 or 1, w // 2 or 1)
        c = self.inception3a.out_channels
        self.inception3b = Inception(c, 2 * w, w, 2 * w, w // 2 or 1, w, w)
        c = self.inception3b.out_channels
        self.maxpool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.inception4a = Inception(c, 2 * w, w, 3 * w, w // 2 or 1, w, w)
        c = self.inception4a.out_channels
        self.inception4b = Inception(c, 2 * w, 2 * w, 4 * w, w // 2 or 1, w, w)
        c = self.inception4b.out_channels
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        check_input("GoogLeNet", x, self.in_channels, self.input_size)
        x = self.conv1(x)
        x = self.inception3b(self.inception3a(x))
        x = self.maxpool(x)
        x = self.inception4b(self.inception4a(x))
        return self.fc(self.dropout(self.flatten(self.avgpool(x))))
