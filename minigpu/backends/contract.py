"""The primitive contract: everything a backend must implement, with exact semantics.

A tensor is a flat *buffer* (a 1-D, contiguous array of one dtype that lives on one device)
plus a layout: ``shape``, ``strides`` (in elements, not bytes) and ``offset``. Element
``(i0, i1, ...)`` of the tensor lives at ``buf[offset + i0*strides[0] + i1*strides[1] + ...]``.
Views (transpose, slicing, expand, ...) only change the layout, never the buffer, so they cost
nothing; the backends never see them as operations. A stride of 0 repeats an element
(``expand``/broadcasting).

Primitives receive layouts as :class:`View` and return *new contiguous buffers* in row-major
order (``numel(shape)`` elements). Only the ``*_`` primitives write into an existing buffer.

Buffers are ``numpy.ndarray`` on ``cpu`` and numba device arrays on ``cuda``. Supported dtypes:
float32 (default), float64 (gradchecks), int64 (indices, class targets) and bool (masks).

``cpu/`` is the reference implementation: the tests compare ``cuda`` to it primitive by
primitive. Every name in :data:`PRIMITIVES` must exist in every backend module.
"""
from __future__ import annotations

import functools
import importlib
import math
import pkgutil
from typing import Any, NamedTuple

import numpy as np

from . import optable


class View(NamedTuple):
    """A strided window onto a flat buffer. ``strides`` and ``offset`` count elements."""

    buf: Any
    shape: tuple
    strides: tuple
    offset: int

    @property
    def dtype(self):
        return self.buf.dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def numel(self):
        return numel(self.shape)

    def is_contiguous(self):
        return is_contiguous(self.shape, self.strides)


def numel(shape) -> int:
    return int(math.prod(shape))


def contiguous_strides(shape) -> tuple:
    """Row-major strides (in elements) of a dense array of ``shape``."""
    return row_major_strides(tuple(shape))


@functools.lru_cache(maxsize=4096)
def row_major_strides(shape: tuple) -> tuple:
    """``contiguous_strides``, cached: a training step asks for the same few shapes again and
    again (every new tensor and every dense check)."""
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= max(int(s), 1)
    return tuple(reversed(strides))


def is_contiguous(shape, strides) -> bool:
    """True when the layout visits the buffer densely in row-major order (size-1 dims ignored)."""
    if strides == row_major_strides(tuple(shape)):
        return True
    step = 1
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1:
            if st != step:
                return False
            step *= s
    return True


def pair(value, name="size") -> tuple:
    """A conv/pool size argument as (height, width) ints: ``3`` and ``(3,)`` -> (3, 3),
    ``(3, 5)`` kept; anything else is a ValueError naming the argument."""
    if np.isscalar(value):
        return int(value), int(value)
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * 2
    if len(value) != 2:
        raise ValueError(f"{name} must be an int or a tuple of 2 ints, got {value}")
    return value


def conv_out_size(size, k, stride, pad, dilation=1) -> int:
    """Output length of a convolution or pooling window sweep along one axis (PyTorch's
    formula): ``(size + 2*pad - dilation*(k - 1) - 1) // stride + 1``."""
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def dense(buf, shape) -> View:
    """The contiguous view of a whole buffer, as returned by every primitive."""
    return View(buf, tuple(shape), contiguous_strides(shape), 0)


UNARY_OPS = {op.name: op.formula for op in optable.UNARY}
"""Unary maps: name -> exact semantics, with parameters a=alpha, b=beta (``optable.py``)."""

BINARY_OPS = {op.name: op.formula for op in optable.BINARY}
"""Binary maps on equal shapes (the caller broadcasts): name -> semantics (``optable.py``)."""

COMPARISONS = tuple(dict.fromkeys(op.name for op in (*optable.BINARY, *optable.UNARY)
                                  if op.bool_result))
"""The maps with a bool result: comparisons and the predicates ``isnan``/``isinf``."""

REDUCE_OPS = ("sum", "max", "min", "prod")

