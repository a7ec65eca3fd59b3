"""Synthetic datasets with torchvision's names (see the package docstring)."""
import numpy as np

import minigpu as torch

# (train size, test size) per dataset: small on purpose (the real ones have 60000 / 50000).
SIZES = {"MNIST": (64, 32), "FashionMNIST": (128, 64), "CIFAR10": (32, 16)}


class _Images:
    """Images of ``shape`` (H, W) or (H, W, C), uint8, from a generator seeded by the index."""

    shape = (28, 28)
    seed = 0

    def __init__(self, root=None, train=True, download=False, transform=None,
                 target_transform=None):
        self.train, self.transform, self.target_transform = train, transform, target_transform
        self.n = SIZES[type(self).__name__][0 if train else 1]

    def _raw(self, index):
        rng = np.random.default_rng([self.seed, int(self.train), index])
        return rng.integers(0, 256, self.shape, dtype=np.uint8), index % 10  # every class

    @property
    def data(self):
        return torch.from_numpy(np.stack([self._raw(i)[0] for i in range(self.n)]))

    @property
    def targets(self):
        return torch.tensor([self._raw(i)[1] for i in range(self.n)], dtype=torch.int64)

    def __getitem__(self, index):
        image, label = self._raw(index)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label

    def __len__(self):
        return self.n


class MNIST(_Images):
    seed = 1


class FashionMNIST(_Images):
    seed = 2


class CIFAR10(_Images):
    shape = (32, 32, 3)
    seed = 3


class FakeData(_Images):
    """torchvision's FakeData: ``size`` random images of ``image_size`` (C, H, W)."""

    seed = 4

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0):
        self.train, self.transform, self.target_transform = True, transform, target_transform
        self.n = size
        c, h, w = image_size
        self.shape = (h, w, c)
