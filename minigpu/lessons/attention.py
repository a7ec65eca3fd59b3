"""Flash attention: the (L, S) score matrix never reaches global memory.

``softmax(q k^T * scale) v`` for B heads of L queries and S keys, two ways, both in
``backends/cuda/attention.py``:

* naive (``attention_naive``): three kernels. The scores go to a (B, L, S) buffer, the row
  softmax reads it three times and writes a second one, the weighted sum reads that Ev times
  over. Global traffic and peak memory grow with L * S.
* flash attention (``attention``, production): one kernel, one block per query tile; K and V
  tiles stream through shared memory, each query row keeps a running max, a running sum and
  its output in registers (the online softmax of course chapter 12), and the output is
  written once. Global traffic is Q, K, V and the output (K and V once per query tile), and
  the only extra memory is the row log-sum-exp (B * L numbers) kept for the backward.

Measured on the simulator (``python -m minigpu.lessons attention`` at the small size, and
``python -m minigpu.lessons attention --sweep`` for the sequence-length sweep: global sectors moved
and peak bytes allocated per length); timed on a GPU against torch's SDPA by
``python -m minigpu.tools.bench --lesson attention``.
"""
from __future__ import annotations

import math

from .. import cuda
from ..backends.cuda.attention import attention, attention_naive
from ..simulator.counters import total
from . import draw
from .record import Experiment, Inputs, Lesson, Problem, Variant

SWEEP = (64, 128, 256)
"""The sequence lengths of ``python -m minigpu.lessons attention --sweep``."""


def _problem(inputs, n=None):
    """B heads of L = S = n queries and keys, head dim E (small: 1 x 32 x 16)."""
    n = n or inputs.size(4096, 32)
    heads, E = inputs.size(16, 1), inputs.size(64, 16)
    q, k, v = (inputs.tensor(heads, n, E) for _ in range(3))
    return Problem(f"B={heads} heads, L=S={n}, E={E}, float32", 4 * heads * n * n * E,
                   q=q, k=k, v=v, heads=heads, n=n, E=E, scale=1 / math.sqrt(E))


def _variant(fn, note):
    return Variant(fn.__name__, note,
                   lambda p: fn(p.q, p.k, p.v, None, False, p.scale)[0], fn)


def measure_lengths(lengths=SWEEP, E=16):
    """[(n, {variant: (global sectors, peak bytes allocated)})]: one head of L = S = n, each
    variant run once under the simulator's counters, its peak memory above the inputs."""
    rows = []
    for n in lengths:
        p = _problem(Inputs(small=True), n)
        row = {}
        for v in EXPERIMENT.variants:
            cuda.synchronize()
            cuda.reset_peak_memory_stats()
            before = cuda.memory_allocated()
            with cuda.counters() as launches:
                v.run(p)
            m = total(launches, v.name).metrics
            row[v.name] = (m["global_load_sectors"] + m["global_store_sectors"],
                           cuda.max_memory_allocated() - before)
        rows.append((n, row))
    return rows


def lengths_table(rows) -> str:
    names = list(rows[0][1])
    out = ["| L = S | " + " | ".join(f"{n} sectors | {n} peak bytes" for n in names) + " |",
           "|---:" + "|---:" * (2 * len(names)) + "|"]
    for n, row in rows:
        out.append(f"| {n} | " + " | ".join(f"{row[v][0]:,} | {row[v][1]:,}" for v in names)
                   + " |")
    return "\n".join(out)


def _pictures():
    p = _problem(Inputs(small=True))
    tr = {v.name: draw.variant_trace(EXPERIMENT, v.name, p, block=None)
          for v in EXPERIMENT.variants}
    top = 1.1 * max(max(draw.traffic_bytes(t).values()) for t in tr.values())
    return [draw.Picture(
        "attention_traffic",
        "Global bytes per array, all blocks, L = S = 32. Naive: the scores kernel reads k "
        "uncoalesced and the (L, S) scores and probabilities are written and read back; "
        "flash attention loads q, k, v into shared tiles and writes the output once.",
        (draw.panel("before: naive, 3 kernels", draw.traffic, tr["attention_naive"],
                    ymax=top),
         draw.panel("after: flash attention, 1 kernel", draw.traffic, tr["attention"],
                    ymax=top)))]


EXPERIMENT = Experiment(
    "attention_forward", _problem,
    (_variant(attention_naive, "scores, softmax, weighted sum: (L, S) twice in memory"),
     _variant(attention, "flash: tiles in shared memory, online softmax, 1 kernel")),
    unit="GFLOP/s", memory_bound=False, tol=dict(rtol=1e-4, atol=1e-5),
    reference=lambda ref, p: ref.attention(p.heads, p.n, p.E),
    look_for="global sectors (bytes_moved) of attention are a fraction of attention_naive's "
             "and its loads go through shared memory: the naive path writes the (L, S) scores "
             "and probabilities and reads them back; flash attention never does.")

LESSON = Lesson(
    "attention", "Flash attention",
    "tiling attention with an online softmax keeps the (L, S) score matrix on chip: global "
    "traffic and memory linear in the sequence length",
    (EXPERIMENT,), pictures=_pictures, sweep=lambda: lengths_table(measure_lengths()))
