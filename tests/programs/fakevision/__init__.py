"""A stand-in for torchvision's datasets, transforms and utils, for the program corpus.

torchvision is not a dependency and the corpus must not download MNIST or CIFAR, so the
programs' data lines import this package instead: the same class names and call signatures,
serving deterministic synthetic images of the real datasets' shapes and dtypes (uint8
pixels, int64 labels), each generated from its index so that every worker process and both
engines see the same sample. The datasets are small (sizes below) to keep the corpus cheap.

The tensors are made by ``import minigpu as torch``: when the lockstep harness runs a program
under PyTorch it maps ``minigpu`` to ``torch``, so this package then serves torch tensors.
"""
from . import datasets, transforms, utils  # noqa: F401
