"""Real data that ships inside installed packages: nothing is downloaded at run time.

* :func:`load_digits` - scikit-learn's 1 797 handwritten digits (8x8, 16 grey levels), with a
  fixed stratified train/test split.
* :func:`load_text` - Python source text from the standard library, for character models.
"""
from __future__ import annotations

import inspect

import numpy as np

from .tensor import Tensor


def load_digits(split="train", test_fraction=0.2, seed=0, device="cpu"):
    """``(images, labels)``: images float32 (N, 1, 8, 8) scaled to [0, 1], labels int64.

    The split is stratified (each class keeps the same train/test ratio) and fixed by ``seed``.
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as e:
        raise ImportError("the digits dataset ships with scikit-learn: "
                          "pip install 'minigpu[demos]'") from e
    bunch = sklearn_digits()
    images = (bunch.images / 16.0).astype(np.float32)[:, None]
    labels = bunch.target.astype(np.int64)
    if split != "all":
        rng = np.random.default_rng(seed)
        test = np.zeros(len(labels), dtype=bool)
        for c in np.unique(labels):
            members = rng.permutation(np.flatnonzero(labels == c))
            test[members[:int(round(len(members) * test_fraction))]] = True
        keep = test if split == "test" else ~test
        images, labels = images[keep], labels[keep]
    return Tensor._from_array(images, device), Tensor._from_array(labels, device)


TEXT_MODULES = ("textwrap", "heapq", "bisect", "fnmatch", "shlex", "string", "colorsys")


def load_text(modules=TEXT_MODULES) -> str:
    """Source code of a few standard-library modules, joined: a corpus every Python has."""
    import importlib

    return "\n".join(inspect.getsource(importlib.import_module(m)) for m in modules)
