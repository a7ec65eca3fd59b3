"""AlexNet (Krizhevsky et al., 2012), scaled down for small images.

The original: five convolutions (11x11 stride 4, 5x5, then three 3x3), three max-pools, and a
4096-4096 fully connected head with dropout, on 224x224 ImageNet crops. Here every convolution
is 3x3 "same" (an 8x8 image has no room for an 11x11 stride-4 filter) and the widths shrink,
but the shape of the network is kept: conv-pool, conv-pool, conv-conv-conv-pool, and a
dropout / ReLU MLP head.
"""
from __future__ import annotations

from .. import nn
from ._util import check_input, check_input_size, check_positive


class AlexNet(nn.Module):
    """``AlexNet(in_channels=3, num_classes=10, input_size=32, width=16, hidden=128,
    dropout=0.5)``. Channels are width * (1, 2, 4, 4, 2) like the original's 64-192-384-256-256
    progression; input_size must be a multiple of 8."""

    def __init__(self, in_channels=3, num_classes=10, input_size=32, width=16, hidden=128,
                 dropout=0.5):
        super().__init__()
        check_positive("AlexNet", in_channels=in_channels, num_classes=num_classes,
                       width=width, hidden=hidden)
        check_input_size("AlexNet", input_size, 8)
        c1, c2, c3, c4, c5 = (width * m for m in (1, 2, 4, 4, 2))
        self.in_channels, self.input_size = in_channels, input_size
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(c1, c2, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(c2, c3, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv2d(c3, c4, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv2d(c4, c5, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )
        side = input_size // 8
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(dropout), nn.Linear(c5 * side * side, hidden), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        check_input("AlexNet", x, self.in_channels, self.input_size)
        return self.classifier(self.features(x))
