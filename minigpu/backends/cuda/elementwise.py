"""Elementwise maps: ``unary``, ``binary``, ``where`` and dtype ``convert``.

Every output element depends on one element of each input, so these kernels do no arithmetic
worth speaking of: they are limited by memory bandwidth. The whole game is to touch each byte
once, in big coalesced transactions, and keep the per-element index math cheap.

How the family is built
    Each op of the op table (``backends/optable.py``) is a tiny ``@cuda.jit(device=True)``
    function compiled from its table entry, the op's one definition: the NumPy form when it
    is plain arithmetic (``binary_add`` is ``lambda x, y, a, b: x + y``), else the entry's
    one-element ``scalar`` form (``exp_scalar``: ``math.exp(x)``, libdevice's ``expf`` in a
    float32 kernel). A device function is written here instead only where it teaches
    something (``unary_sigmoid``'s overflow-free select, ``unary_gelu``'s split constants, the
    fused backward maps); its docstring says what. A cached kernel factory,
    :func:`map_kernel`, pastes one op into one of four kernel bodies, (unary | binary) x
    (dense | strided), which Numba compiles on first launch (``where`` has its own
    dense/strided pair: it has no op to vary). The compiler inlines the op, so the kernel is
    as if hand-written for it, yet no kernel body is written twice and adding an op is adding
    one table entry.

Lesson 1: the contiguous fast path vs the strided/broadcast path
    ``*_dense`` kernels index ``x[offset + i]`` directly: consecutive threads touch consecutive
    addresses (4 32-byte sectors per warp per float32 operand) and the only index math is an
    add. ``*_strided`` kernels turn the output index into a buffer position with
    :func:`strided.strided_offset`, a chain of 64-bit div/mod per dimension and operand. Before
    launching, the host merges dimensions that are contiguous with respect to each other in
    every operand and drops size-1 dimensions (:func:`collapse_dims`): a view that is dense
    after all (an offset slice, a size-1 expand) takes the fast path, and a strided one keeps as
    few dimensions, hence divisions, as possible.

leaky_relu: select, not branch
    ``unary_leaky_relu`` picks the slope with a select and multiplies on every lane:
    branch-free by construction, exact (``x * 1 == x``) and NaN-propagating like NumPy. The
    if/else form it replaced is the divergence lesson (``minigpu/lessons/divergence.py``).

float32 stays float32
    Constants are written ``float32(0)``/``float32(1)`` (a Python ``0.0`` or even ``1`` makes
    Numba promote a float32 expression to float64: 1/64 of the float32 rate on consumer GPUs,
    1/2 on an H100/H200, and twice the registers; a float32 constant promotes exactly into
    float64 kernels), and ``alpha``/``beta`` arrive
    already typed as the tensor's dtype (:func:`device.scalar`).
"""
from __future__ import annotations

import functools
# Under the simulator these become IEEE, dtype-keeping versions (minigpu/simulator/ieee.py).
from math import copysign, erf, exp, floor, log1p, tanh

import numpy as np
from numba import cuda, float32

from .. import optable
from ..contract import BINARY_OPS, UNARY_OPS, View, result_dtype
from .blocks import launch, launch_specialized, max_nan, min_nan
from .device import empty, launch_1d, scalar
from .kernelspec import KernelSpec, reported
from .strided import strided_offset


# --- op device functions ------------------------------------------------------------------------
def split_constant(value):
    """A float64 constant as two float32s ``hi + lo`` (lo holds the bits hi rounded off).

    ``x * hi + x * lo`` is ``x * value`` in x's own precision: within an ulp in a float32
    kernel (no float64 promotion, see "float32 stays float32") and to about 2**-48 relative
    in a float64 kernel, where a single ``float32(value)`` would be off by 2**-24. hi is
    rounded toward zero, so lo has the sign of hi and ``inf * hi + inf * lo`` is inf, not
    ``inf - inf``."""
    hi = np.float32(value)
    if abs(np.float64(hi)) > abs(value):
        hi = np.nextafter(hi, np.float32(0))
    return hi, np.float32(value - np.float64(hi))


