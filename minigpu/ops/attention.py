"""Scaled dot-product attention (``torch.nn.functional.scaled_dot_product_attention``), composed.

``softmax(q @ k^T * scale + mask) @ v`` built from the differentiable matmul, where, softmax
and dropout ops, so autograd and both devices come for free. The (..., L, S) score matrix is
materialised in memory: this is the naive path, the baseline a fused (flash) kernel beats.

On cuda, ``scaled_dot_product_attention`` takes the fused path instead (``FlashAttention``:
the ``attention`` / ``attention_backward`` primitives, flash attention in
``backends/cuda/attention.py``) whenever it applies: float32 or float64, no dropout, head
dims up to 128, and a mask that needs no gradient. Batch dims are broadcast and flattened
into one; a mask is passed as a strided view (an (L, S) mask shared by every batch and head
is never copied).

Masks follow torch's SDPA: a boolean ``attn_mask`` keeps the positions where it is True, a float
one is added to the scores; both broadcast against (..., L, S). ``is_causal`` keeps ``j <= i``
(the top-left triangle, also when L != S). A row whose every key is masked gives zeros, as
torch's math backend does (``_safe_softmax``), rather than NaN.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd import Function
from ..backends.contract import View
from ..tensor import Tensor
from .common import check_same_device, filled
from .elementwise import where
from .linalg import matmul
from .normalization import dropout
from .reduce import max as max_
from .registry import op
from .shape import broadcast_shapes, contiguous, expand, expand_view, reshape, unsqueeze
from .softmax import softmax


def causal_keep(L, S, device):
    """The (L, S) boolean mask of ``is_causal``: True where key j <= query i (top-left)."""
    return Tensor._from_array(np.tril(np.ones((L, S), dtype=np.bool_)), device)


def _repeat_heads(t, groups):
    """``t.repeat_interleave(groups, dim=-3)``: each key/value head serves ``groups`` query
    heads (grouped-query attention)."""
    *lead, h, s, e = t.shape
    return reshape(expand(unsqueeze(t, -3), *lead, h, groups, s, e), *lead, h * groups, s, e)


def _safe_softmax(scores):
    """softmax over the last dim, with rows that are -inf everywhere giving 0 (not NaN) and
    passing no gradient."""
    values, _ = max_(scores.detach(), -1, True)
    dead = values == -math.inf
    zero = Tensor._full((), 0, scores.dtype, scores.device)
    return where(dead, zero, softmax(where(dead, zero, scores), -1))


class FlashAttention(Function):
    """Attention of dense (B, L, E), (B, S, E), (B, S, Ev) tensors through the fused
    primitives; saves the output and the row log-sum-exp (B * L numbers), never the scores."""

    def forward(self, q, k, v, mask, causal, scale):
        out, lse = q.backend.attention(q._view(), k._view(), v._view(), mask, causal, scale)
        B, L = q.shape[:2]
        out = Tensor._dense(out, (B, L, v.shape[2]), q.device)
        self.mask, self.causal, self.scale = mask, causal, scale
        self.save_for_backward(q, k, v, out, Tensor._dense(lse, (B, L), q.device))
        return out

    def backward(self, g):
        q, k, v, out, lse = self.saved_tensors
        dq, dk, dv = g.backend.attention_backward(
            q._view(), k._view(), v._view(), out._view(), lse._view(), g._view(), self.mask,
            self.causal, self.scale)
        return (Tensor._dense(dq, q.shape, q.device), Tensor._dense(dk, k.shape, k.device),
                Tensor._dense(dv, v.shape, v.device), None, None, None)

    def unfused(self, q, k, v, mask, causal, scale):
        """The unfused form on (B, L, E), (B, S, E), (B, S, Ev): softmax(q k^T * scale + mask)
        @ v, with the causal mask's -inf above the diagonal; a row masked everywhere gives 0."""
        scores = q @ k.transpose(1, 2) * scale
        if mask is not None:  # the additive mask, a backend view
            scores = scores + Tensor(mask.buf, mask.shape, mask.strides, mask.offset, q.device)
        if causal:
            above = np.triu(np.full(tuple(scores.shape[-2:]), -np.inf, q.dtype), 1)
            scores = scores + Tensor._from_array(above, q.device)
        dead = scores.max(-1, keepdim=True).values.detach() == float("-inf")
        zero = filled(scores, (), 0.0)
        return where(dead, zero, where(dead, zero, scores).softmax(-1)) @ v


FUSED_MAX_HEAD_DIM = 128


def _fused_applies(query, key, value, attn_mask, dropout_p):
    return (query.device.type == "cuda" and query.dtype in (np.float32, np.float64)
            and dropout_p == 0.0 and max(query.shape[-1], value.shape[-1]) <= FUSED_MAX_HEAD_DIM
            and (attn_mask is None or not attn_mask.requires_grad))


