"""The exercises: inputs on random ragged shapes, the launch, the NumPy reference and the
access budgets (measured with :func:`minigpu.cuda.counters`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

COURSE = "docs/course/"


@dataclass(frozen=True)
class Budget:
    """``measure(launch, n_outputs, module) <= limit``, else: ``label`` is over budget."""
    label: str
    measure: Callable
    limit: float
    chapter: str


@dataclass(frozen=True)
class Exercise:
    name: str
    chapter: str                     # the page that teaches it
    summary: str
    shapes: tuple                    # problem sizes drawn for the correctness layer
    inputs: Callable                 # (rng, shape) -> tuple of NumPy arrays (last = output)
    launch: Callable                 # (module, shape) -> (grid, block)
    reference: Callable              # (*inputs without output) -> expected output
    budgets: tuple = ()
    rtol: float = 1e-5
    block_threads: int = 0           # threads per block, for the static occupancy
    min_occupancy: float = 0.5
    max_registers: int = 64


def _ceil(a, b):
    return -(-a // b)


def per_request(kind):
    def f(k, n, mod):
        req = k[f"{kind}_requests"]
        return k[f"{kind}_sectors" if kind.startswith("global") else f"{kind}_wavefronts"] / max(req, 1)
    return f


def per_block(metric):
    return lambda k, n, mod: k[metric] / _blocks(k)


def _blocks(k):
    g = k.grid
    return g[0] * g[1] * g[2]


def per_output(metric):
    return lambda k, n, mod: k[metric] / n


def _stencil_ref(x):
    p = np.pad(x, 1)
    return (p[:-2] + p[1:-1] + p[2:]).astype(np.float32)


def _block_sums(x, tpb):
    p = np.pad(x, (0, (-len(x)) % tpb)).reshape(-1, tpb)
    return p.sum(axis=1, dtype=np.float64).astype(np.float32)


def _ch(n):
    return COURSE + n


EXERCISES = [
    Exercise(
        "stencil", _ch("02-shared-memory.md"),
        "1-D 3-point stencil with a shared-memory halo",
        shapes=(77, 100),
        inputs=lambda rng, n: (rng.standard_normal(n).astype(np.float32),
                               np.zeros(n, np.float32)),
        launch=lambda m, n: (_ceil(n, m.TPB), m.TPB),
        reference=_stencil_ref,
        budgets=(Budget("global load sectors per output", per_output("global_load_sectors"),
                        0.3, _ch("02-shared-memory.md")),),
        block_threads=32, min_occupancy=0.5),
    Exercise(
        "histogram", _ch("06-atomics.md"),
        "histogram with per-block shared-memory bins (atomics)",
        shapes=(150, 200),
        inputs=lambda rng, n: (rng.integers(0, 16, n).astype(np.int32), np.zeros(16, np.int32)),
        launch=lambda m, n: (_ceil(n, m.TPB), m.TPB),
        reference=lambda v: np.bincount(v, minlength=16).astype(np.int32),
        budgets=(Budget("global atomics per bin per block",
                        lambda k, n, mod: k.global_atomics / (_blocks(k) * mod.NBINS), 1.0,
                        _ch("06-atomics.md")),),
        block_threads=64, min_occupancy=0.5),
    Exercise(
        "transpose", _ch("03-bank-conflicts.md"),
        "coalesced transpose through a padded shared tile",
        shapes=((33, 65), (40, 40)),
        inputs=lambda rng, s: (rng.standard_normal(s).astype(np.float32),
                               np.zeros(s[::-1], np.float32)),
        launch=lambda m, s: ((_ceil(s[1], m.TILE), _ceil(s[0], m.TILE)), (m.TILE, m.ROWS)),
        reference=lambda a: np.ascontiguousarray(a.T),
        budgets=(Budget("global load sectors per request", per_request("global_load"), 4.5,
                        _ch("01-coalescing.md")),
                 Budget("global store sectors per request", per_request("global_store"), 4.5,
                        _ch("01-coalescing.md")),
                 Budget("shared load wavefronts per request", per_request("shared_load"), 1.0,
                        _ch("03-bank-conflicts.md"))),
        block_threads=256, min_occupancy=0.5),
    Exercise(
        "reduction", _ch("05-warp-shuffles.md"),
        "block sums: a tree, then warp shuffles",
        shapes=(300, 500),
        inputs=lambda rng, n: (rng.standard_normal(n).astype(np.float32),
                               np.zeros(_ceil(n, 128), np.float32)),
        launch=lambda m, n: (_ceil(n, m.TPB), m.TPB),
        reference=lambda x: _block_sums(x, 128),
        rtol=1e-4,
        budgets=(Budget("barriers per block", per_block("barriers"), 2,
                        _ch("05-warp-shuffles.md")),),
        block_threads=128, min_occupancy=0.5),
]



def per_warp(metric):
    return lambda k, n, mod: k[metric] / (_blocks(k) * -(-k.block[0] * k.block[1] * k.block[2] // 32))


def _segmented_cumsum(x, tpb):
    p = np.pad(x.astype(np.float64), (0, (-len(x)) % tpb)).reshape(-1, tpb)
    return np.cumsum(p, axis=1).ravel()[:len(x)].astype(np.float32)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _epilogue(x, bias):
    v = x + bias
    return np.where(v > 0, v, np.float32(0.1) * v).astype(np.float32)


EXERCISES += [
    Exercise(
        "scan", _ch("07-scan.md"),
        "block-wise inclusive scan (Hillis-Steele in shared memory)",
        shapes=(150, 200),
        inputs=lambda rng, n: (rng.standard_normal(n).astype(np.float32),
                               np.zeros(n, np.float32)),
        launch=lambda m, n: (_ceil(n, m.TPB), m.TPB),
        reference=lambda x: _segmented_cumsum(x, 64),
        rtol=1e-4,
        budgets=(Budget("global load sectors per output", per_output("global_load_sectors"),
                        0.3, _ch("07-scan.md")),
                 Budget("barriers per block", per_block("barriers"), 13, _ch("07-scan.md"))),
        block_threads=64, min_occupancy=0.5),
    Exercise(
        "matmul", _ch("08-matmul.md"),
        "shared-memory tiled matmul",
        shapes=((20, 24, 18), (33, 17, 40)),
        inputs=lambda rng, s: (rng.standard_normal(s[:2]).astype(np.float32),
                               rng.standard_normal(s[1:]).astype(np.float32),
                               np.zeros((s[0], s[2]), np.float32)),
        launch=lambda m, s: ((_ceil(s[2], m.TILE), _ceil(s[0], m.TILE)), (m.TILE, m.TILE)),
        reference=lambda a, b: (a.astype(np.float64) @ b).astype(np.float32),
        rtol=1e-4,
        # the budget shape has K = 24: two tile steps, one request of a and one of b each
        budgets=(Budget("global load requests per warp (K = 24, 2 tile steps)",
                        per_warp("global_load_requests"), 4, _ch("08-matmul.md")),),
        block_threads=256, min_occupancy=0.5),
    Exercise(
        "softmax", _ch("05-warp-shuffles.md"),
        "row softmax, one warp per row",
        shapes=((10, 50), (9, 70)),
        inputs=lambda rng, s: (rng.standard_normal(s).astype(np.float32),
                               np.zeros(s, np.float32)),
        launch=lambda m, s: (_ceil(s[0], m.WARPS), 32 * m.WARPS),
        reference=_softmax,
        budgets=(Budget("global load sectors per request", per_request("global_load"), 4.5,
                        _ch("01-coalescing.md")),
                 Budget("barriers per block", per_block("barriers"), 0,
                        _ch("05-warp-shuffles.md"))),
        block_threads=128, min_occupancy=0.5),
    Exercise(
        "epilogue", _ch("10-fusion-constant-streams.md"),
        "fused bias + leaky-ReLU epilogue",
        shapes=((20, 70), (9, 40)),
        inputs=lambda rng, s: (rng.standard_normal(s).astype(np.float32),
                               rng.standard_normal(s[1]).astype(np.float32),
                               np.zeros(s, np.float32)),
        launch=lambda m, s: ((_ceil(s[1], m.BX), _ceil(s[0], m.BY)), (m.BX, m.BY)),
        reference=_epilogue,
        budgets=(Budget("global load sectors per request", per_request("global_load"), 4.5,
                        _ch("01-coalescing.md")),
                 Budget("global store sectors per request", per_request("global_store"), 4.5,
                        _ch("01-coalescing.md"))),
        block_threads=256, min_occupancy=0.5),
]

BY_NAME = {e.name: e for e in EXERCISES}
