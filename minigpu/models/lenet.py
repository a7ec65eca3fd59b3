"""LeNet-5 (LeCun et al., 1998): the first convolutional network that read handwritten digits.

    conv 5x5 -> act -> maxpool 2 -> conv 5x5 -> act -> maxpool 2 -> fc -> act -> fc -> act -> fc

The original saw 32x32 images with unpadded convolutions (32 -> 28 -> 14 -> 10 -> 5). Here both
convolutions are padded ("same" size: padding 2), so the same network reads 8x8 digits
(8 -> 4 -> 2) as well as 28x28 or 32x32 images; only the first fully connected layer changes.
"""
from __future__ import annotations

from .. import nn
from ._util import check_input, check_input_size, check_positive

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


class LeNet5(nn.Module):
    """``LeNet5(in_channels=1, num_classes=10, input_size=32, channels=(6, 16),
    hidden=(120, 84), activation="relu")``; input (N, in_channels, input_size, input_size)."""

    def __init__(self, in_channels=1, num_classes=10, input_size=32, channels=(6, 16),
                 hidden=(120, 84), activation="relu"):
        super().__init__()
        check_positive("LeNet5", in_channels=in_channels, num_classes=num_classes)
        check_input_size("LeNet5", input_size, 4)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"LeNet5: activation must be one of {sorted(_ACTIVATIONS)}, got "
                             f"{activation!r}")
        c1, c2 = channels
        h1, h2 = hidden
        act = _ACTIVATIONS[activation]
        self.in_channels, self.input_size = in_channels, input_size
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, kernel_size=5, padding=2), act(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(c1, c2, kernel_size=5, padding=2), act(),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )
        side = input_size // 4
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(c2 * side * side, h1), act(),
            nn.Linear(h1, h2), act(),
            nn.Linear(h2, num_classes),
        )

    def forward(self, x):
        check_input("LeNet5", x, self.in_channels, self.input_size)
        return self.classifier(self.features(x))