SQRT1_2 = split_constant(optable.SQRT1_2)
INV_SQRT_2PI = split_constant(optable.INV_SQRT_2PI)
SQRT_2_OVER_PI = split_constant(optable.SQRT_2_OVER_PI)
GELU_CUBIC = split_constant(optable.GELU_CUBIC)
GELU_CUBIC3 = split_constant(3 * optable.GELU_CUBIC)


# Unary ops take (x, a, b), binary ops (x, y, a, b); a and b are alpha and beta. Most ops have
# no device function here: the op table's one-element form is compiled as one
# (``_device_function``): its NumPy form when that is plain arithmetic (``shared``: neg, add,
# the comparisons, ...), else its ``scalar`` form (exp, floor, isnan, elu, remainder, ...).
# The ones below are written by hand because each teaches something, which its docstring
# says: a select instead of a branch, NaN and -0.0 kept, an exp that cannot overflow, split
# constants, a device function shared by a forward and its backward.


@cuda.jit(device=True)
def unary_identity(x, a, b):
    """The map of ``convert``, not a table op: it computes nothing, the store into the
    output array converts the dtype (float -> int truncates, nonzero -> True)."""
    return x


@cuda.jit(device=True)
def unary_sigmoid(x, a, b):
    """exp of -|x| only, so it never overflows: 1/(1+e) for x >= 0, e/(1+e) below (cpu's
    formula). The numerator is a select, the division is shared: no divergent branch."""
    e = exp(-abs(x))
    num = float32(1) if x >= float32(0) else e
    return num / (float32(1) + e)


@cuda.jit(device=True)
def unary_relu(x, a, b):
    """A select, not ``max(x, 0)``: NaN is not < 0, so it propagates like ``np.maximum``
    (the hardware ``max.f32`` returns the non-NaN operand)."""
    return float32(0) if x < float32(0) else x


@cuda.jit(device=True)
def unary_leaky_relu(x, a, b):
    """Production variant: select the slope (1 or a), then one multiply on every lane
    (exact, NaN-propagating; the branch form is ``lessons/divergence.py``)."""
    slope = float32(1) if x > float32(0) else a
    return x * slope


@cuda.jit(device=True)
def unary_sign(x, a, b):
    """-1, 0 or 1, PyTorch's: +0 for +-0.0 (``x - x``, in x's type) and 0 for NaN."""
    if x > float32(0):
        return float32(1)
    if x < float32(0):
        return float32(-1)
    if x == x:
        return x - x
    return float32(0)


@cuda.jit(device=True)
def unary_clamp(x, a, b):
    """Two selects, PyTorch's ``min(max(x, a), b)``: a NaN input fails both tests and stays
    NaN (the hardware ``max.f32``/``min.f32`` would drop it), -0.0 is not below a 0 bound."""
    y = a if x < a else x
    return b if y > b else y


# rounding and activations with split constants (op table entries of the same name)
@cuda.jit(device=True)
def times(x, c):
    """x times a ``split_constant`` pair, in x's precision."""
    return x * c[0] + x * c[1]


@cuda.jit(device=True)
def unary_round(x, a, b):
    """Round half to even (PyTorch's and NumPy's rule): floor, then up when the fraction is
    over one half, or exactly one half and the floor is odd. ``copysign`` keeps -0.0 for
    -0.5 < x <= 0 (NaN and inf pass through: their fraction is NaN, no comparison holds)."""
    r = floor(x)
    d = x - r  # exact
    half = float32(0.5)
    odd = floor(r * half) * float32(2) != r
    up = d > half or (d == half and odd)
    return copysign(r + float32(1) if up else r, x)


