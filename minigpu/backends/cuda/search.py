"""Binary search: ``searchsorted`` (and ``bucketize``, which is a searchsorted of one row).

Each value is found in its row of the sorted sequence by the same binary search as PyTorch's
(``lo, hi = 0, S``; probe ``mid = (lo + hi) // 2``; keep the left half when the probe is
``>=`` the value, ``>`` for ``right``), so cuda, the NumPy reference and PyTorch agree on every
input, NaN and unsorted rows included (a comparison with NaN is false).
"""
from __future__ import annotations

import functools

from numba import cuda

from ..contract import View
from .blocks import launch
from .device import empty
from .kernelspec import KernelSpec, reported


@reported(lambda k, x: [KernelSpec(f"searchsorted[{side}]", k(side == "right"),
                                   (x.f, 0, 0, 0, x.f, 0, 0, 0, x.i64, 1, 1, 1), x.block)
                        for side in ("left", "right")])
@functools.lru_cache(maxsize=None)
def searchsorted_kernel(right):

    @cuda.jit
    def searchsorted(seq, s_off, s_row, s_step, values, v_off, v_row, v_step, out, R, S, V):
        """out[r, j] = the position of values[r, j] in row r of seq (``right``: after equal
        elements).

        One thread per value, a 1-D grid-stride loop over the R x V values in row-major order:
        consecutive threads read consecutive values and write consecutive positions
        (coalesced). Then each thread probes its row ceil(log2(S + 1)) times, each probe
        waiting for the one before: a latency-bound loop, hidden by the many warps in flight,
        not by bandwidth. The first probes of a warp's lanes (values of one row) hit the same
        middle elements, so they are served as one broadcast sector; the lanes spread apart
        only as their intervals shrink. ``right`` is a compile-time constant: no branch on it
        in the loop."""
        for i in range(cuda.grid(1), R * V, cuda.gridsize(1)):
            r = i // V
            x = values[v_off + r * v_row + (i - r * V) * v_step]
            lo = 0
            hi = S
            while lo < hi:
                mid = (lo + hi) // 2
                probe = seq[s_off + r * s_row + mid * s_step]
                if (probe > x) if right else (probe >= x):
                    hi = mid
                else:
                    lo = mid + 1
            out[i] = lo

    return searchsorted


def searchsorted(seq: View, values: View, right=False):
    """Contract ``searchsorted``: (R, S) sorted rows, (R, V) values -> int64 (R, V)."""
    (R, S), V = seq.shape, values.shape[1]
    out = empty(R * V, "int64")
    if R * V:
        launch(searchsorted_kernel(bool(right)), R * V,
            seq.buf, seq.offset, seq.strides[0], seq.strides[1],
            values.buf, values.offset, values.strides[0], values.strides[1], out, R, S, V)
    return out
