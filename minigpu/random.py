"""The global random generator: a seed plus a counter, like CUDA's Philox generators.

Every draw of n numbers uses counters offset..offset+n-1 and then advances the offset, so the
numbers depend only on (seed, how many were drawn before) — identical on cpu and cuda.
"""
from __future__ import annotations

import os

import numpy as np


class Generator:
    """A generator shaped like ``torch.Generator``: ``manual_seed(s)`` (returns itself),
    ``seed()`` (a fresh seed from the OS, returned), ``initial_seed()``, ``get_state()`` /
    ``set_state()`` (here the pair seed, offset). ``device`` is accepted for torch's signature:
    one generator serves every device."""

    def __init__(self, device="cpu"):
        self.device = device
        self.manual_seed(0)

    def manual_seed(self, seed):
        self._seed = int(seed) & 0xFFFFFFFF
        self.offset = 0
        return self

    def seed(self):
        """Seed with a non-deterministic number from the OS and return it."""
        seed = int.from_bytes(os.urandom(4), "little")
        self.manual_seed(seed)
        return seed

    def initial_seed(self):
        return self._seed

    def take(self, n):
        """Reserve n counters; returns (seed, first counter)."""
        start = self.offset
        self.offset += int(n)
        return self._seed, start

    def numpy_rng(self):
        """A NumPy generator for host-side draws (permutations), advancing this generator."""
        seed, offset = self.take(1)
        return np.random.default_rng([seed, offset])

    def get_state(self):
        return np.array([self._seed, self.offset], dtype=np.int64)

    def set_state(self, state):
        self._seed, self.offset = (int(v) for v in state)
        return self


default_generator = Generator()


def manual_seed(seed):
    """Seed the generator used by randn/rand/dropout/initialisation on every device."""
    return default_generator.manual_seed(seed)


def seed():
    """Seed the global generator with a non-deterministic number and return it."""
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()