@cuda.jit(device=True)
def unary_gelu(x, a, b):
    """x/2 * (1 + erf(x / sqrt(2))) with 1/sqrt(2) as a split constant (``times``): float32
    stays float32 and a float64 kernel keeps a float64 constant."""
    half = float32(0.5)
    return half * x * (float32(1) + erf(times(x, SQRT1_2)))


@cuda.jit(device=True)
def gelu_tanh_inner(x):
    """sqrt(2/pi) * (x + 0.044715 x^3), the tanh argument of the approximate GELU."""
    return times(x + times(x * x * x, GELU_CUBIC), SQRT_2_OVER_PI)


@cuda.jit(device=True)
def unary_gelu_tanh(x, a, b):
    """The tanh approximation from split constants; its inner polynomial is one device
    function, shared with the fused backward ``binary_gelu_tanh_grad``."""
    return float32(0.5) * x * (float32(1) + tanh(gelu_tanh_inner(x)))


@cuda.jit(device=True)
def unary_silu(x, a, b):
    """x * sigmoid(x) through ``unary_sigmoid``: a device function calls another (the
    compiler inlines it), so the overflow-free sigmoid is written once."""
    return x * unary_sigmoid(x, a, b)


@cuda.jit(device=True)
def unary_softplus(x, a, b):
    """log1p(exp(a*x)) / a; x itself above the threshold b, where exp would overflow and
    the difference is below rounding. A branch, not a select, so exp never sees a huge z."""
    z = x * a
    if z > b:
        return x
    return log1p(exp(z)) / a


@cuda.jit(device=True)
def binary_maximum(x, y, a, b):
    """The reductions' ``blocks.max_nan``: NaN from either side propagates, like
    ``np.maximum`` (the hardware ``max.f32`` would drop it)."""
    return max_nan(x, y)


@cuda.jit(device=True)
def binary_minimum(x, y, a, b):
    """The reductions' ``blocks.min_nan``: NaN-propagating like ``np.minimum``."""
    return min_nan(x, y)


@cuda.jit(device=True)
def binary_gelu_grad(x, y, a, b):
    """Fused backward, x * (Phi(y) + y * phi(y)): the GELU derivative times the upstream
    grad x in one pass, with the forward's split constants."""
    half = float32(0.5)
    cdf = half * (float32(1) + erf(times(y, SQRT1_2)))
    pdf = times(exp(-half * y * y), INV_SQRT_2PI)
    return x * (cdf + y * pdf)


@cuda.jit(device=True)
def binary_gelu_tanh_grad(x, y, a, b):
    """Fused backward of ``unary_gelu_tanh``, reusing its inner polynomial
    (``gelu_tanh_inner``) and split constants."""
    half = float32(0.5)
    t = tanh(gelu_tanh_inner(y))
    du = times(float32(1) + times(y * y, GELU_CUBIC3), SQRT_2_OVER_PI)
    return x * (half * (float32(1) + t) + half * y * (float32(1) - t * t) * du)


@cuda.jit(device=True)
def binary_silu_grad(x, y, a, b):
    """Fused backward of silu: one overflow-free ``unary_sigmoid`` serves both terms."""
    s = unary_sigmoid(y, a, b)
    return x * s * (float32(1) + y * (float32(1) - s))


@cuda.jit(device=True)
def binary_softplus_grad(x, y, a, b):
    """Fused backward of softplus: sigmoid(a*y) through ``unary_sigmoid`` (no overflow),
    and the forward's threshold, above which the derivative is exactly 1."""
    z = y * a
    return x if z > b else x * unary_sigmoid(z, a, b)


@cuda.jit(device=True)
def binary_relu_grad(x, y, a, b):
    """Fused backward: the upstream grad x passes where the relu input y was positive; one
    map (three array passes) instead of a mask map and a multiply map (five)."""
    return x if y > float32(0) else float32(0)


