"""``MultiheadAttention`` (``torch.nn.MultiheadAttention``): torch's arguments, parameter names,
initialisation and masks, over ``ops.attention`` (the composed scaled dot-product attention).

Masks are torch's MHA masks, the opposite sense of SDPA's boolean mask: in ``attn_mask`` and
``key_padding_mask`` True means *not allowed to attend*; float masks are added to the scores.
Both are turned into one additive float mask (``canonical_mask``) before the attention.

Where minigpu differs from torch: ``is_causal`` is only a hint (torch may then drop
``attn_mask`` and apply its own causal mask; minigpu always applies ``attn_mask``, which the
hint says is causal), and a query whose every key is masked gets zero weights in both paths
(torch gives NaN when ``need_weights=True`` and zeros when it is False).
"""
from __future__ import annotations

import math

import numpy as np

from .. import creation, ops
from ..ops.attention import attention
from ..tensor import Tensor
from . import functional as F
from . import init
from .layers import Linear
from .module import Module, Parameter

__all__ = ["MultiheadAttention", "canonical_mask"]


def canonical_mask(mask, name, dtype):
    """torch's ``F._canonical_mask``: a bool mask becomes 0 where False and -inf where True; a
    float mask of ``dtype`` passes unchanged."""
    if mask is None:
        return None
    if mask.dtype == np.bool_:
        return ops.masked_fill(Tensor._full((), 0, dtype, mask.device), mask, -math.inf)
    if mask.dtype.kind != "f":
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if mask.dtype != dtype:
        raise RuntimeError(f"Expected {name} dtype to be bool or to match query dtype, but got "
                           f"{name}.dtype: {mask.dtype} and query.dtype: {dtype} instead.")
    return mask


def _pad_column(mask):
    """One more key position (a bias_k or zero-attention key) that every query may attend."""
    if mask is None:
        return None
    zero = creation.zeros(*mask.shape[:-1], 1, dtype=mask.dtype, device=mask.device)
    return ops.cat([mask, zero], -1)