def _mask_view(mask, batch, L, S):
    """The additive mask broadcast to (*batch, L, S) as a (B, L, S) view: the batch dims
    merged into one stride when the layout allows (an (L, S) mask shared by every batch, or a
    mask with all the batch dims), else one dense copy."""
    view = expand_view(mask, (*batch, L, S))
    previous = None                      # the stride of the last batch dim of size > 1
    for size, stride in zip(batch, view.strides[:len(batch)]):
        if size == 1:
            continue
        if previous is not None and previous != stride * size:
            view = contiguous(expand(mask, *batch, L, S))._view()
            return View(view.buf, (math.prod(batch), L, S), (L * S, S, 1), view.offset)
        previous = stride
    B = math.prod(batch)
    return View(view.buf, (B, L, S), (previous or 0, *view.strides[-2:]), view.offset)


def _fused(query, key, value, attn_mask, is_causal, scale):
    """scaled_dot_product_attention through ``FlashAttention`` (see ``_fused_applies``)."""
    L, S, Ev = query.shape[-2], key.shape[-2], value.shape[-1]
    batch = broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    B = math.prod(batch)
    q, k, v = (reshape(contiguous(expand(t, *batch, *t.shape[-2:])), B, *t.shape[-2:])
               for t in (query, key, value))
    mask = None
    if attn_mask is not None:
        if attn_mask.dtype == np.bool_:
            attn_mask = where(attn_mask, Tensor._full((), 0, query.dtype, query.device),
                              Tensor._full((), -math.inf, query.dtype, query.device))
        mask = _mask_view(attn_mask, batch, L, S)
    out = FlashAttention.apply(q, k, v, mask, bool(is_causal), scale)
    return reshape(out, *batch, L, Ev)


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False, need_weights=True):
    """``(output, weights)``: what scaled_dot_product_attention computes, and the (..., L, S)
    attention weights after dropout (``nn.MultiheadAttention`` returns them). Without
    ``need_weights`` the fused path may run; weights are then None."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{name}' must be Tensor, "
                            f"not {type(t).__name__}")
        if t.ndim < 2:
            raise RuntimeError(f"scaled_dot_product_attention: expected {name} to have at least "
                               f"2 dimensions, got a {t.ndim}-D tensor of shape {tuple(t.shape)}")
    check_same_device(query, key, value, attn_mask)
    if not query.dtype == key.dtype == value.dtype:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {query.dtype} key.dtype: {key.dtype} and value.dtype: "
                           f"{value.dtype} instead.")
    if query.dtype.kind != "f":
        raise RuntimeError(f"scaled_dot_product_attention: expected floating point query, key "
                           f"and value, got {query.dtype}")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key and value must have the same "
                           f"sequence length, got key {tuple(key.shape)} and value "
                           f"{tuple(value.shape)}")
    if attn_mask is not None and attn_mask.dtype != np.bool_ and attn_mask.dtype != query.dtype:
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {attn_mask.dtype} and  query.dtype: "
                           f"{query.dtype} instead.")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and query.shape[-3] != key.shape[-3]:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hq % hk or hq % hv:
            raise RuntimeError(f"scaled_dot_product_attention: number of heads in query "
                               f"({hq}) must be divisible by the number of heads in key ({hk}) "
                               f"and value ({hv}) when enable_gqa=True")
        key, value = _repeat_heads(key, hq // hk), _repeat_heads(value, hq // hv)
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    if not need_weights and _fused_applies(query, key, value, attn_mask, dropout_p):
        return _fused(query, key, value, attn_mask, is_causal, scale), None
    scores = matmul(query, key.mT) * scale
    if is_causal:
        attn_mask = causal_keep(L, S, query.device)
    if attn_mask is None:
        weights = softmax(scores, -1)
    else:
        if attn_mask.dtype == np.bool_:
            scores = where(attn_mask, scores, Tensor._full((), -math.inf, scores.dtype,
                                                           scores.device))
        else:
            scores = scores + attn_mask
        weights = _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return matmul(weights, value), weights


@op(method=False, F=True, tol=(1e-5, 1e-5), domain="bounded",
    example=lambda r: (r.standard_normal((1, 2, 3, 4)), r.standard_normal((1, 2, 5, 4)),
                       r.standard_normal((1, 2, 5, 4))))
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value, torch's signature and semantics.

    query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev); batch dims
    broadcast. ``scale`` defaults to 1/sqrt(E). ``dropout_p`` applies whenever it is > 0 (as
    in torch, pass ``dropout_p if self.training else 0.0``). ``enable_gqa`` lets key and value
    have fewer heads (dim -3) than query, each serving a group of query heads.
    """
    return attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                     need_weights=False)[0]