@cuda.jit(device=True)
def binary_leaky_relu_grad(x, y, a, b):
    """Fused backward, select form like the forward: x * (1 if y > 0 else a)."""
    slope = float32(1) if y > float32(0) else a
    return x * slope


def _device_function(kind, op):
    """The device function of a table op: ``<kind>_<name>`` written above, else the entry's
    NumPy form when it is ``shared`` (plain arithmetic, valid on one element), else its
    one-element ``scalar`` form, compiled as a device function. Exactly one of the three
    exists: an op is defined once."""
    written = globals().get(f"{kind}_{op.name}")
    if written is not None:
        if op.shared or op.scalar is not None:
            raise TypeError(f"table op {op.name!r} is defined twice: {kind}_{op.name} here and "
                            f"its {'NumPy' if op.shared else 'scalar'} form in "
                            f"backends/optable.py")
        return written
    if op.shared:
        return cuda.jit(device=True)(op.numpy)
    if op.scalar is None:
        raise NotImplementedError(f"table op {op.name!r}: no {kind}_{op.name} device function "
                                  f"and no scalar form in backends/optable.py")
    return cuda.jit(device=True)(op.scalar)


UNARY = {"identity": unary_identity,
         **{op.name: _device_function("unary", op) for op in optable.UNARY}}
"""Unary op name -> device function: every op of the table (``backends/optable.py``), and
``identity`` (``convert``)."""

BINARY = {op.name: _device_function("binary", op) for op in optable.BINARY}
"""Binary op name -> device function."""


# --- kernel bodies (one per arity and path), instantiated per op by map_kernel ----------------
def dense_unary_kernel(f):
    @cuda.jit
    def unary_dense(x, xo, out, a, b):
        """out[i] = f(x[xo + i], a, b) over a dense operand.

        Thread mapping: grid-stride, thread t handles i = t, t + gridsize, ...
        Block/grid: 1-D, ``device.launch_1d`` (256 threads, enough blocks to cover n, capped).
        Memory: one coalesced load and one coalesced store per element; index math is one add.
        Faster than ``unary_strided``: no div/mod per element, and every access coalesced.
        """
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, step):
            out[i] = f(x[xo + i], a, b)

    return unary_dense


def _unary_strided(f):
    @cuda.jit
    def unary_strided(x, shape, xs, xo, out, a, b):
        """out[i] = f(x[position of element i of the view (shape, xs, xo)], a, b).

        Thread mapping: grid-stride over output elements in row-major order.
        Block/grid: 1-D, ``device.launch_1d``.
        Memory: stores coalesced; loads coalesced when the innermost stride is 1, a broadcast
        (one transaction serves the warp) when it is 0, scattered otherwise. Each element costs
        one div/mod pair per (collapsed) dimension. The general path: any permutation, slice
        step, offset or stride-0 broadcast.
        """
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, step):
            out[i] = f(x[strided_offset(i, shape, xs, xo)], a, b)

    return unary_strided


def _binary_dense(f):
    @cuda.jit
    def binary_dense(x, xo, y, yo, out, a, b):
        """out[i] = f(x[xo + i], y[yo + i], a, b) over two dense operands.

        Thread mapping: grid-stride, one output element per iteration.
        Block/grid: 1-D, ``device.launch_1d``.
        Memory: two coalesced loads and one coalesced store per element, no div/mod.
        Faster than ``binary_strided`` for the same reasons as ``unary_dense``.
        """
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, step):
            out[i] = f(x[xo + i], y[yo + i], a, b)

    return binary_dense


def _binary_strided(f):
    @cuda.jit
    def binary_strided(x, shape, xs, xo, y, ys, yo, out, a, b):
        """out[i] = f(x[pos_x(i)], y[pos_y(i)], a, b); x and y share ``shape``, each has its own
        strides (a broadcast operand has stride 0 on the broadcast dimensions).

        Thread mapping: grid-stride over output elements in row-major order.
        Block/grid: 1-D, ``device.launch_1d``.
        Memory: store coalesced; each load coalesced when that operand's innermost stride is 1
        and a warp-wide broadcast when it is 0 (bias-add: the bias row is read once per warp).
        """
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, step):
            out[i] = f(x[strided_offset(i, shape, xs, xo)],
                       y[strided_offset(i, shape, ys, yo)], a, b)

    return binary_strided


