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
h200_time_us_estimate
    A lower bound, an estimate: bytes moved / the H200's 4.8 TB/s DRAM bandwidth.

Counting needs the simulator's array proxies (on by default; with ``MINIGPU_SIM_CHECKS=0`` the
proxies are still made while a ``counters()`` block is active). Local arrays are not counted
(registers, usually).
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

from . import memory

H200_DRAM_BYTES_PER_S = 4.8e12
SECTOR = 32
BANKS = 32
WARP = 32

METRICS = ("global_load_requests", "global_load_sectors", "global_store_requests",
           "global_store_sectors", "shared_load_requests", "shared_load_wavefronts",
           "shared_store_requests", "shared_store_wavefronts", "barriers", "atomics",
           "warp_efficiency", "bytes_moved", "sector_efficiency", "h200_time_us_estimate")
COUNTS = METRICS[:10]


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
           executions: int) -> dict:
    """The full metrics dict from raw counts (also used to sum several launches). ``_raw``
    keeps the raw numbers: requested load bytes, requested store bytes, active lanes and
    warp-level executions (for :func:`total` and per-direction efficiencies)."""
    m = {k: counts.get(k, 0) for k in COUNTS}
    moved = SECTOR * (m["global_load_sectors"] + m["global_store_sectors"])
    m["warp_efficiency"] = lanes / (WARP * executions) if executions else None
    m["bytes_moved"] = moved
    m["sector_efficiency"] = (requested_load + requested_store) / moved if moved else None
    m["h200_time_us_estimate"] = moved / H200_DRAM_BYTES_PER_S * 1e6
    m["_raw"] = (requested_load, requested_store, lanes, executions)
    return m


def total(entries, name="total") -> KernelCounters:
    """One entry summing several launches (e.g. every launch of one lesson variant)."""
    counts = {k: sum(e.metrics[k] for e in entries) for k in COUNTS}
    raw = [sum(e.metrics["_raw"][i] for e in entries) for i in range(4)]
    grid = entries[0].grid if len(entries) == 1 else f"{len(entries)} launches"
    block = entries[0].block if len(entries) == 1 else ""
    return KernelCounters(name, grid, block, derive(counts, *raw))


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
    return "\n".join([line(header), "-" * len(line(header))] + [line(r) for r in body])


class _Recorder:
    """The observer: collects one launch's accesses, turns them into metrics at its end."""

    def __init__(self, out):
        self.out = out
        self.accesses = []
        self.barriers = 0
        self.dims = None

    def __call__(self, access):
        self.accesses.append(access)

    def launch(self, name, grid, block):
        self.accesses, self.barriers, self.dims = [], 0, (name, tuple(grid), tuple(block))

    def barrier(self):
        self.barriers += 1

    def end(self):
        name, grid, block = self.dims
        counts, raw = _count(self.accesses, block)
        counts["barriers"] = self.barriers
        self.out.append(KernelCounters(name, grid, block, derive(counts, *raw)))
        self.accesses, self.dims = [], None


def _count(accesses, block):
    bx, by, _ = block
    seen = {}       # (block, thread, site, kind, array) -> occurrences so far
    groups = {}     # request key -> [(offset, itemsize), ...] one per active lane
    atomics = 0
    for a in accesses:
        if a.space == "local":
            continue
        if a.kind == "atomic":
            atomics += 1
        x, y, z = a.thread
        tid = x + bx * (y + by * z)
        k = (a.block, tid, a.site, a.kind, a.array_id)
        n = seen.get(k, 0)
        seen[k] = n + 1
        groups.setdefault((a.space, a.kind, a.block, tid // WARP, a.site, a.array_id, n),
                          []).append((a.offset, a.itemsize))
    counts = dict.fromkeys(COUNTS, 0)
    counts["atomics"] = atomics
    requested = {"load": 0, "store": 0}
    lanes = 0
    for (space, kind, *_), accs in groups.items():
        lanes += len(accs)
        if kind == "atomic":
            continue
        op = "load" if kind == "load" else "store"
        if space == "global":
            counts[f"global_{op}_requests"] += 1
            sectors, bytes_ = set(), set()
            for off, size in accs:
                sectors.update(range(off // SECTOR, (off + size - 1) // SECTOR + 1))
                bytes_.add((off, size))
            counts[f"global_{op}_sectors"] += len(sectors)
            requested[op] += sum(size for _, size in bytes_)
        else:
            counts[f"shared_{op}_requests"] += 1
            counts[f"shared_{op}_wavefronts"] += wavefronts(accs)
    return counts, (requested["load"], requested["store"], lanes, len(groups))


def wavefronts(accs):
    """Wavefronts of one shared request: the most distinct words any one bank must serve."""
    words = set()
    for off, size in accs:
        words.update(range(off // 4, (off + size - 1) // 4 + 1))
    per_bank = {}
    for w in words:
        per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
    return max(per_bank.values())


_lock = threading.Lock()


@contextlib.contextmanager
def counters():
    """``with counters() as launches:`` — every simulated kernel launch inside the block is
    appended to ``launches`` (a :class:`Counters` list of :class:`KernelCounters`). Only one
    ``counters()`` block can be active at a time (nesting raises ``RuntimeError``)."""
    out = Counters()
    rec = _Recorder(out)
    with _lock:
        if any(isinstance(o, _Recorder) for o in memory.observers):
            raise RuntimeError("counters() blocks cannot be nested")
        memory.observers.append(rec)
    try:
        yield out
    finally:
        with _lock:
            memory.observers.remove(rec)
