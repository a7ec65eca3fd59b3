"""The global random generator: a seed plus a counter, like CUDA's Philox generators.

Every draw of n numbers uses counters offset..offset+n-1 and then advances the offset, so the
numbers depend only on (seed, how many were drawn before) — identical on cpu and cuda.
"""
from __future__ import annotations

import numpy as np


class Generator:
    def __init__(self, seed=0):
        self.manual_seed(seed)

    def manual_seed(self, seed):
        self.seed = int(seed) & 0xFFFFFFFF
        self.offset = 0
        return self

    def initial_seed(self):
        return self.seed

    def take(self, n):
        """Reserve n counters; returns (seed, first counter)."""
        start = self.offset
        self.offset += int(n)
        return self.seed, start

    def numpy_rng(self):
        """A NumPy generator for host-side draws (permutations), advancing this generator."""
        seed, offset = self.take(1)
        return np.random.default_rng([seed, offset])

    def get_state(self):
        return np.array([self.seed, self.offset], dtype=np.int64)

    def set_state(self, state):
        self.seed, self.offset = (int(v) for v in state)


default_generator = Generator(0)


def manual_seed(seed):
    """Seed the generator used by randn/rand/dropout/initialisation on every device."""
    return default_generator.manual_seed(seed)


def initial_seed():
    return default_generator.initial_seed()