@reported(lambda k, x: [KernelSpec("where_dense", k, (x.b8, 0, x.f, 0, x.f, 0, x.f), x.block)])
@cuda.jit
def where_dense(c, co, x, xo, y, yo, out):
    """out[i] = x[xo + i] if c[co + i] else y[yo + i] over dense operands.

    Thread mapping: grid-stride, one element per iteration. Block/grid: ``device.launch_1d``.
    Memory: coalesced. The ternary becomes a short branch that picks the address, then one
    load: each lane reads only the operand it keeps (a mixed warp runs both arms, but they are
    two instructions each). Faster than ``where_strided``: no div/mod.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = x[xo + i] if c[co + i] else y[yo + i]


@reported(lambda k, x: [KernelSpec("where_strided", k, (x.b8, x.t2, x.t2, 0, x.f, x.t2, 0, x.f,
                                                             x.t2, 0, x.f), x.block)])
@cuda.jit
def where_strided(c, shape, cs, co, x, xs, xo, y, ys, yo, out):
    """out[i] = x[...] if c[...] else y[...] with each operand at its own strides.

    Thread mapping: grid-stride over output elements in row-major order.
    Block/grid: ``device.launch_1d``. Memory: coalesced store; loads as in ``binary_strided``.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        if c[strided_offset(i, shape, cs, co)]:
            out[i] = x[strided_offset(i, shape, xs, xo)]
        else:
            out[i] = y[strided_offset(i, shape, ys, yo)]


_BODIES = {("unary", "dense"): dense_unary_kernel, ("unary", "strided"): _unary_strided,
           ("binary", "dense"): _binary_dense, ("binary", "strided"): _binary_strided}
_OPS = {"unary": UNARY, "binary": BINARY}


def _map_kernel_specs(k, x):
    """The dense body of every op the report covers, and the strided bodies once each (a
    strided body is the same per op)."""
    trig = ("libdevice sinf/cosf: Payne-Hanek reduction for |x| > 105615 (float64 "
            "arithmetic on that slow path only)")
    unary = tuple(dict.fromkeys(  # report order, then every scalar form, each once
        ("relu", "exp", "tanh", "sigmoid", "leaky_relu", "round", "gelu", "gelu_tanh", "silu",
         "softplus", *(op.name for op in optable.UNARY if op.scalar))))
    binary = ("add", "relu_grad", "gelu_grad", "gelu_tanh_grad", "silu_grad", "softplus_grad",
              *(op.name for op in optable.BINARY if op.scalar and not op.integer))
    integer = [op.name for op in optable.BINARY if op.integer]
    specs = [KernelSpec(f"unary_dense[{op}]", k("unary", op, "dense"),
                        (x.f, 0, x.b8 if op in ("isnan", "isinf") else x.f, x.s, x.s), x.block,
                        f64_reason=trig if op in ("sin", "cos") else "") for op in unary]
    specs += [KernelSpec(f"binary_dense[{op}]", k("binary", op, "dense"),
                         (x.f, 0, x.f, 0, x.f, x.s, x.s), x.block) for op in binary]
    specs += [KernelSpec(f"binary_dense[{op}]", k("binary", op, "dense"),
                         (x.i64, 0, x.i64, 0, x.i64, np.int64(0), np.int64(0)), x.block,
                         dtype="int64") for op in integer]
    half, h0 = x.h, np.float16(0)  # half storage, float32 arithmetic: every float map
    specs += [KernelSpec(f"unary_dense_f16[{op}]", k("unary", op, "dense", True),
                         (half, 0, x.b8 if op in ("isnan", "isinf") else half, h0, h0), x.block,
                         dtype="float16", f64_reason=trig if op in ("sin", "cos") else "")
              for op in unary]
    specs += [KernelSpec(f"binary_dense_f16[{op}]", k("binary", op, "dense", True),
                         (half, 0, half, 0, half, h0, h0), x.block, dtype="float16")
              for op in binary]
    return specs + [
        KernelSpec("unary_strided[relu]", k("unary", "relu", "strided"),
                   (x.f, x.t2, x.t2, 0, x.f, x.s, x.s), x.block),
        KernelSpec("binary_strided[add]", k("binary", "add", "strided"),
                   (x.f, x.t2, x.t2, 0, x.f, x.t2, 0, x.f, x.s, x.s), x.block)]