def _each(fn, query, key, value):
    """fn of each of query, key and value, keeping self-attention's ``query is key is value``
    (so the projection stays one matmul)."""
    if query is key and key is value:
        query = key = value = fn(query)
        return query, key, value
    return fn(query), fn(key), fn(value)


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` features each.

    Parameters as torch names them: ``in_proj_weight`` (3E, E) when key and value have
    ``embed_dim`` features, else ``q_proj_weight`` (E, E), ``k_proj_weight`` (E, kdim) and
    ``v_proj_weight`` (E, vdim); ``in_proj_bias`` (3E); ``bias_k``/``bias_v`` (1, 1, E) with
    ``add_bias_kv``; ``out_proj`` a Linear(E, E). Projections start xavier_uniform_, the
    projection biases at zero, bias_k/bias_v xavier_normal_.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim="
                             f"{embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.kdim = int(kdim) if kdim is not None else self.embed_dim
        self.vdim = int(vdim) if vdim is not None else self.embed_dim
        self._qkv_same_embed_dim = self.kdim == self.embed_dim and self.vdim == self.embed_dim
        self.dropout, self.batch_first = dropout, batch_first
        self.head_dim = self.embed_dim // self.num_heads
        if self.head_dim * self.num_heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")

        def param(*shape):
            return Parameter(creation.empty(*shape, device=device, dtype=dtype))

        E = self.embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = param(3 * E, E)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = param(E, E)
            self.k_proj_weight = param(E, self.kdim)
            self.v_proj_weight = param(E, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = param(3 * E)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(E, E, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k, self.bias_v = param(1, 1, E), param(1, 1, E)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _project(self, query, key, value):
        """q, k, v = the three input projections (one matmul when query is key is value)."""
        E, b = self.embed_dim, self.in_proj_bias
        bq, bk, bv = (None,) * 3 if b is None else ops.chunk(b, 3)
        if self._qkv_same_embed_dim:
            if query is key and key is value:
                return ops.chunk(F.linear(query, self.in_proj_weight, b), 3, -1)
            wq, wk, wv = ops.chunk(self.in_proj_weight, 3)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def _check(self, query, key, value, key_padding_mask):
        """torch's ``_mha_shape_check``: True for batched (3-D) input, False for unbatched."""
        if query.ndim not in (2, 3):
            raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but "
                                 f"received {query.ndim}-D query tensor")
        batched = query.ndim == 3
        kind = "batched (3-D)" if batched else "unbatched (2-D)"
        for name, t in (("key", key), ("value", value)):
            if t.ndim != query.ndim:
                raise AssertionError(f"For {kind} `query`, expected `{name}` to be "
                                     f"{query.ndim}-D but found {t.ndim}-D tensor instead")
        if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
            raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be "
                                 f"`None` or {query.ndim - 1}-D but found "
                                 f"{key_padding_mask.ndim}-D tensor instead")
        if query.shape[-1] != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but "
                                 f"got {query.shape[-1]}")
        return batched

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """(attn_output, attn_weights): output (L, N, E) ((N, L, E) with batch_first; (L, E)
        unbatched) and, with ``need_weights``, the weights (N, L, S) averaged over heads or
        (N, num_heads, L, S), else None."""
        batched = self._check(query, key, value, key_padding_mask)
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                               "Transformer module method `generate_square_subsequent_mask` to "
                               "create this mask.")
        if not batched:
            query, key, value = _each(lambda t: ops.unsqueeze(t, 1), query, key, value)
            if key_padding_mask is not None:
                key_padding_mask = ops.unsqueeze(key_padding_mask, 0)
        elif self.batch_first:
            query, key, value = _each(lambda t: ops.transpose(t, 0, 1), query, key, value)
        L, N, E = query.shape
        H, D = self.num_heads, self.head_dim
        if key.shape[0] != value.shape[0] or key.shape[1] != N:
            raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape "
                                 f"{tuple(value.shape)} and query batch size {N}")
        kpm = canonical_mask(key_padding_mask, "key_padding_mask", query.dtype)
        mask = canonical_mask(attn_mask, "attn_mask", query.dtype)
        S = key.shape[0]
        if mask is not None:
            want = (L, S) if mask.ndim == 2 else (N * H, L, S)
            if mask.ndim not in (2, 3):
                raise RuntimeError(f"attn_mask's dimension {mask.ndim} is not supported")
            if tuple(mask.shape) != want:
                raise RuntimeError(f"The shape of the {mask.ndim}D attn_mask is "
                                   f"{list(mask.shape)}, but should be {want}.")
        if kpm is not None and tuple(kpm.shape) != (N, S):
            raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got "
                                 f"{tuple(kpm.shape)}")

        q, k, v = self._project(query, key, value)
        if self.bias_k is not None:
            k = ops.cat([k, ops.expand(self.bias_k, 1, N, E)], 0)
            v = ops.cat([v, ops.expand(self.bias_v, 1, N, E)], 0)
            mask, kpm = _pad_column(mask), _pad_column(kpm)
        # (seq, N, E) -> (N, H, seq, D)
        q, k, v = (ops.permute(ops.reshape(t, t.shape[0], N, H, D), 1, 2, 0, 3)
                   for t in (q, k, v))
        if self.add_zero_attn:
            zeros = creation.zeros(N, H, 1, D, dtype=k.dtype, device=k.device)
            k, v = ops.cat([k, zeros], 2), ops.cat([v, zeros], 2)
            mask, kpm = _pad_column(mask), _pad_column(kpm)
        S = k.shape[2]
        if mask is not None and mask.ndim == 3:
            mask = ops.reshape(mask, N, H, L, S)
        if kpm is not None:
            kpm = ops.reshape(kpm, N, 1, 1, S)
            mask = kpm if mask is None else mask + kpm
        out, weights = attention(q, k, v, mask, self.dropout if self.training else 0.0,
                                 need_weights=need_weights)  # without weights: maybe fused
        out = ops.reshape(ops.permute(out, 2, 0, 1, 3), L, N, E)  # (N, H, L, D) -> (L, N, E)
        out = self.out_proj(out)
        if not batched:
            out = ops.squeeze(out, 1)
        elif self.batch_first:
            out = ops.transpose(out, 0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = ops.mean(weights, 1)
        return out, (weights if batched else ops.squeeze(weights, 0))
