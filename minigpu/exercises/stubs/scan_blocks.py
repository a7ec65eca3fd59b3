"""Exercise ``scan_blocks`` (chapter 7: scan, docs/course/07-scan.md).

out[i] = x[0] + ... + x[i] for n up to TPB * TPB elements, float32, in three kernels. With
``blocks = ceil(n / TPB)`` and ``sums`` a fresh (unwritten) array of ``blocks`` floats, the
grader runs::

    scan_blocks[blocks, TPB](x, out, sums)   # each block scans its part, writes its total
    scan_sums[1, TPB](sums)                  # one block scans the block totals in place
    add_sums[blocks, TPB](out, sums)         # block b > 0 adds sums[b - 1] to its elements

Budgets: global load sectors per output and barriers per block of scan_blocks, each at most
1.25 x the reference's with your TPB (you may change it; the sizes are drawn from it).
Check it: python -m minigpu.exercises check scan_blocks this_file.py
"""
from numba import cuda, float32

TPB = 64


@cuda.jit(device=True)
def block_scan(buf, t):
    # TODO 1: your block scan from the `scan` exercise: for d = 1, 2, 4, ... < TPB:
    #         v = buf[t - d] (0 when t < d), barrier, buf[t] += v, barrier.
    pass


@cuda.jit
def scan_blocks(x, out, sums):
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    # TODO 2: buf[t] = x[i] (0 past the end), a barrier, block_scan(buf, t), then
    #         out[i] = buf[t] for i < n, and the last thread writes the block's total
    #         to sums[blockIdx.x] (the ragged last block too: its total is read next).


@cuda.jit
def scan_sums(sums):
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    # TODO 3: the same in one block over sums (len(sums) <= TPB), written back in place.


@cuda.jit
def add_sums(out, sums):
    b = cuda.blockIdx.x
    i = b * TPB + cuda.threadIdx.x
    # TODO 4: blocks b > 0 add the total of the blocks before them, sums[b - 1], to out[i].
