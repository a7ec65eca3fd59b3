"""Matrix multiplication: 1-D, 2-D and batched operands with broadcast batch dimensions.

Operands reach the kernel as 3-D strided views (batch, rows, cols): transposes (``W.T``) and
broadcast batches (stride 0) cost no copy. Only batch dims that cannot be merged into one
stride are made contiguous first.
"""
from __future__ import annotations

import functools

from ..autograd import Function, is_grad_enabled
from ..backends.contract import View, contiguous_strides, numel
from ..dtypes import autocast_cast
from ..tensor import Tensor
from .common import check_same_device
from .registry import op
from .shape import broadcast_shapes, expand_view, sum_to, unsqueeze, squeeze


def _as_batched(v: View):
    """Merge the batch dims of a (*batch, R, C) view into one, copying only if impossible."""
    layout = _batched_layout(tuple(v.shape), tuple(v.strides))
    return None if layout is None else View(v.buf, *layout, v.offset)


@functools.lru_cache(maxsize=1024)
def _batched_layout(shape, strides):
    """(shape, strides) of ``_as_batched``'s 3-D view, or None; cached per layout."""
    batch, stride = numel(shape[:-2]), 0
    dims = [(s, st) for s, st in zip(shape[:-2], strides[:-2]) if s != 1]
    for (s0, st0), (s1, st1) in zip(dims, dims[1:]):
        if st0 != st1 * s1:
            break
    else:
        stride = dims[-1][1] if dims else 0
        return (batch,) + shape[-2:], (stride,) + strides[-2:]
    return None


def _matrix(t: Tensor) -> View:
    """A 2-D tensor as one batch of stride 0: the (1, rows, cols) view the matmul primitive takes."""
    return View(t._buf, (1,) + t.shape, (0,) + t._strides, t._offset)


def _matrix_t(t: Tensor) -> View:
    """A 2-D tensor transposed, as a (1, cols, rows) view: no copy."""
    rows, cols = t.shape
    return View(t._buf, (1, cols, rows), (0, t._strides[1], t._strides[0]), t._offset)


def _batched_operand(t: Tensor, shape):
    if len(shape) == 2 and t.shape == shape:  # a plain matrix: one batch of stride 0
        return _matrix(t)
    v = expand_view(t, shape)
    merged = _as_batched(v)
    if merged is None:
        dense = t.backend.contiguous(v)
        merged = _as_batched(View(dense, v.shape, contiguous_strides(v.shape), 0))
    return merged


class MatMul(Function):
    """(*batch, M, K) @ (*batch, K, N) with broadcast batch dims."""
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, a, b):
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        va = _batched_operand(a, batch + (m, k))
        vb = _batched_operand(b, batch + (k, n))
        # As PyTorch: each operand is saved only for the other's gradient, so changing a weight
        # in place (opt.step()) between two backwards is no error when the input needs none.
        needs_a, needs_b = self.needs_input_grad
        self.save_for_backward(a if needs_b else None, b if needs_a else None)
        self.shapes = a.shape, b.shape
        return Tensor._result(a.backend.matmul(va, vb), batch + (m, n), a.device)

    def backward(self, g):
        a, b = self.saved_tensors
        a_shape, b_shape = self.shapes
        ga = sum_to(g @ b.mT, a_shape) if self.needs_input_grad[0] else None
        gb = None
        if self.needs_input_grad[1]:
            if len(b_shape) == 2 and len(a_shape) > 2:
                # b is shared by every batch (a Linear on a sequence): one product over all the
                # rows, not one (K, N) product per batch summed afterwards
                gb = a.reshape(-1, a_shape[-1]).mT @ g.reshape(-1, g.shape[-1])
            else:
                gb = sum_to(a.mT @ g, b_shape)
        return ga, gb


class Addmm(Function):
    """``F.linear`` of a matrix with a bias, ``x @ W^T + b``, as one graph node (PyTorch's
    addmm): one matmul on W's transposed view, then the bias added as a stride-0 row. No
    Tensor for the product, no nodes for the transpose and the add, and a backward that calls
    the primitives directly: ``dx = g @ W``, ``dW = g^T @ x``, ``db = sum of g's rows`` (the
    same as recorded Tensor ops under create_graph)."""
    differentiable_backward = True

    def forward(self, x, weight, bias):
        rows, cols = x.shape[0], weight.shape[0]
        backend = x.backend
        product = backend.matmul(_matrix(x), _matrix_t(weight))
        out = backend.binary("add", View(product, (rows, cols), (cols, 1), 0),
                             View(bias._buf, (rows, cols), (0, bias._strides[0]), bias._offset))
        needs_x, needs_w = self.needs_input_grad[:2]
        self.save_for_backward(x if needs_w else None, weight if needs_x else None)
        self.shapes = x.shape, weight.shape
        return Tensor._result(out, (rows, cols), x.device)

    def backward(self, g):
        x, weight = self.saved_tensors
        backend, needs = g.backend, self.needs_input_grad
        if is_grad_enabled():  # create_graph: differentiable ops
            return (g @ weight if needs[0] else None, g.mT @ x if needs[1] else None,
                    g.sum(0) if needs[2] else None)
        x_shape, weight_shape = self.shapes
        gx = (Tensor._result(backend.matmul(_matrix(g), _matrix(weight)), x_shape, g.device)
              if needs[0] else None)
        gw = (Tensor._result(backend.matmul(_matrix_t(g), _matrix(x)), weight_shape, g.device)
              if needs[1] else None)
        gb = (Tensor._result(backend.reduce("sum", g._view(), (0,)), (g.shape[1],), g.device)
              if needs[2] else None)
        return gx, gw, gb