PRIMITIVES = {
    # --- memory and transfer -------------------------------------------------------------
    "empty": "empty(n, dtype) -> buf: n uninitialised elements",
    "full": "full(n, value, dtype) -> buf: n copies of value",
    "from_numpy": "from_numpy(array) -> buf: a copy of the array's elements in C order",
    "to_numpy": "to_numpy(view) -> np.ndarray of view.shape (a host copy; synchronises)",
    "contiguous": "contiguous(view) -> buf: the view's elements in row-major order",
    "cast": "cast(view, dtype) -> buf: elements converted to dtype, row-major",
    "assign_": "assign_(dst_view, src_view): dst[...] = src elementwise; same shapes",
    "synchronize": "synchronize(): wait for all queued device work",
    # --- elementwise ---------------------------------------------------------------------
    "unary": "unary(op, x_view, alpha=0, beta=0) -> buf; op in UNARY_OPS",
    "binary": "binary(op, x_view, y_view, alpha=0, beta=0) -> buf; x and y have the same "
              "shape (broadcasting was done by the caller with stride-0 views); op in "
              "BINARY_OPS; both inputs have the same dtype",
    "where": "where(cond_view, x_view, y_view) -> buf: x if cond else y; equal shapes",
    # --- reductions ----------------------------------------------------------------------
    "reduce": "reduce(op, x_view, axes) -> buf of the shape with `axes` removed; op in "
              "REDUCE_OPS; axes a sorted tuple of distinct non-negative ints (may be all)",
    "argreduce": "argreduce(op, x_view, axis) -> (values_buf, indices_buf int64) along one "
                 "axis (removed from the shape); op 'max' or 'min'; ties: first index",
    # --- linear algebra ------------------------------------------------------------------
    "matmul": "matmul(a_view (B,M,K), b_view (B,K,N)) -> buf (B,M,N); any strides, a batch "
              "stride of 0 broadcasts that operand",
    # --- softmax -------------------------------------------------------------------------
    "softmax": "softmax(x_view (R,C), log) -> buf (R,C): (log-)softmax of each row, stable",
    "softmax_backward": "softmax_backward(y_view (R,C), g_view (R,C), log) -> grad_x: "
                        "y*(g - sum(g*y)) for softmax, g - exp(y)*sum(g) for log_softmax",
    # --- convolution and pooling (NCHW, contiguous inputs) --------------------------------
    "im2col": "im2col(x_view (N,C,H,W), kernel, stride, padding, dilation) -> buf "
              "(N, C*kh*kw, OH*OW); zero padding; row index c*kh*kw + i*kw + j",
    "col2im": "col2im(cols_view (N, C*kh*kw, OH*OW), x_shape, kernel, stride, padding, "
              "dilation) -> buf (N,C,H,W): the adjoint of im2col (overlaps are summed)",
    "maxpool2d": "maxpool2d(x_view, kernel, stride, padding) -> (out_buf, argmax_buf int64): "
                 "argmax is the flat index h*W + w inside the (n, c) plane; padding is -inf",
    "maxpool2d_backward": "maxpool2d_backward(g_view, argmax_view, x_shape) -> grad_x "
                          "(gradients of overlapping windows are summed)",
    "avgpool2d": "avgpool2d(x_view, kernel, stride, padding, count_include_pad) -> out_buf",
    "avgpool2d_backward": "avgpool2d_backward(g_view, x_shape, kernel, stride, padding, "
                          "count_include_pad) -> grad_x",
    # --- indexing ------------------------------------------------------------------------
    "gather": "gather(x_view (R,C), idx_view (R,) int64) -> buf (R,): x[r, idx[r]]",
    "scatter": "scatter(idx_view (R,), src_view (R,), C) -> buf (R,C): zeros except "
               "out[r, idx[r]] = src[r] (the backward of gather)",
    "index_select": "index_select(w_view (V,D), idx_view (N,)) -> buf (N,D): rows of w",
    "index_add": "index_add(idx_view (N,), src_view (N,D), V) -> buf (V,D): out[idx[n]] += "
                 "src[n] (repeated indices accumulate; atomics on cuda)",
    # --- layer normalisation: one fused row kernel forward, a fused backward -------------
    "layer_norm": "layer_norm(x_view (R,C), weight_view (C,) or None, bias_view (C,) or None, "
                  "eps) -> (y_buf (R,C), mean_buf (R,), rstd_buf (R,)): per row "
                  "y = (x - mean) * rstd * w + b, var biased, rstd = 1/sqrt(var + eps)",
    "layer_norm_backward": "layer_norm_backward(g_view, x_view (R,C), mean_view, rstd_view (R,), "
                           "weight_view or None, param_grads) -> (dx_buf (R,C), dweight_buf "
                           "(C,) or None, dbias_buf (C,) or None)",
    # --- recurrent cells (the gate pre-activations come from matmuls) --------------------
    "lstm_cell": "lstm_cell(gates_view (N,4H), c_prev_view (N,H)) -> (h_buf, c_buf, act_buf): "
                 "gates in PyTorch order i,f,g,o; act = [sig(i), sig(f), tanh(g), sig(o)] "
                 "(N,4H); c = f*c_prev + i*g; h = o*tanh(c)",
    "lstm_cell_backward": "lstm_cell_backward(act_view, c_prev_view, c_view, grad_h_view, "
                          "grad_c_view) -> (grad_gates_buf (N,4H), grad_c_prev_buf (N,H))",
    # --- optimizers: one fused in-place update per parameter ------------------------------
    "sgd_step_": "sgd_step_(param, grad, momentum_buf or None, lr, momentum, dampening, "
                 "weight_decay, nesterov, first_step): PyTorch SGD, in place on flat buffers",
    "adam_step_": "adam_step_(param, grad, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, "
                  "weight_decay): PyTorch Adam (L2 weight decay, bias-corrected), in place",
    "adamw_step_": "adamw_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq or None, step, "
                   "lr, beta1, beta2, eps, weight_decay): PyTorch AdamW (decoupled decay "
                   "p *= 1 - lr*wd, bias-corrected, amsgrad when max_exp_avg_sq is given)",
    "rmsprop_step_": "rmsprop_step_(param, grad, square_avg, grad_avg or None, momentum_buf or "
                     "None, lr, alpha, eps, weight_decay, momentum): PyTorch RMSprop (centered "
                     "when grad_avg is given), in place",
    "adagrad_step_": "adagrad_step_(param, grad, sum, step, lr, lr_decay, weight_decay, eps): "
                     "PyTorch Adagrad, in place",
    # --- random: counter-based, so a (seed, offset) pair gives the same numbers on every
    # backend. bits(i, s) = mix32(uint32(offset + i) ^ mix32(uint32(seed + s*0x9E3779B9)))
    # with mix32 the 'lowbias32' hash (cpu/random.py mix32); s selects one of three streams.
    "random_uniform": "random_uniform(n, seed, offset, dtype) -> buf: (bits(i,0) >> 8) * 2**-24",
    "random_normal": "random_normal(n, seed, offset, dtype) -> buf: Box-Muller, "
                     "u1 = ((bits(i,1) >> 8) + 1) * 2**-24, u2 = (bits(i,2) >> 8) * 2**-24, "
                     "sqrt(-2 log u1) cos(2 pi u2)",
}


