"""Kernels of NVIDIA's Accelerated Computing Hub tutorials (Accelerated Python User Guide and the
accelerated-python course), adapted: sizes made small, CuPy arrays replaced by NumPy ones.

Source: https://github.com/NVIDIA/accelerated-computing-hub (commit
a776efdfc2fba159a0aecced3e7c0dfafaf81b8b); code under the Apache License 2.0 (``LICENSE-CODE``).
Notebooks: ``Accelerated_Python_User_Guide/notebooks/Chapter_05_CUDA_Kernels_with_Numba.ipynb``,
``.../Chapter_10_Developer_Tools.ipynb`` and
``tutorials/accelerated-python/notebooks/kernels/{solutions/40__kernel_authoring__copy__SOLUTION,
solutions/41__kernel_authoring__book_histogram__SOLUTION, 42__kernel_authoring__gaussian_blur,
solutions/43__kernel_authoring__black_and_white__SOLUTION}.ipynb``. Labels: a kernel the
notebook presents as working is ``clean``; the developer-tools chapter's ``invalid_read_kernel``
is its example of an out-of-bounds read; the guide's first ``foo`` tests ``i < an_array.size``,
a name the notebook never defines (a GPU build fails to type it).
"""
import numpy as np
from numba import cuda, int32

from . import case

GUIDE = "Accelerated_Python_User_Guide/notebooks/"
COURSE = "tutorials/accelerated-python/notebooks/kernels/"


@cuda.jit
def foo_undefined_bound(input_array, output_array):
    thread_id = cuda.threadIdx.x
    block_id = cuda.blockIdx.x
    block_width = cuda.blockDim.x
    i = thread_id + block_id * block_width
    if i < an_array.size:  # noqa: F821  (the notebook's own typo)
        output_array[i] = input_array[i]


@case(GUIDE + "Chapter_05_CUDA_Kernels_with_Numba.ipynb (foo, first)", "compile")
def ch05_foo_undefined_bound():
    inp, out = np.arange(10), np.zeros(10)
    foo_undefined_bound[1, 32](inp, out)
    return out


@cuda.jit
def foo_grid(input_array, output_array):
    i = cuda.grid(1)
    output_array[i] = input_array[i]


@case(GUIDE + "Chapter_05_CUDA_Kernels_with_Numba.ipynb (foo, cuda.grid)", "clean")
def ch05_foo_grid():
    inp, out = np.arange(10), np.zeros(10)
    foo_grid[1, len(inp)](inp, out)
    return out


@cuda.jit
def add_grid_stride(x_array, y_array, output_array):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x_array.shape[0], stride):
        output_array[i] = x_array[i] + y_array[i]


@case(GUIDE + "Chapter_05_CUDA_Kernels_with_Numba.ipynb (add)", "clean")
def ch05_add_grid_stride():
    a = np.arange(10)
    out = np.zeros_like(a)
    add_grid_stride[1, 32](a, a * 2, out)
    return out


def vecadd(a, b, c):
    tid = cuda.grid(1)
    size = len(c)
    if tid < size:
        c[tid] = a[tid] + b[tid]


@case(GUIDE + "Chapter_10_Developer_Tools.ipynb (vecadd, forall)", "clean")
def ch10_vecadd_forall():
    rng = np.random.default_rng(1)
    a, b = rng.random(3000), rng.random(3000)
    c = np.zeros_like(a)
    kernel = cuda.jit(lineinfo=True)(vecadd)  # in the case: the stock simulator refuses lineinfo
    kernel.forall(len(a))(a, b, c)
    return c


def invalid_read_kernel(x, out):
    tx = cuda.threadIdx.x
    ty = cuda.blockIdx.x
    bw = cuda.blockDim.x
    pos = tx + ty * bw
    if pos < x.size:
        out[pos] = x[pos + 2]  # out of bounds access (the chapter's own comment)


@case(GUIDE + "Chapter_10_Developer_Tools.ipynb (invalid_read_kernel)", "oob")
def ch10_invalid_read_kernel():
    x, out = np.arange(100, dtype=np.int32), np.zeros(100, np.int32)
    cuda.jit("void(int32[:], int32[:])", lineinfo=True)(invalid_read_kernel)[4, 32](x, out)
    return out


ITEMS_PER_THREAD = 4


@cuda.jit
def copy_blocked(src, dst, items_per_thread):
    base = cuda.grid(1) * items_per_thread
    for i in range(items_per_thread):
        dst[base + i] = src[base + i]


