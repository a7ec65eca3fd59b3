"""LeNet-5 (LeCun et al., 1998): the first convolutional network that read handwritten digits.

    conv 5x5 -> act -> maxpool 2 -> conv 5x5 -> act -> maxpool 2 -> fc -> act -> fc -> act -> fc

The original saw 32x32 images with unpadded convolutions (32 -> 28 -> 14 -> 10 -> 5). Here both
convolutions are padded ("same" size: padding 2), so the same network reads 8x8 digits
(8 -> 4 -> 2) as well as 28x28 or 32x32 images; only the first fully connected layer changes.

Two later inventions can be switched on: ``batch_norm=True`` puts a BatchNorm2d between each
convolution and its activation, ``dropout=p`` drops the flattened features before the
fully connected layers (the digits demo uses both, with 3x3 kernels: 98-99 % instead of ~97 %).
"""
from __future__ import annotations

from .. import nn
from ._util import check_input, check_input_size, check_positive

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


class LeNet5(nn.Module):
    """``LeNet5(in_channels=1, num_classes=10, input_size=32, channels=(6, 16),
    hidden=(120, 84), activation="relu", kernel_size=5, batch_norm=False, dropout=0.0)``;
    input (N, in_channels, input_size, input_size); kernel_size must be odd ("same" padding)."""

    def __init__(self, in_channels=1, num_classes=10, input_size=32, channels=(6, 16),
                 hidden=(120, 84), activation="relu", kernel_size=5, batch_norm=False,
                 dropout=0.0):
        super().__init__()
        check_positive("LeNet5", in_channels=in_channels, num_classes=num_classes,
                       kernel_size=kernel_size)
        check_input_size("LeNet5", input_size, 4)
        if kernel_size % 2 == 0:
            raise ValueError(f"LeNet5: kernel_size must be odd (padded to keep the image "
                             f"size), got {kernel_size}")
        if not 0 <= dropout < 1:
            raise ValueError(f"LeNet5: dropout must be in [0, 1), got {dropout}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"LeNet5: activation must be one of {sorted(_ACTIVATIONS)}, got "
                             f"{activation!r}")
        c1, c2 = channels
        h1, h2 = hidden
        act = _ACTIVATIONS[activation]
        self.in_channels, self.input_size = in_channels, input_size
        pad = kernel_size // 2
        layers = []
        for cin, cout in ((in_channels, c1), (c1, c2)):
            layers.append(nn.Conv2d(cin, cout, kernel_size=kernel_size, padding=pad))
            if batch_norm:
                layers.append(nn.BatchNorm2d(cout))
            layers += [act(), nn.MaxPool2d(kernel_size=2, stride=2)]
        self.features = nn.Sequential(*layers)
        side = input_size // 4
        layers = [nn.Flatten()]
        if dropout:
            layers.append(nn.Dropout(dropout))
        layers += [nn.Linear(c2 * side * side, h1), act(),
                   nn.Linear(h1, h2), act(),
                   nn.Linear(h2, num_classes)]
        self.classifier = nn.Sequential(*layers)

    def forward(self, x):
        check_input("LeNet5", x, self.in_channels, self.input_size)
        return self.classifier(self.features(x))