@functools.lru_cache(maxsize=None)
def _in_float32(kind: str, op: str):
    """The device function of ``op`` for float16 operands: each element widened to float32,
    computed, and narrowed by the store (PyTorch's "opmath" for half). Storage stays half, so
    a map still moves half the bytes of a float32 one; the arithmetic keeps float32 accuracy
    (and needs no half intrinsics, which numba-cuda links in from cuda_fp16 only at launch)."""
    f = _OPS[kind][op]
    if kind == "unary":
        @cuda.jit(device=True)
        def unary_in_float32(x, a, b):
            return f(float32(x), float32(a), float32(b))
        return unary_in_float32

    @cuda.jit(device=True)
    def binary_in_float32(x, y, a, b):
        return f(float32(x), float32(y), float32(a), float32(b))
    return binary_in_float32


@reported(_map_kernel_specs)
@functools.lru_cache(maxsize=None)
def map_kernel(kind: str, op: str, path: str, half: bool = False):
    """The kernel applying op ``op`` of ``kind`` ('unary'/'binary') on path 'dense'/'strided'
    (``half``: for float16 operands, computed in float32).

    Built once per (kind, op, path, half) and cached; Numba then compiles it lazily, once per
    argument-type signature (dtype, number of collapsed dimensions) on first launch.
    """
    return _BODIES[kind, path](_in_float32(kind, op) if half else _OPS[kind][op])


# --- host side ------------------------------------------------------------------------------------
def collapse_dims(shape, *strides):
    """Drop size-1 dimensions and merge neighbours that are contiguous in *every* operand.

    ``(shape, (strides_x, strides_y, ...))`` of the fewest dimensions that visit the same
    positions in the same row-major order. Dimension d merges into d-1 when, for each operand,
    ``stride[d-1] == stride[d] * shape[d]``. Cached per layout (they repeat at every step).
    """
    return _collapse_dims(tuple(shape), tuple(map(tuple, strides)))


@functools.lru_cache(maxsize=4096)
def _collapse_dims(shape, strides):
    merged = []  # [extent, [stride per operand]]
    for d, extent in enumerate(shape):
        if extent == 1:
            continue
        sts = [int(s[d]) for s in strides]
        if merged and all(p == st * extent for p, st in zip(merged[-1][1], sts)):
            merged[-1][0] *= int(extent)
            merged[-1][1] = sts
        else:
            merged.append([int(extent), sts])
    out_shape = tuple(e for e, _ in merged)
    out_strides = tuple(tuple(sts[k] for _, sts in merged) for k in range(len(strides)))
    return out_shape, out_strides


def _is_dense(shape, strides) -> bool:
    """True when collapsed operands are all a run of consecutive elements (or one element)."""
    return len(shape) == 0 or (len(shape) == 1 and all(s == (1,) for s in strides))


