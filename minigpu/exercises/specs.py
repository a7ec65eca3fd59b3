"""The exercises, in course order: for each, the block-size constants read from the student's
module, the problem sizes drawn from them, the inputs, the launches, the NumPy reference, the
tolerance and the access budgets.

Sizes are drawn per run from the student's *actual* block size (:func:`blocked`): every shape
spans several blocks, and along every axis one is ragged (its last block partly past the end,
drawn), one an exact multiple of the block, one a multiple plus one element, one a multiple
less one (:data:`EDGES`). A
budget is either absolute (``limit``) or relative: ``limit`` times the value the reference
solution measures with the student's constants on the same inputs (so it holds for any block
size, and a budget never fails correct work that does what the chapter teaches).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

COURSE = "docs/course/"


def _ch(page):
    return COURSE + page


CH = {k: _ch(v) for k, v in {
    0: "00-threads-blocks-grids.md", 1: "01-coalescing.md", 2: "02-shared-memory.md", 3: "03-bank-conflicts.md",
    4: "04-divergence-reduction.md", 5: "05-warp-shuffles.md", 6: "06-atomics.md",
    7: "07-scan.md", 8: "08-matmul.md", 9: "09-occupancy.md",
    10: "10-fusion-constant-streams.md", 11: "11-sorting.md", 12: "12-online-softmax.md",
    13: "13-flash-attention.md", 14: "14-debugging.md"}.items()}


@dataclass(frozen=True)
class Budget:
    """``measure(m)`` (a :class:`grader.Measurement`) must be at most ``limit`` (at least, with
    ``at_least``); with ``relative`` the limit is ``limit`` times the reference's value."""
    label: str
    measure: Callable
    limit: float
    chapter: str
    relative: bool = False
    at_least: bool = False


@dataclass(frozen=True)
class Exercise:
    name: str
    chapter: str                     # the page that teaches it
    summary: str
    constants: tuple                 # module constants that set the block geometry
    check_constants: Callable        # consts -> None, or why they cannot work
    sizes: Callable                  # (rng, consts) -> [shape, ...]: several blocks each
    inputs: Callable                 # (rng, shape, consts) -> (input arrays..., output)
    reference: Callable              # (consts, *inputs) -> expected output
    launch: Callable = None          # (consts, shape) -> (grid, block) of ``kernel``
    run: Callable = None             # (module, consts, shape, inputs, out) -> host output
    kernels: Callable = None         # (module, consts, shape, inputs, out) -> static specs
    budgets: tuple = ()
    rtol: float = 1e-5
    scale: Callable = None           # (consts, *inputs) -> magnitudes: atol = rtol * scale
    min_occupancy: float = 0.5
    max_registers: int = 64
    picture: tuple = ()              # (view name, params[, which drawn size]) to draw
    step: str = ""                   # a second chapter whose budget this exercise checks
    functions: tuple = ("kernel",)   # what the module must define