@case(COURSE + "solutions/40__kernel_authoring__copy__SOLUTION.ipynb (copy_blocked)", "clean")
def copy_blocked_case():
    src = np.arange(4 * 32 * ITEMS_PER_THREAD)
    dst = np.empty_like(src)
    copy_blocked[4, 32](src, dst, ITEMS_PER_THREAD)
    return dst


@cuda.jit
def copy_optimized(src, dst, items_per_thread):
    bd = cuda.blockDim.x
    bx = cuda.blockIdx.x
    tx = cuda.threadIdx.x
    items_per_block = bd * items_per_thread
    base = tx + bx * items_per_block
    for i in range(0, items_per_block, bd):
        dst[base + i] = src[base + i]


@case(COURSE + "solutions/40__kernel_authoring__copy__SOLUTION.ipynb (copy_optimized)", "clean")
def copy_optimized_case():
    src = np.arange(4 * 32 * ITEMS_PER_THREAD)
    dst = np.empty_like(src)
    copy_optimized[4, 32](src, dst, ITEMS_PER_THREAD)
    return dst


BINS = 256
TPB = 64
HIST_ITEMS = 4


@cuda.jit
def histogram_global(values, histogram):
    for i in range(HIST_ITEMS):
        value = values[cuda.grid(1) * HIST_ITEMS + i]
        cuda.atomic.add(histogram, value, 1)


def _text():
    rng = np.random.default_rng(2)
    return rng.integers(32, 127, 2 * TPB * HIST_ITEMS).astype(np.uint8)


@case(COURSE + "solutions/41__kernel_authoring__book_histogram__SOLUTION.ipynb (histogram_global)",
      "clean")
def histogram_global_case():
    h = np.zeros(BINS, np.int32)
    histogram_global[2, TPB](_text(), h)
    return h


@cuda.jit
def histogram_localized(values, histogram):
    """The solution's kernel with its ``cuda.coop`` striped block load written out."""
    items = cuda.local.array(HIST_ITEMS, dtype=values.dtype)
    base = cuda.blockIdx.x * TPB * HIST_ITEMS
    for i in range(HIST_ITEMS):
        items[i] = values[base + i * TPB + cuda.threadIdx.x]
    local_histogram = cuda.shared.array(BINS, dtype=int32)
    for i in range(0, BINS, TPB):
        b = i + cuda.threadIdx.x
        if b < local_histogram.size:
            local_histogram[b] = 0
    cuda.syncthreads()
    for i in range(HIST_ITEMS):
        cuda.atomic.add(local_histogram, items[i], 1)
    cuda.syncthreads()
    for i in range(0, BINS, TPB):
        b = i + cuda.threadIdx.x
        if b < histogram.size:
            cuda.atomic.add(histogram, b, local_histogram[b])


@case(COURSE + "solutions/41__kernel_authoring__book_histogram__SOLUTION.ipynb "
      "(histogram_localized)", "clean")
def histogram_localized_case():
    h = np.zeros(BINS, np.int32)
    histogram_localized[2, TPB](_text(), h)
    return h


@cuda.jit
def blur(im, output):
    x, y, c = cuda.grid(3)
    if x < im.shape[0] and y < im.shape[1] and c < im.shape[2]:
        output[x, y, c] = (im[x-1, y-1, c] + im[x, y-1, c] + im[x+1, y-1, c] +
                           im[x-1, y, c] + im[x, y, c] + im[x+1, y, c] +
                           im[x-1, y+1, c] + im[x+1, y, c] + im[x+1, y+1, c]) / 9


@case(COURSE + "42__kernel_authoring__gaussian_blur.ipynb (blur)", "oob")
def gaussian_blur():
    """The exercise's starting kernel: at the image's edges it reads row and column -1 (Numba
    wraps it to the far edge) and one past the end."""
    im = np.random.default_rng(3).random((8, 8, 3)).astype(np.float32)
    out = np.zeros_like(im)
    blur[(1, 1, 1), (8, 8, 3)](im, out)
    return out


@cuda.jit
def black_white(im, output):
    x, y = cuda.grid(2)
    if x < im.shape[0] and y < im.shape[1]:
        average = (im[x, y, 0] + im[x, y, 1] + im[x, y, 2]) / 3
        output[x, y, 0] = average
        output[x, y, 1] = average
        output[x, y, 2] = average
        output[x, y, 3] = im[x, y, 3]


@case(COURSE + "solutions/43__kernel_authoring__black_and_white__SOLUTION.ipynb", "clean")
def black_and_white():
    im = np.random.default_rng(4).integers(0, 256, (10, 12, 4)).astype(np.uint8)
    out = np.zeros_like(im)
    black_white[(2, 2), (8, 8)](im, out)
    return out