def _alpha(value, dtype):
    """alpha/beta as the kernel sees them: the float dtype of the tensor (float32 stays
    float32), or for integer/bool tensors an int64 (float64 if it has a fraction), which is
    how NumPy compares an int64 array with a Python number."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return scalar(value, dtype)
    value = float(value)
    return np.int64(value) if value.is_integer() else np.float64(value)


_HALF = np.dtype(np.float16)


def _map(kind, op, views, out, a, b):
    """Launch the dense or strided map of ``op`` over ``views`` (equal shapes) into ``out``,
    through the kernel specialized for the argument types (``blocks.specialized``): the
    buffers' dtypes, the offsets' and alpha's and beta's types, and for the strided kernel
    the number of collapsed dims decide them (buffers are 1-D and contiguous, the collapsed
    shape and strides tuples of ints)."""
    n = out.size
    if n == 0:
        return out
    shape, strides = collapse_dims(views[0].shape, *(v.strides for v in views))
    key = (tuple([(v.buf.dtype, type(v.offset)) for v in views]), out.dtype, type(a), type(b))
    grid, block = launch_1d(n)
    half = views[0].buf.dtype == _HALF
    if _is_dense(shape, strides):
        args = [arg for v in views for arg in (v.buf, v.offset)]
        launch_specialized(map_kernel(kind, op, "dense", half), key, grid, block, *args, out,
                           a, b)
    else:
        args = [arg for v, st in zip(views, strides) for arg in (v.buf, st, v.offset)]
        args.insert(1, shape)
        launch_specialized(map_kernel(kind, op, "strided", half), key + (len(shape),), grid,
                           block, *args, out, a, b)
    return out


def unary(op, x: View, alpha=0, beta=0):
    """unary(op, x_view, alpha=0, beta=0) -> new dense buffer; op in ``contract.UNARY_OPS``."""
    if op not in UNARY:
        raise ValueError(f"unknown unary op {op!r}; expected one of {sorted(UNARY_OPS)}")
    out = empty(x.numel, result_dtype(op, x.dtype))
    return _map("unary", op, [x], out, _alpha(alpha, x.dtype), _alpha(beta, x.dtype))


def binary(op, x: View, y: View, alpha=0, beta=0):
    """binary(op, x_view, y_view, alpha=0, beta=0) -> new dense buffer; equal shapes (the
    caller broadcast with stride-0 views); op in ``contract.BINARY_OPS``."""
    if op not in BINARY:
        raise ValueError(f"unknown binary op {op!r}; expected one of {sorted(BINARY_OPS)}")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"binary {op}: shapes {tuple(x.shape)} and {tuple(y.shape)} differ "
                         "(broadcast them first)")
    out = empty(x.numel, result_dtype(op, x.dtype))
    return _map("binary", op, [x, y], out, _alpha(alpha, x.dtype), _alpha(beta, x.dtype))


def where(cond: View, x: View, y: View):
    """where(cond, x, y) -> new dense buffer of x's dtype: x where cond else y."""
    if not tuple(cond.shape) == tuple(x.shape) == tuple(y.shape):
        raise ValueError(f"where: shapes {tuple(cond.shape)}, {tuple(x.shape)} and "
                         f"{tuple(y.shape)} differ (broadcast them first)")
    n = x.numel
    out = empty(n, x.dtype)
    if n == 0:
        return out
    views = (cond, x, y)
    shape, strides = collapse_dims(x.shape, *(v.strides for v in views))
    if _is_dense(shape, strides):
        launch(where_dense, n, cond.buf, cond.offset, x.buf, x.offset, y.buf, y.offset, out)
    else:
        (cs, xs, ys) = strides
        launch(where_strided, n, cond.buf, shape, cs, cond.offset, x.buf, xs, x.offset,
                y.buf, ys, y.offset, out)
    return out


def convert(v: View, dtype):
    """The view's elements converted to ``dtype``, row-major (``memory.cast``): the identity
    map, the conversion happens in the store (float -> int truncates, nonzero -> True)."""
    out = empty(v.numel, np.dtype(dtype))
    return _map("unary", "identity", [v], out, np.int64(0), np.int64(0))