# --- scans, stream compaction, gathers and scatters along a dim ------------------------------
PRIMITIVES.update({
    "scan": "scan(op, x_view, axis, exclusive=False, reverse=False) -> buf of x's shape: the "
            "prefix op ('sum' or 'prod') along axis, inclusive (element k combines 0..k) or "
            "exclusive (0..k-1, the identity first); reverse scans from the end",
    "masked_select": "masked_select(x_view, mask_view bool, same shape) -> buf (count,): the "
                     "elements where mask is True, in row-major order",
    "masked_scatter": "masked_scatter(mask_view bool, src_view (count,)) -> buf of mask's "
                      "shape: src[j] at the j-th True position (row-major), zeros elsewhere",
    "gather_dim": "gather_dim(x_view, dim, idx_view int64) -> buf of idx's shape: "
                  "out[..., i_dim, ...] = x[..., idx[..., i_dim, ...], ...] (torch.gather; "
                  "idx's other sizes <= x's)",
    "scatter_add_dim": "scatter_add_dim(base_view, dim, idx_view int64, src_view) -> buf of "
                       "base's shape: base, then out[..., idx[i], ...] += src[i] for every "
                       "element i of idx (torch.scatter_add; atomics on cuda)",
    "sort": "sort(x_view, descending=False) -> (values_buf, indices_buf int64), x's shape: "
            "each row of the last axis sorted, NaN largest, equal values in index order "
            "(stable, also when descending)",
})