def _ceil(a, b):
    return -(-a // b)


def on_magnitudes(reference):
    """The scale of a sum-like reference: the same computation on the inputs' magnitudes
    (its rounding error is at most a few ulps of that, whatever the cancellation)."""
    return lambda c, *ins: reference(c, *(np.abs(a) for a in ins))


def _by_block(x, tpb):
    """x as float64 rows of tpb, the last row padded with zeros."""
    return np.pad(x.astype(np.float64), (0, (-len(x)) % tpb)).reshape(-1, tpb)


# --- sizes: several blocks of the student's block, every edge included ----------------------
EDGES = ("exact", "plus", "minus")
"""Besides a drawn ragged length, every axis gets all three of these in a grading: a whole
number of blocks, one element more (a last block of one element) and one less (a last block
one short of full). Off-by-one guards (``i + 1 < n - 1``, ``range(0, K - 1, TILE)``) go wrong
at exactly one of them, so a grading with all three catches them whatever the seed."""


def blocked(rng, extent, kind, most=3, least=2):
    """A length of k blocks of ``extent``, k drawn from ``least`` ... ``most``: ``ragged``
    (and a partly filled block, drawn), ``exact`` (k whole blocks), ``plus`` (and one
    element), ``minus`` (less one element). With ``extent`` 1 every kind is whole blocks."""
    k = int(rng.integers(least, max(least, most) + 1))
    if kind == "exact" or extent == 1:
        return extent * k
    if kind == "ragged":
        return extent * k + int(rng.integers(1, extent))
    return extent * k + (1 if kind == "plus" else -1)


def sizes_1d(extent_of):
    """Ragged, exact, one more and one less: four lengths (the first is measured)."""
    def sizes(rng, c):
        e = extent_of(c)
        return [blocked(rng, e, k) for k in ("ragged",) + EDGES]
    return sizes


# per shape, the kind of each axis: ragged everywhere first, then each axis meets exact,
# plus and minus once, each time beside a different kind on the other axes
PAIRS = (("ragged", "ragged"), ("exact", "plus"), ("plus", "minus"), ("minus", "exact"))
TRIPLES = (("ragged",) * 3, ("exact", "plus", "minus"), ("plus", "minus", "exact"),
           ("minus", "exact", "plus"))


def sizes_2d(extents_of, most=(3, 3), least=(2, 2)):
    """(rows, cols) shapes, one per entry of :data:`PAIRS`, of ``least`` to ``most`` blocks
    along (rows, cols) (never square: a whole block is added to cols where they would be
    equal, keeping its kind)."""
    def sizes(rng, c):
        er, ec = extents_of(c)
        out = []
        for kr, kc in PAIRS:
            r = blocked(rng, er, kr, most[0], least[0])
            col = blocked(rng, ec, kc, most[1], least[1])
            if r == col:
                col += ec
            out.append((r, col))
        return out
    return sizes


def _rows_and_columns(rng, c, rows_per_block):
    """(rows, cols) for the warp-per-row exercises: rows over several blocks of
    ``rows_per_block``, each kind once; columns (a warp's 32 lanes are the block along a row)
    fewer than half a warp (so some pairs of lanes both have none), then whole warps, one
    more and one less."""
    rows = [blocked(rng, rows_per_block, k) for k in ("ragged",) + EDGES]
    widths = [int(rng.integers(1, 16))] + [blocked(rng, 32, k, 2)
                                           for k in ("minus", "exact", "plus")]
    return list(zip(rows, widths))


# --- what a budget measures ----------------------------------------------------------------
def per_request(kind, op):
    """sectors (global) or wavefronts (shared) per request of ``kind`` ("global"/"shared")
    ``op`` ("load"/"store")."""
    return lambda m: _per_request(m, f"{kind}_{op}")


def _per_request(metrics, what):
    unit = "sectors" if what.startswith("global") else "wavefronts"
    return metrics[f"{what}_{unit}"] / max(metrics[f"{what}_requests"], 1)


def per_output(metric):
    return lambda m: m[metric] / m.outputs


def per_block(metric, kernel=None):
    return lambda m: m.of(kernel)[metric] / m.blocks(kernel)


def per_warp(metric):
    return lambda m: m[metric] / m.warps()


def per_input(metric):
    return lambda m: m[metric] / m.ins[0].size


# --- 1. epilogue (chapter 1) -------------------------------------------------------------------
def _epilogue(c, x, bias):
    v = x + bias
    return np.where(v > 0, v, np.float32(0.1) * v).astype(np.float32)


def _2d_launch(bx, by):
    return lambda c, s: ((_ceil(s[1], c[bx]), _ceil(s[0], c[by])), (c[bx], c[by]))


def _threads(**limits):
    def check(c):
        n = math.prod(c[k] for k in limits.get("block", ()))
        if n > 1024:
            return f"{' x '.join(limits['block'])} = {n} threads per block: the limit is 1024"
        for k in limits.get("positive", ()):
            if c[k] < 1:
                return f"{k} must be at least 1, got {c[k]}"
        for k in limits.get("pow2", ()):
            if c[k] & (c[k] - 1):
                return f"{k} must be a power of two, got {c[k]}"
        for k in limits.get("warps", ()):
            if c[k] % 32:
                return f"{k} must be a multiple of 32 (whole warps), got {c[k]}"
        return None
    return check


def relative(label, measure, chapter, factor=1.25):
    """At most ``factor`` times what the reference measures with the same constants."""
    return Budget(label, measure, factor, chapter, relative=True)


# The general budgets: every exercise is held to its reference's access pattern where the
# reference has one, so a correct kernel that reads uncoalesced, leaves lanes idle (one lane
# doing a warp's work) or bank-conflicts fails, whichever exercise it is.
LOAD_SECTORS = relative("global load sectors per request", per_request("global", "load"), CH[1])
STORE_SECTORS = relative("global store sectors per request", per_request("global", "store"),
                         CH[1])
COALESCED = (LOAD_SECTORS, STORE_SECTORS)
LOAD_REQUESTS = relative("global load requests per input element",
                         lambda m: m["global_load_requests"] / m.ins[0].size, CH[4])
SHARED = (relative("shared load wavefronts per request", per_request("shared", "load"), CH[3]),
          relative("shared store wavefronts per request", per_request("shared", "store"),
                   CH[3]))

EPILOGUE = Exercise(
    "epilogue", CH[1], "fused bias + leaky-ReLU, coalesced 2-D thread mapping",
    constants=("BX", "BY"),
    check_constants=_threads(block=("BX", "BY"), positive=("BX", "BY")),
    sizes=sizes_2d(lambda c: (c["BY"], c["BX"])),
    inputs=lambda rng, s, c: (rng.standard_normal(s).astype(np.float32),
                              rng.standard_normal(s[1]).astype(np.float32),
                              np.zeros(s, np.float32)),
    launch=_2d_launch("BX", "BY"),
    reference=_epilogue,
    budgets=COALESCED + (LOAD_REQUESTS,),
    picture=("lanes", dict(kind="load", array="x")))


# --- 2. stencil (chapter 2) ----------------------------------------------------------------
def _stencil(c, x):
    p = np.pad(x, 1)
    return (p[:-2] + p[1:-1] + p[2:]).astype(np.float32)


def _1d_launch(c, n):
    return _ceil(n, c["TPB"]), c["TPB"]


def one_thread_per_element(check=None):
    """The fields of a 1-D exercise launched as kernel[ceil(n / TPB), TPB]."""
    return dict(constants=("TPB",), launch=_1d_launch, sizes=sizes_1d(lambda c: c["TPB"]),
                check_constants=check or _threads(block=("TPB",), positive=("TPB",)))


STENCIL = Exercise(
    "stencil", CH[2], "1-D 3-point stencil with a shared-memory halo",
    **one_thread_per_element(),
    inputs=lambda rng, n, c: (rng.standard_normal(n).astype(np.float32),
                              np.zeros(n, np.float32)),
    reference=_stencil,
    budgets=(relative("global load sectors per output", per_output("global_load_sectors"),
                      CH[2]),) + COALESCED + (LOAD_REQUESTS,) + SHARED,
    picture=("counts", dict(array="x", kind="load")))


# --- 3. transpose (chapters 1 and 3) ----------------------------------------------------------
def _transpose_check(c):
    why = _threads(block=("TILE", "ROWS"), positive=("TILE", "ROWS"))(c)
    if why is None and c["TILE"] % c["ROWS"]:
        why = f"TILE ({c['TILE']}) must be a multiple of ROWS ({c['ROWS']})"
    return why


TRANSPOSE = Exercise(
    "transpose", CH[3], "coalesced transpose through a padded shared tile",
    constants=("TILE", "ROWS"),
    check_constants=_transpose_check,
    sizes=sizes_2d(lambda c: (c["TILE"], c["TILE"])),
    inputs=lambda rng, s, c: (rng.standard_normal(s).astype(np.float32),
                              np.zeros(s[::-1], np.float32)),
    launch=lambda c, s: ((_ceil(s[1], c["TILE"]), _ceil(s[0], c["TILE"])),
                         (c["TILE"], c["ROWS"])),
    reference=lambda c, a: np.ascontiguousarray(a.T),
    budgets=COALESCED + SHARED + (LOAD_REQUESTS,),
    picture=("banks", dict(kind="load")))


# --- 4. reduction (chapters 4 and 5) -------------------------------------------------------------
def _block_sums(c, x):
    return _by_block(x, c["TPB"]).sum(axis=1).astype(np.float32)


REDUCTION = Exercise(
    "reduction", CH[4], "block sums: a shared-memory tree, then warp shuffles",
    **one_thread_per_element(_threads(block=("TPB",), warps=("TPB",))),
    inputs=lambda rng, n, c: (rng.standard_normal(n).astype(np.float32),
                              np.zeros(_ceil(n, c["TPB"]), np.float32)),
    reference=_block_sums, scale=on_magnitudes(_block_sums),
    budgets=(Budget("barriers per block", per_block("barriers"), 2, CH[5]),
             relative("global load sectors per input", per_input("global_load_sectors"), CH[1]),
             LOAD_SECTORS, LOAD_REQUESTS) + SHARED,
    picture=("masks", dict(space="shared", by="phase")),
    step=CH[5])


# --- 5. softmax and 6. spmv (chapter 5) --------------------------------------------------------
def _softmax(c, x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _softmax_inputs(rng, s, c):
    """Rows shifted by up to +-120 (one row by +110): exp without subtracting the row max
    overflows float32 (above 88.7) or underflows to 0."""
    shift = rng.uniform(-120, 120, (s[0], 1))
    shift[rng.integers(0, s[0])] = 110
    x = rng.standard_normal(s) * 3 + shift
    return x.astype(np.float32), np.zeros(s, np.float32)


def _warp_rows_launch(c, s):
    return _ceil(s[0], c["WARPS"]), 32 * c["WARPS"]


NO_BARRIER = Budget("barriers per block", per_block("barriers"), 0, CH[5])
PER_ROW = relative("global load requests per row",
                   lambda m: m["global_load_requests"] / m.shape[0], CH[5])

SOFTMAX = Exercise(
    "softmax", CH[5], "row softmax, one warp per row, shuffles for the max and the sum",
    constants=("WARPS",),
    check_constants=lambda c: None if 1 <= c["WARPS"] <= 32 else
    f"WARPS must be 1 ... 32, got {c['WARPS']}",
    sizes=lambda rng, c: _rows_and_columns(rng, c, c["WARPS"]),
    inputs=_softmax_inputs,
    launch=_warp_rows_launch,
    reference=_softmax,
    budgets=COALESCED + (PER_ROW, NO_BARRIER),
    picture=("sweeps", dict(array="x"), 2))


def _csr_inputs(rng, s, c):
    """A random CSR matrix (R, C): row lengths 0 ... 2.5 warps (some empty), and x."""
    R, C = s
    lengths = np.minimum(rng.integers(0, 80, R), C)
    lengths[rng.integers(0, R)] = 0
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = np.concatenate([np.sort(rng.choice(C, n, replace=False)) for n in lengths]
                             + [np.zeros(0, int)]).astype(np.int32)
    data = rng.standard_normal(len(indices)).astype(np.float32)
    x = rng.standard_normal(C).astype(np.float32)
    return indptr, indices, data, x, np.zeros(R, np.float32)


def _spmv(c, indptr, indices, data, x):
    y = np.zeros(len(indptr) - 1)
    for r in range(len(y)):
        lo, hi = indptr[r], indptr[r + 1]
        y[r] = np.dot(data[lo:hi].astype(np.float64), x[indices[lo:hi]])
    return y.astype(np.float32)


SPMV = Exercise(
    "spmv", CH[5], "CSR sparse matrix-vector product, one warp per row",
    constants=("WARPS",),
    check_constants=lambda c: None if 1 <= c["WARPS"] <= 32 else
    f"WARPS must be 1 ... 32, got {c['WARPS']}",
    sizes=lambda rng, c: [(r, int(rng.integers(90, 200))) for r, _ in
                          _rows_and_columns(rng, c, c["WARPS"])],
    inputs=_csr_inputs,
    launch=_warp_rows_launch,
    reference=_spmv, scale=on_magnitudes(_spmv), rtol=1e-5,
    budgets=COALESCED + (
        relative("global load requests per nonzero",
                 lambda m: m["global_load_requests"] / max(m.ins[2].size, 1), CH[5]),
        NO_BARRIER),
    picture=("lanes", dict(kind="load", array="data")))


# --- 7. histogram (chapter 6) ----------------------------------------------------------------
def _histogram_check(c):
    why = _threads(block=("TPB",), positive=("TPB", "NBINS"))(c)
    if why is None and c["NBINS"] > c["TPB"]:
        why = f"NBINS ({c['NBINS']}) must be at most TPB ({c['TPB']}): one thread per bin"
    return why


HISTOGRAM = Exercise(
    "histogram", CH[6], "histogram with per-block shared-memory bins (atomics)",
    constants=("TPB", "NBINS"),
    check_constants=_histogram_check,
    sizes=sizes_1d(lambda c: c["TPB"]),
    inputs=lambda rng, n, c: (rng.integers(0, c["NBINS"], n).astype(np.int32),
                              np.zeros(c["NBINS"], np.int32)),
    launch=_1d_launch,
    reference=lambda c, v: np.bincount(v, minlength=c["NBINS"]).astype(np.int32),
    rtol=0,
    budgets=(Budget("global atomics per bin per block",
                    lambda m: m.global_atomics / (m.blocks() * m.consts["NBINS"]), 1.0, CH[6]),
             LOAD_SECTORS, LOAD_REQUESTS) + SHARED,
    picture=("counts", dict(array="hist", kind="atomic")))


# --- 8. scan and 9. scan_blocks (chapter 7) --------------------------------------------------
def _segmented_cumsum(c, x):
    return np.cumsum(_by_block(x, c["TPB"]), axis=1).ravel()[:len(x)].astype(np.float32)


SCAN = Exercise(
    "scan", CH[7], "block-wise inclusive scan (Hillis-Steele in shared memory)",
    **one_thread_per_element(),
    inputs=lambda rng, n, c: (rng.standard_normal(n).astype(np.float32),
                              np.zeros(n, np.float32)),
    reference=_segmented_cumsum, scale=on_magnitudes(_segmented_cumsum),
    budgets=(relative("global load sectors per output", per_output("global_load_sectors"),
                      CH[7]),
             relative("barriers per block", per_block("barriers"), CH[7])) + COALESCED + (
        LOAD_REQUESTS,) + SHARED,
    picture=("tree", dict()))


def _cumsum(c, x):
    return np.cumsum(x.astype(np.float64)).astype(np.float32)


def _run_scan_blocks(module, c, shape, ins, out):
    from numba import cuda
    (x,) = ins
    tpb, n = c["TPB"], len(x)
    blocks = _ceil(n, tpb)
    d_x, d_out = cuda.to_device(x), cuda.to_device(out)
    sums = cuda.device_array(blocks, np.float32)      # never written by the host: poisoned
    module.scan_blocks[blocks, tpb](d_x, d_out, sums)
    module.scan_sums[1, tpb](sums)
    module.add_sums[blocks, tpb](d_out, sums)
    return d_out.copy_to_host()


def _scan_blocks_kernels(module, c, shape, ins, out):
    s = np.zeros(1, np.float32)
    return [("scan_blocks", module.scan_blocks, (ins[0], out, s), c["TPB"]),
            ("scan_sums", module.scan_sums, (s,), c["TPB"]),
            ("add_sums", module.add_sums, (out, s), c["TPB"])]


def _scan_blocks_sizes(rng, c):
    tpb = c["TPB"]
    return [min(n, tpb * tpb) for n in sizes_1d(lambda c: tpb)(rng, c)]


SCAN_BLOCKS = Exercise(
    "scan_blocks", CH[7], "multi-block inclusive scan: scan blocks, scan the block sums, add",
    constants=("TPB",),
    check_constants=_threads(block=("TPB",), positive=("TPB",)),
    sizes=_scan_blocks_sizes,
    inputs=lambda rng, n, c: (rng.standard_normal(n).astype(np.float32),
                              np.zeros(n, np.float32)),
    run=_run_scan_blocks, kernels=_scan_blocks_kernels,
    functions=("scan_blocks", "scan_sums", "add_sums"),
    reference=_cumsum, scale=on_magnitudes(_cumsum), rtol=1e-5,
    budgets=(relative("global load sectors per output", per_output("global_load_sectors"),
                      CH[7]),
             relative("barriers per block of scan_blocks", per_block("barriers", "scan_blocks"),
                      CH[7])) + COALESCED + SHARED,
    picture=("traffic", dict()))


# --- 10. matmul (chapter 8) ------------------------------------------------------------------
def _matmul_sizes(rng, c):
    t = c["TILE"]
    return [tuple(blocked(rng, t, kind, 2, least=1) for kind in kinds) for kinds in TRIPLES]


MATMUL = Exercise(
    "matmul", CH[8], "shared-memory tiled matmul",
    constants=("TILE",),
    check_constants=_threads(block=("TILE", "TILE"), positive=("TILE",)),
    sizes=_matmul_sizes,
    inputs=lambda rng, s, c: (rng.standard_normal(s[:2]).astype(np.float32),
                              rng.standard_normal(s[1:]).astype(np.float32),
                              np.zeros((s[0], s[2]), np.float32)),
    launch=lambda c, s: ((_ceil(s[2], c["TILE"]), _ceil(s[0], c["TILE"])),
                         (c["TILE"], c["TILE"])),
    reference=lambda c, a, b: (a.astype(np.float64) @ b).astype(np.float32),
    scale=on_magnitudes(lambda c, a, b: a.astype(np.float64) @ b),
    budgets=(relative("global load requests per warp", per_warp("global_load_requests"),
                      CH[8]),) + COALESCED + SHARED,
    picture=("heat", dict()))


# --- 11. conv2d with its filter in constant memory (chapter 10) -----------------------------
def _conv_sizes(rng, c):
    shapes = sizes_2d(lambda c: (c["BY"], c["BX"]))(rng, c)
    return [(h, w, k) for (h, w), k in zip(shapes, (3, 5, 3, 5))]


def _conv_inputs(rng, s, c):
    H, W, K = s
    return (rng.standard_normal((H, W)).astype(np.float32),
            rng.standard_normal((K, K)).astype(np.float32), np.zeros((H, W), np.float32))


def _conv(c, x, w):
    K = w.shape[0]
    r = K // 2
    p = np.pad(x.astype(np.float64), r)
    out = np.zeros(x.shape)
    for i in range(K):
        for j in range(K):
            out += w[i, j] * p[i:i + x.shape[0], j:j + x.shape[1]]
    return out.astype(np.float32)


def _run_conv(module, c, shape, ins, out):
    from numba import cuda
    x, w = ins
    kernel = module.make_kernel(w)
    d_x, d_out = cuda.to_device(x), cuda.to_device(out)
    H, W = x.shape
    kernel[(_ceil(W, c["BX"]), _ceil(H, c["BY"])), (c["BX"], c["BY"])](d_x, d_out)
    return d_out.copy_to_host()


CONV2D = Exercise(
    "conv2d", CH[10], "direct 2-D convolution, the filter in constant memory",
    constants=("BX", "BY"),
    check_constants=_threads(block=("BX", "BY"), positive=("BX", "BY")),
    sizes=_conv_sizes,
    inputs=_conv_inputs,
    run=_run_conv, functions=("make_kernel",),
    kernels=lambda module, c, s, ins, out: [("kernel", module.make_kernel(ins[1]),
                                             (ins[0], out), c["BX"] * c["BY"])],
    reference=_conv, scale=on_magnitudes(_conv),
    budgets=COALESCED + (relative("global load requests per output",
                                  per_output("global_load_requests"), CH[10]),),
    picture=("traffic", dict()))


# --- 12. sort (chapter 11) ---------------------------------------------------------------------
def _run_sort(module, c, shape, ins, out):
    from numba import cuda
    (x,) = ins
    tpb, n = c["TPB"], len(x)
    blocks = _ceil(n, tpb)
    src = cuda.to_device(out)
    dst = cuda.device_array(n, np.float32)
    module.sort_blocks[blocks, tpb](cuda.to_device(x), src)
    width = tpb
    while width < n:
        module.merge[blocks, tpb](src, dst, width)
        src, dst = dst, src
        width *= 2
    return src.copy_to_host()


def _sort_kernels(module, c, shape, ins, out):
    return [("sort_blocks", module.sort_blocks, (ins[0], out), c["TPB"]),
            ("merge", module.merge, (out, out, 1), c["TPB"])]


def _sort_sizes(rng, c):
    tpb = c["TPB"]
    return [blocked(rng, tpb, "ragged"), tpb * 4 if tpb < 256 else tpb * 2,
            blocked(rng, tpb, "plus"), blocked(rng, tpb, "minus")]


def _sort_inputs(rng, n, c):
    x = rng.standard_normal(n).astype(np.float32)
    x[rng.integers(0, n, n // 8)] = x[rng.integers(0, n)]      # ties
    return x, np.zeros(n, np.float32)


SORT = Exercise(
    "sort", CH[11], "bitonic sort of each block in shared memory, then merge passes",
    constants=("TPB",),
    check_constants=_threads(block=("TPB",), positive=("TPB",), pow2=("TPB",)),
    sizes=_sort_sizes,
    inputs=_sort_inputs,
    run=_run_sort, kernels=_sort_kernels, functions=("sort_blocks", "merge"),
    reference=lambda c, x: np.sort(x), rtol=0,
    budgets=(relative("barriers per block of sort_blocks", per_block("barriers", "sort_blocks"),
                      CH[11]),
             relative("global load requests per element of merge",
                      lambda m: m.of("merge")["global_load_requests"] / m.ins[0].size, CH[11]),
             relative("global load sectors per request of sort_blocks",
                      lambda m: _per_request(m.of("sort_blocks"), "global_load"), CH[1]),
             relative("global store sectors per request of sort_blocks",
                      lambda m: _per_request(m.of("sort_blocks"), "global_store"), CH[1])) + SHARED,
    picture=("network", dict(kernel="sort_blocks")))


# --- 13. online softmax (chapter 12) -----------------------------------------------------------
ONLINE_SOFTMAX = Exercise(
    "online_softmax", CH[12], "one-pass (online) softmax statistics, one warp per row",
    constants=("WARPS",),
    check_constants=SOFTMAX.check_constants,
    sizes=lambda rng, c: _rows_and_columns(rng, c, c["WARPS"]),
    inputs=_softmax_inputs,
    launch=_warp_rows_launch,
    reference=_softmax,
    budgets=(relative("global load sectors per element", per_input("global_load_sectors"), CH[12],
                      factor=1.1),) + COALESCED + (PER_ROW, NO_BARRIER),
    picture=("sweeps", dict(array="x"), 2))



# --- 14. flash attention (chapter 13) ------------------------------------------------------------
HEAD_DIM = 16


def _attention(c, q, k, v):
    s = q.astype(np.float64) @ k.T.astype(np.float64) / math.sqrt(HEAD_DIM)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True) @ v).astype(np.float32)


def _attention_inputs(rng, s, c):
    """q (L, 16), k and v (S, 16); q and k of spread 2, so scores span about +-30 and a
    softmax that forgets to rescale is far off."""
    L, S = s
    q, k = (rng.standard_normal((n, HEAD_DIM)) * 2 for n in (L, S))
    v = rng.standard_normal((S, HEAD_DIM))
    return (q.astype(np.float32), k.astype(np.float32), v.astype(np.float32),
            np.zeros((L, HEAD_DIM), np.float32))


FLASH_ATTENTION = Exercise(
    "flash_attention", CH[13], "the online-softmax inner loop of a flash-attention forward",
    constants=("BQ", "BK"),
    check_constants=_threads(block=("BQ",), positive=("BQ", "BK")),
    sizes=sizes_2d(lambda c: (c["BQ"], c["BK"])),
    inputs=_attention_inputs,
    launch=lambda c, s: (_ceil(s[0], c["BQ"]), c["BQ"]),
    reference=_attention,
    rtol=1e-4,
    budgets=(relative("global load sectors per output", per_output("global_load_sectors"),
                      CH[13], factor=1.1),) + COALESCED + SHARED,
    picture=("traffic", dict()))


# --- 15-20. the debugging track (chapter 14): the stub is a kernel with a bug to find -------
# Each is graded on the fix: correct on every size, clean under every sanitizer check, and
# within the budgets (the general ones, and the one its bug breaks), so a "fix" that hides
# the bug by doing less work, or by leaving shared memory for global memory, fails too.
def _debug(name, summary, **fields):
    return Exercise(name, CH[14], summary, **fields)


def _row_scales(rng, s):
    """Row scales of magnitude 0.5 ... 2, either sign (never near 0: a skipped row shows)."""
    return (rng.uniform(0.5, 2.0, s) * rng.choice([-1, 1], s)).astype(np.float32)


DEBUG_BOUNDS = _debug(
    "debug_bounds", "find the out-of-bounds access (memcheck): a row scale",
    constants=("BX", "BY"),
    check_constants=_threads(block=("BX", "BY"), positive=("BX", "BY")),
    sizes=sizes_2d(lambda c: (c["BY"], c["BX"])),
    inputs=lambda rng, s, c: (rng.standard_normal(s).astype(np.float32),
                              _row_scales(rng, s[0]), np.zeros(s, np.float32)),
    launch=_2d_launch("BX", "BY"),
    reference=lambda c, x, scale: (x * scale[:, None]).astype(np.float32),
    budgets=COALESCED + (LOAD_REQUESTS,))


def _coalescing_check(c):
    why = _threads(block=("TPB",), positive=("TPB",))(c)
    if why is None and c["ITEMS"] < 2:
        why = (f"ITEMS must be at least 2, got {c['ITEMS']}: the exercise is a thread computing "
               f"several elements (see {CH[14]})")
    return why


DEBUG_COALESCING = _debug(
    "debug_coalescing", "find the uncoalesced access (sectors per request): ITEMS per thread",
    constants=("TPB", "ITEMS"),
    check_constants=_coalescing_check,
    sizes=sizes_1d(lambda c: c["TPB"] * c["ITEMS"]),
    inputs=lambda rng, n, c: (rng.standard_normal(n).astype(np.float32),
                              rng.standard_normal(n).astype(np.float32),
                              np.zeros(n, np.float32)),
    launch=lambda c, n: (_ceil(n, c["TPB"] * c["ITEMS"]), c["TPB"]),
    reference=lambda c, x, y: (np.float32(2) * x + y).astype(np.float32),
    budgets=COALESCED + (LOAD_REQUESTS,),
    picture=("lanes", dict(kind="load", array="x")))


def _matvec(c, at, x):
    return (at.astype(np.float64).T @ x).astype(np.float32)


DEBUG_BARRIER = _debug(
    "debug_barrier", "find the missing barrier (racecheck): x staged in shared memory",
    constants=("TPB",),
    check_constants=_threads(block=("TPB",), positive=("TPB",)),
    # at is (K, R): one or two chunks of x, two blocks of outputs
    sizes=sizes_2d(lambda c: (c["TPB"], c["TPB"]), most=(1, 2), least=(1, 2)),
    inputs=lambda rng, s, c: (rng.standard_normal(s).astype(np.float32),
                              rng.standard_normal(s[0]).astype(np.float32),
                              np.zeros(s[1], np.float32)),
    launch=lambda c, s: (_ceil(s[1], c["TPB"]), c["TPB"]),
    reference=_matvec, scale=on_magnitudes(_matvec),
    budgets=(relative("global load requests per output", per_output("global_load_requests"),
                      CH[14]),) + COALESCED + SHARED)


def _positives(c, x):
    return (_by_block(x, c["TPB"]) > 0).sum(axis=1).astype(np.int32)


DEBUG_RACE = _debug(
    "debug_race", "find the race (racecheck): counting per block in shared memory",
    **one_thread_per_element(),
    inputs=lambda rng, n, c: (rng.standard_normal(n).astype(np.float32),
                              np.zeros(_ceil(n, c["TPB"]), np.int32)),
    reference=_positives, rtol=0,
    budgets=(LOAD_SECTORS, LOAD_REQUESTS))


def _block_max(c, x):
    padded = np.pad(x, (0, (-len(x)) % c["TPB"]), constant_values=-np.inf)
    return padded.reshape(-1, c["TPB"]).max(axis=1).astype(np.float32)


DEBUG_UNINIT = _debug(
    "debug_uninit", "find the uninitialised shared read (initcheck): block maxima",
    **one_thread_per_element(_threads(block=("TPB",), positive=("TPB",), pow2=("TPB",))),
    # below zero everywhere: a last block padded with 0 instead of -inf has the wrong max
    inputs=lambda rng, n, c: ((-1 - np.abs(rng.standard_normal(n))).astype(np.float32),
                              np.zeros(_ceil(n, c["TPB"]), np.float32)),
    reference=_block_max, rtol=0,
    budgets=(relative("barriers per block", per_block("barriers"), CH[4]), LOAD_SECTORS,
             LOAD_REQUESTS) + SHARED)


def _row_sums(c, x):
    return x.astype(np.float64).sum(axis=1).astype(np.float32)


DEBUG_BANKS = _debug(
    "debug_banks", "find the bank conflict (wavefronts per request): row sums via a tile",
    constants=("TILE",),
    check_constants=_threads(block=("TILE",), positive=("TILE",)),
    sizes=sizes_2d(lambda c: (c["TILE"], c["TILE"]), most=(2, 1), least=(2, 1)),
    inputs=lambda rng, s, c: (rng.standard_normal(s).astype(np.float32),
                              np.zeros(s[0], np.float32)),
    launch=lambda c, s: (_ceil(s[0], c["TILE"]), c["TILE"]),
    reference=_row_sums, scale=on_magnitudes(_row_sums),
    budgets=COALESCED + SHARED,
    picture=("banks", dict(kind="load")))

DEBUGGING = [DEBUG_BOUNDS, DEBUG_COALESCING, DEBUG_BARRIER, DEBUG_RACE, DEBUG_UNINIT,
             DEBUG_BANKS]
"""The debugging track, in the order of the chapters that teach each bug (0 to 3)."""


EXERCISES = [EPILOGUE, STENCIL, TRANSPOSE, REDUCTION, SOFTMAX, SPMV, HISTOGRAM, SCAN,
             SCAN_BLOCKS, MATMUL, CONV2D, SORT, ONLINE_SOFTMAX, FLASH_ATTENTION, *DEBUGGING]
"""In course order (by chapter)."""

BY_NAME = {e.name: e for e in EXERCISES}