@op(method=False, tol=(1e-5, 1e-5),
    torch="F.linear", example=lambda r: (r.standard_normal((2, 3)), r.standard_normal((4, 3)),
                       r.standard_normal(4)))
def linear(x, weight, bias=None):
    """``x @ weight^T + bias``: a matrix with a bias in one node (``Addmm``), a contiguous
    batch of them (a sequence through a decoder) as that matrix of all its rows; any other case
    (no bias, mismatched operands: the errors come from there) as a matmul on the transposed
    view plus a broadcast add."""
    x, weight, bias = autocast_cast("linear", x, weight, bias)
    if (isinstance(x, Tensor) and isinstance(weight, Tensor) and isinstance(bias, Tensor)
            and len(x.shape) >= 2 and len(weight.shape) == 2 and len(bias.shape) == 1
            and x.shape[-1] == weight.shape[1] and bias.shape[0] == weight.shape[0]
            and x.dtype == weight.dtype == bias.dtype and x.dtype.kind == "f"
            and x.device == weight.device == bias.device):
        if len(x.shape) == 2:
            return Addmm.apply(x, weight, bias)
        if x.is_contiguous():
            rows = Addmm.apply(x.reshape(-1, x.shape[-1]), weight, bias)
            return rows.reshape(*x.shape[:-1], weight.shape[0])
    out = matmul(x, weight.mT if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


def _shape_str(t):
    return "x".join(str(s) for s in t.shape)


@op(mg=True, method=("matmul", "__matmul__"), tol=(1e-5, 1e-5),
    example=lambda r: (r.standard_normal((2, 3, 4)), r.standard_normal((4, 5))))
def matmul(a, b):
    a, b = autocast_cast("matmul", a, b)
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul(): both arguments must be Tensors")
    check_same_device(a, b)
    ndim_a, ndim_b = len(a.shape), len(b.shape)
    if ndim_a == 0 or ndim_b == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{ndim_a}D and {ndim_b}D")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != "
                           f"{b.dtype}")
    if a.dtype.kind == "b":
        raise RuntimeError('"addmm_impl_cpu_" not implemented for \'Bool\'')
    if a.shape[-1] != b.shape[-2 if ndim_b > 1 else 0]:
        left = _shape_str(a) if ndim_a > 1 else f"1x{a.shape[0]}"
        right = _shape_str(b) if ndim_b > 1 else f"{b.shape[0]}x1"
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({left} and {right})")
    a2 = unsqueeze(a, 0) if ndim_a == 1 else a
    b2 = unsqueeze(b, 1) if ndim_b == 1 else b
    out = MatMul.apply(a2, b2)
    if ndim_a == 1:
        out = squeeze(out, -2)
    if ndim_b == 1:
        out = squeeze(out, -1)
    return out


@op(mg=True, tol=(1e-5, 1e-5),
    example=lambda r: (r.standard_normal((2, 3)), r.standard_normal((3, 4))))
def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm(): expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D")
    return matmul(a, b)


@op(mg=True, tol=(1e-5, 1e-5),
    example=lambda r: (r.standard_normal((2, 2, 3)), r.standard_normal((2, 3, 4))))
def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm(): expected 3-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"bmm(): batch sizes differ: {a.shape[0]} and {b.shape[0]}")
    return matmul(a, b)


@op(mg=True, tol=(1e-5, 1e-5), example=lambda r: (r.standard_normal(4), r.standard_normal(4)))
def dot(a, b):
    """The inner product of two 1-D tensors of the same size and dtype."""
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype != b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{a.dtype} and {b.dtype}")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                           f"[{b.shape[0]}] to have the same number of elements, but got "
                           f"{a.shape[0]} and {b.shape[0]} elements respectively")
    check_same_device(a, b)
    return (a * b).sum()