# --- binary search --------------------------------------------------------------------------
PRIMITIVES.update({
    "searchsorted": "searchsorted(seq_view (R, S), values_view (R, V), right) -> buf int64 "
                    "(R, V): out[r, j] = lo after PyTorch's binary search of values[r, j] in "
                    "row r of seq: lo, hi = 0, S; while lo < hi: mid = (lo + hi) // 2; hi = mid "
                    "if seq[r, mid] >= values[r, j] (right: >) else lo = mid + 1. In a sorted "
                    "row: the first position whose element is >= (right: >) the value, S if "
                    "none; a comparison with NaN is false. seq and values share a dtype",
})


# --- attention: the flash-attention forward and its fused backward ---------------------------
PRIMITIVES.update({
    "attention": "attention(q_view (B,L,E), k_view (B,S,E), v_view (B,S,Ev), mask_view (B,L,S) "
                 "of q's dtype or None, causal, scale) -> (out_buf (B,L,Ev), lse_buf (B,L)): "
                 "s = scale * q k^T + mask (mask added, any strides; -inf where causal and "
                 "j > i), lse = log sum_j exp(s), out = exp(s - lse) v; a row with every s "
                 "-inf gives out 0 and lse -inf; E, Ev <= 128",
    "attention_backward": "attention_backward(q, k, v, out_view (B,L,Ev), lse_view (B,L), "
                          "g_view (B,L,Ev), mask_view or None, causal, scale) -> (dq_buf, "
                          "dk_buf, dv_buf) of attention's q, k, v for the upstream gradient g, "
                          "p = exp(s - lse) recomputed (0 for rows with lse -inf); "
                          "ds = p * (g v^T - rowsum(g * out)), dq = scale ds k, "
                          "dk = scale ds^T q, dv = p^T g",
})

def gather(package: str) -> dict:
    """``{primitive: function}`` of a backend package (``"minigpu.backends.cuda"``), from its
    family modules: each primitive of :data:`PRIMITIVES` is defined in exactly one of them (a
    new family file is found without an import line). Raises naming what is missing or
    defined twice."""
    found = {}
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        module = importlib.import_module(f"{package}.{info.name}")
        for name in PRIMITIVES:
            fn = vars(module).get(name)
            if callable(fn) and fn.__module__ == module.__name__:
                found.setdefault(name, []).append(fn)
    missing = [name for name in PRIMITIVES if name not in found]
    twice = {name: [fn.__module__ for fn in fns] for name, fns in found.items() if len(fns) > 1}
    if missing or twice:
        raise ImportError(f"backend {package}: primitives of contract.py not defined in any "
                          f"of its modules: {missing}; defined in several: {twice}")
    return {name: fns[0] for name, fns in found.items()}


def check_backend(module) -> list[str]:
    """Names of contract primitives missing from a backend module (empty when complete)."""
    return [name for name in PRIMITIVES if not callable(getattr(module, name, None))]


_BOOL_RESULT = frozenset(COMPARISONS)
_BOOL = np.dtype(np.bool_)


def result_dtype(op: str, dtype) -> np.dtype:
    """Output dtype of an elementwise op: comparisons give bool, everything else keeps dtype."""
    if op in _BOOL_RESULT:
        return _BOOL
    return dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)

