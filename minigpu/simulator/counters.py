"""Performance counters from the simulator: what Nsight Compute would count, without a GPU.

``with minigpu.cuda.counters() as launches:`` records every kernel launch made inside the block
(under ``NUMBA_ENABLE_CUDASIM=1``) as one :class:`KernelCounters` in ``launches``, with
``name``, ``grid``, ``block`` and ``metrics``. ``print(launches)`` is a table, one column per
launch. Outside the context manager nothing is counted: the simulator's observer lists are
empty, which costs one truthiness test per access.

How the metrics are counted (see :data:`METRICS` for the list):

request
    One warp-level execution of one load or store in the source: the lanes of one warp (32
    consecutive linear thread ids of a block) at the same source line, of the same kind, on the
    same array, at the same *dynamic occurrence* — the k-th time each lane executed that
    access — so a loop's iterations are separate requests and lanes that run ahead or behind
    still group with their own iteration.
sectors (global memory)
    The distinct 32-byte segments the active lanes of a request touch. Addresses are byte
    offsets from the start of each array's buffer, taken as 256-byte aligned (``cudaMalloc``).
    No cache is modelled: bytes moved = 32 x sectors, loads plus stores (an upper bound on
    DRAM traffic when caches hit, the exact L1 request traffic).
wavefronts (shared memory)
    For one request, the largest number of distinct 4-byte words its lanes touch in any one of
    the 32 banks (bank = word % 32, words counted from each shared array's start); lanes on the
    same word share it (broadcast). Bank conflicts = wavefronts - requests. An 8-byte element
    covers two words, so a full warp of float64 needs 2 wavefronts, as on the hardware.
barriers
    Completed block-level barriers (``syncthreads*``), summed over blocks.
atomics
    Atomic operations, one per thread that executed one (global and shared).
warp_efficiency
    Mean fraction of active lanes (out of 32) over the warp-level executions of the memory
    accesses (global, shared and atomic requests). This is an approximation of Nsight's
    "executions of source lines": tracing every line would cost a trace hook per line, and
    every line that matters for divergence in these kernels touches memory.
sector_efficiency
    Requested bytes / fetched bytes over global requests (requested = the distinct bytes the
    lanes of a request asked for; fetched = 32 x its sectors).
h100_predicted_us, h200_predicted_us
    A predicted time, not a measurement (:func:`predicted_us`, the model and its numbers in
    :data:`GPUS`): launch overhead + the larger of bytes moved / DRAM bandwidth and FLOPs /
    FP32 peak, the first divided by the achieved share of bandwidth that the occupancy allows
    when it is known. The counters count no arithmetic and no occupancy, so here FLOPs are 0
    and the occupancy is taken as enough: for a memory-bound kernel this is the time to
    expect, within the model's assumptions (no cache hits, a grid that fills the GPU).

Both paths of the simulator count, with one function (:func:`_count`), so their numbers are
the same: ``compiled.py``'s compiled path writes a log of its accesses, the checked path's array
proxies report each one (they are on by default; with ``MINIGPU_SIM_CHECKS=0`` they are still
made while a ``counters()`` block is active). Local arrays are not counted (registers,
usually).
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import numpy as np

from . import memory

SECTOR = 32
BANKS = 32
WARP = 32

METRICS = ("global_load_requests", "global_load_sectors", "global_store_requests",
           "global_store_sectors", "shared_load_requests", "shared_load_wavefronts",
           "shared_store_requests", "shared_store_wavefronts", "barriers", "atomics",
           "warp_efficiency", "bytes_moved", "sector_efficiency", "h100_predicted_us",
           "h200_predicted_us")
COUNTS = METRICS[:10]


# --- the time model ----------------------------------------------------------------------------
@dataclass(frozen=True)
class GPU:
    """The numbers the time model uses for one GPU (NVIDIA's datasheets, SXM parts)."""
    name: str
    dram_bytes_per_s: float       # HBM bandwidth
    fp32_flops_per_s: float       # FP32 peak without tensor cores (an FMA counts as 2)


GPUS = {"h100": GPU("H100 SXM", 3.35e12, 67e12),      # HBM3 3.35 TB/s, FP32 67 TFLOPS
        "h200": GPU("H200 SXM", 4.8e12, 67e12)}       # HBM3e 4.8 TB/s, the same GH100 SMs
LAUNCH_US = 3.0
"""Launch overhead per kernel, an assumption: a few microseconds from the launch call to the
kernel's end for an empty kernel (the first GPU run of ``benchmarks/gpu_run.sh`` calibrates
it: each benchmark row records its predicted time next to the measured one)."""
SATURATING_OCCUPANCY = 0.5
"""An assumption: from half the resident warps an SM can hold, enough loads are in flight to
reach the DRAM bandwidth; below it the achieved bandwidth falls in proportion."""
ASSUMPTIONS = (f"predicted = {LAUNCH_US:g} us launch + max(bytes / DRAM bandwidth, FLOPs / FP32 "
               f"peak); H100 SXM 3.35 TB/s, H200 4.8 TB/s, 67 TFLOPS FP32; no cache hits; "
               f"counters count no FLOPs")


def predicted_us(bytes_moved, flops=0.0, gpu="h200", occupancy=None, launches=1) -> float:
    """Predicted time in microseconds of ``launches`` kernel launches moving ``bytes_moved``
    bytes of DRAM traffic and doing ``flops`` FP32 operations on ``gpu`` ("h100"/"h200"):
    ``launches * LAUNCH_US + max(bytes / bandwidth, flops / peak)``, the bandwidth term
    divided by ``min(1, occupancy / SATURATING_OCCUPANCY)`` when the theoretical occupancy is
    given (:func:`minigpu.lessons.occupancy.theoretical_occupancy`)."""
    g = GPUS[gpu]
    share = 1.0 if occupancy is None else min(1.0, occupancy / SATURATING_OCCUPANCY)
    memory = bytes_moved / (g.dram_bytes_per_s * max(share, 1e-3))
    return launches * LAUNCH_US + max(memory, flops / g.fp32_flops_per_s) * 1e6


@dataclass
class KernelCounters:
    """One kernel launch: its name, grid and block dimensions and its metrics."""
    name: str
    grid: tuple
    block: tuple
    metrics: dict = field(default_factory=dict)

    def __getitem__(self, metric):
        return self.metrics[metric]


def derive(counts: dict, requested_load: int, requested_store: int, lanes: int,
           executions: int, launches: int = 1) -> dict:
    """The full metrics dict from raw counts of ``launches`` launches (also used to sum
    several). ``_raw``
    keeps the raw numbers: requested load bytes, requested store bytes, active lanes and
    warp-level executions (for :func:`total` and per-direction efficiencies)."""
    m = {k: counts.get(k, 0) for k in COUNTS}
    moved = SECTOR * (m["global_load_sectors"] + m["global_store_sectors"])
    m["warp_efficiency"] = lanes / (WARP * executions) if executions else None
    m["bytes_moved"] = moved
    m["sector_efficiency"] = (requested_load + requested_store) / moved if moved else None
    for gpu in GPUS:
        m[f"{gpu}_predicted_us"] = predicted_us(moved, gpu=gpu, launches=launches)
    m["_raw"] = (requested_load, requested_store, lanes, executions)
    return m


def total(entries, name="total") -> KernelCounters:
    """One entry summing several launches (e.g. every launch of one lesson variant)."""
    counts = {k: sum(e.metrics[k] for e in entries) for k in COUNTS}
    raw = [sum(e.metrics["_raw"][i] for e in entries) for i in range(4)]
    grid = entries[0].grid if len(entries) == 1 else f"{len(entries)} launches"
    block = entries[0].block if len(entries) == 1 else ""
    return KernelCounters(name, grid, block, derive(counts, *raw, launches=len(entries)))


class Counters(list):
    """The list ``counters()`` returns; ``str()`` is a table with one column per launch."""

    def __str__(self):
        return table(self)


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def rows(entries):
    """(header, [metric, value per entry] rows) of the table, for text and markdown."""
    header = ["metric"] + [e.name for e in entries]
    body = [["grid"] + [_fmt(e.grid) for e in entries], ["block"] + [_fmt(e.block) for e in entries]]
    derived = {"sector_efficiency", "warp_efficiency"}
    for k in METRICS:
        label = k + (" (%)" if k in derived else "")
        vals = [e.metrics[k] for e in entries]
        body.append([label] + [_fmt(v * 100 if k in derived and v is not None else v)
                               for v in vals])
    return header, body


def table(entries, width=22):
    """A fixed-width text table like Nsight Compute's summary (metrics down, launches across)."""
    if not entries:
        return "(no kernel launches recorded)"
    header, body = rows(entries)
    header = [h if len(h) <= width else h[:width - 1] + "~" for h in header]
    w0 = max(len(r[0]) for r in body + [header])
    ws = [max(len(r[i]) for r in body + [header]) for i in range(1, len(header))]
    line = lambda r: "  ".join([r[0].ljust(w0)] + [c.rjust(w) for c, w in zip(r[1:], ws)])
    return "\n".join([line(header), "-" * len(line(header))] + [line(r) for r in body]
                     + [f"({ASSUMPTIONS})"])


# One row of a launch's access log, as both paths give it: the checked interpreter's
# :class:`~.memory.Access` records (converted by :meth:`Recorder.end`) and the compiled path's
# log (written by ``compiled_memory.py``). ``site`` and ``array`` are any integers that tell
# sites and arrays apart within the launch; ``block`` and ``thread`` are linear indices.
SITE, KIND, SPACE, ARRAY, BLOCK, THREAD, OFFSET, ITEMSIZE = range(8)
LOAD, STORE, ATOMIC = 0, 1, 2
GLOBAL, SHARED, LOCAL = 0, 1, 2
_KINDS = {"load": LOAD, "store": STORE, "atomic": ATOMIC}
_SPACES = {"global": GLOBAL, "shared": SHARED, "local": LOCAL}


class Recorder:
    """The observer: collects one launch's accesses, turns them into metrics at its end.

    The checked path calls it once per access (an :class:`~.memory.Access`) and once per
    completed barrier; the compiled path hands over the whole launch's log at once
    (:meth:`log`)."""

    def __init__(self, out):
        self.out = out
        self.accesses, self.logs = [], []
        self.barriers = 0
        self.dims = None

    def __call__(self, access):
        self.accesses.append(access)

    def launch(self, name, grid, block):
        self.accesses, self.logs, self.barriers = [], [], 0
        self.dims = (name, tuple(grid), tuple(block))

    def barrier(self):
        self.barriers += 1

    def log(self, rows, barriers):
        """A compiled launch's access log (an int64 array, one row per access) and its
        completed barriers."""
        self.logs.append(rows)
        self.barriers += barriers

    def end(self):
        name, grid, block = self.dims
        rows = np.concatenate([_rows(self.accesses, grid, block)] + self.logs)
        counts, raw = _count(rows)
        counts["barriers"] = self.barriers
        self.out.append(KernelCounters(name, grid, block, derive(counts, *raw)))
        self.accesses, self.logs, self.dims = [], [], None


def _rows(accesses, grid, block):
    """The checked path's :class:`~.memory.Access` records as log rows."""
    sites = {}
    rows = np.empty((len(accesses), 8), np.int64)
    for r, a in zip(rows, accesses):
        x, y, z = a.thread
        bx, by, bz = a.block
        r[:] = (sites.setdefault(a.site, len(sites)), _KINDS[a.kind], _SPACES[a.space],
                a.array_id, bx + grid[0] * (by + grid[1] * bz),
                x + block[0] * (y + block[1] * z), a.offset, a.itemsize)
    return rows


def _codes(*columns):
    """One integer per row, equal exactly where the rows are equal in every column (the
    columns packed in mixed radix; a column or a partial code too wide is first renumbered
    densely), so that grouping rows is sorting one integer array."""
    code, scale = np.zeros(len(columns[0]), np.int64), 1
    for col in columns:
        lo, span = (int(col.min()), int(col.max()) - int(col.min()) + 1) if len(col) else (0, 1)
        if span > 1 << 24:
            col = np.unique(col, return_inverse=True)[1].reshape(-1)
            lo, span = 0, int(col.max()) + 1
        if scale * span >= 1 << 62:
            code = np.unique(code, return_inverse=True)[1].reshape(-1)
            scale = int(code.max()) + 1
        code += (col - lo) * scale
        scale *= span
    return code


def _count(rows):
    """Metrics of one launch from its log rows (see the module docstring for the rules).

    Each access is numbered by its dynamic occurrence (the k-th time its thread made it at
    that site, of that kind, on that array); a request is the accesses of one warp with the
    same space, kind, block, site, array and occurrence."""
    rows = rows[rows[:, SPACE] != LOCAL]
    n = len(rows)
    counts = dict.fromkeys(COUNTS, 0)
    counts["atomics"] = int((rows[:, KIND] == ATOMIC).sum())
    if n == 0:
        return counts, (0, 0, 0, 0)
    space, kind, site, array = rows[:, SPACE], rows[:, KIND], rows[:, SITE], rows[:, ARRAY]
    per_thread = _codes(rows[:, BLOCK], rows[:, THREAD], site, kind, array)
    order = np.argsort(per_thread, kind="stable")   # a thread's accesses stay in their order
    ordered = per_thread[order]
    new = np.ones(n, bool)
    new[1:] = ordered[1:] != ordered[:-1]
    occurrence = np.empty(n, np.int64)
    occurrence[order] = np.arange(n) - np.maximum.accumulate(np.where(new, np.arange(n), 0))
    requests, request = np.unique(
        _codes(space, kind, rows[:, BLOCK], rows[:, THREAD] // WARP, site, array, occurrence),
        return_inverse=True)
    request = request.reshape(-1)
    offset, size = rows[:, OFFSET], rows[:, ITEMSIZE]
    requested = {}
    for op, code in (("load", LOAD), ("store", STORE)):
        for where, code_space in (("global", GLOBAL), ("shared", SHARED)):
            mine = (space == code_space) & (kind == code)
            counts[f"{where}_{op}_requests"] = len(np.unique(request[mine]))
        mine = np.flatnonzero((space == GLOBAL) & (kind == code))
        counts[f"global_{op}_sectors"] = len(_distinct_units(request[mine], offset[mine],
                                                             size[mine], SECTOR)[0])
        _, first = np.unique(_codes(request[mine], offset[mine], size[mine]), return_index=True)
        requested[op] = int(size[mine][first].sum())
        mine = np.flatnonzero((space == SHARED) & (kind == code))
        counts[f"shared_{op}_wavefronts"] = _wavefronts(request[mine], offset[mine], size[mine])
    return counts, (requested["load"], requested["store"], n, len(requests))


def _distinct_units(request, offset, size, unit):
    """The distinct (request, unit) pairs the accesses touch (``unit``-byte segments), as two
    arrays."""
    first, last = offset // unit, (offset + size - 1) // unit
    pairs = [(request[m], first[m] + k) for k in range(int((last - first).max(initial=0)) + 1)
             for m in [first + k <= last]]
    request, units = (np.concatenate(c) for c in zip(*pairs)) if pairs else (first, first)
    _, at = np.unique(_codes(request, units), return_index=True) if len(units) else (0, units)
    return request[at], units[at]


def _wavefronts(request, offset, size):
    """Summed over shared requests: the most distinct 4-byte words any one bank must serve
    (lanes on one word share it)."""
    request, words = _distinct_units(request, offset, size, 4)
    if len(words) == 0:
        return 0
    _, at, per_bank = np.unique(_codes(request, words % BANKS), return_index=True,
                                return_counts=True)
    most = np.zeros(int(request.max()) + 1, np.int64)
    np.maximum.at(most, request[at], per_bank)
    return int(most.sum())


_lock = threading.Lock()


@contextlib.contextmanager
def counters():
    """``with counters() as launches:`` — every simulated kernel launch inside the block is
    appended to ``launches`` (a :class:`Counters` list of :class:`KernelCounters`). Only one
    ``counters()`` block can be active at a time (nesting raises ``RuntimeError``)."""
    out = Counters()
    rec = Recorder(out)
    with _lock:
        if any(isinstance(o, Recorder) for o in memory.observers):
            raise RuntimeError("counters() blocks cannot be nested")
        memory.observers.append(rec)
    try:
        yield out
    finally:
        with _lock:
            memory.observers.remove(rec)
