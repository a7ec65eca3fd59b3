# Planted edge bug: The add guard off by one (`i <= n`): the last block adds to out[n], past the
# end, whenever n is not a multiple of TPB.
from numba import cuda, float32

TPB = 64


@cuda.jit(device=True)
def block_scan(buf, t):
    """Inclusive Hillis-Steele scan of buf[0:TPB] in place, called by every thread t of the
    block: log2(TPB) steps, each a read, a barrier, a write, a barrier."""
    d = 1
    while d < TPB:
        v = buf[t - d] if t >= d else float32(0)
        cuda.syncthreads()
        buf[t] += v
        cuda.syncthreads()
        d *= 2


@cuda.jit
def scan_blocks(x, out, sums):
    """out[i] = x[s] + ... + x[i], s the first index of i's block; the last thread writes the
    block's total to sums[blockIdx.x] (a ragged last block counts its elements only)."""
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    buf[t] = x[i] if i < x.shape[0] else float32(0)
    cuda.syncthreads()
    block_scan(buf, t)
    if i < x.shape[0]:
        out[i] = buf[t]
    if t == TPB - 1:
        sums[cuda.blockIdx.x] = buf[t]


@cuda.jit
def scan_sums(sums):
    """One block: sums becomes its own inclusive scan (len(sums) <= TPB)."""
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    n = sums.shape[0]
    buf[t] = sums[t] if t < n else float32(0)
    cuda.syncthreads()
    block_scan(buf, t)
    if t < n:
        sums[t] = buf[t]


@cuda.jit
def add_sums(out, sums):
    """out[i] += sums[b - 1] for every element of block b > 0: the total of the blocks before
    it (one broadcast load of sums per warp, coalesced loads and stores of out)."""
    b = cuda.blockIdx.x
    i = b * TPB + cuda.threadIdx.x
    if b > 0 and i <= out.shape[0]:
        out[i] += sums[b - 1]
