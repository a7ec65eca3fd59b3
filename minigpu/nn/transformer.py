"""Transformer layers with torch's arguments, submodule names (``self_attn``, ``multihead_attn``,
``linear1``/``linear2``, ``norm1``..``norm3``, ``layers.N``, ``encoder.norm``, ``decoder.norm``),
so ``state_dict`` keys match ``torch.nn.Transformer*`` and checkpoints load both ways.

Post-norm (``norm_first=False``, the 2017 paper) computes ``x = norm(x + block(x))``; pre-norm
``x = x + block(norm(x))``. Masks are MultiheadAttention's (True or -inf = not allowed).
torch's nested-tensor path of ``TransformerEncoder`` (eval, no gradient, batch_first, a
right-padded ``src_key_padding_mask`` and no ``mask``) returns zeros at the padded positions;
minigpu computes the same output through the key padding mask and zeroes those positions under
the same conditions (``_nested_path``). The ``is_causal`` hints never replace the mask passed.
"""
from __future__ import annotations

import copy

import numpy as np

from .. import ops
from ..autograd import is_grad_enabled
from ..ops.attention import causal_keep
from ..tensor import Tensor
from . import functional as F
from . import init
from .attention import MultiheadAttention
from .activation import GELU
from .layers import Dropout, Linear, ReLU
from .module import Module, ModuleList
from .normalization import LayerNorm

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _activation(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation


def _clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def generate_square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float mask: 0 on and below the diagonal, -inf above (torch's)."""
    keep = causal_keep(sz, sz, "cpu" if device is None else device)
    zero = Tensor._full((), 0, np.dtype(dtype or np.float32), keep.device)
    return ops.masked_fill(zero, keep == False, -np.inf)  # noqa: E712 (elementwise)


class _Layer(Module):
    """What the encoder and decoder layers share: the feed-forward block, its norms, dropouts
    and activation, in torch's registration order."""

    def _feed_forward(self, d_model, dim_feedforward, dropout, activation, eps, norm_first,
                      bias, norms, factory):
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=eps, bias=bias, **factory))
        for i in range(1, norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)

    def _ff_block(self, x, out_dropout):
        return out_dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    @staticmethod
    def _attend(attn, x, mem, mask, key_padding_mask, is_causal, out_dropout):
        return out_dropout(attn(x, mem, mem, attn_mask=mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)[0])


class TransformerEncoderLayer(_Layer):
    """Self-attention then a feed-forward block (d_model -> dim_feedforward -> d_model)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **factory)
        self._feed_forward(d_model, dim_feedforward, dropout, activation, layer_norm_eps,
                           norm_first, bias, 2, factory)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        def sa_block(h):
            return self._attend(self.self_attn, h, h, src_mask, src_key_padding_mask, is_causal,
                                self.dropout1)

        x = src
        if self.norm_first:
            x = x + sa_block(self.norm1(x))
            return x + self._ff_block(self.norm2(x), self.dropout2)
        x = self.norm1(x + sa_block(x))
        return self.norm2(x + self._ff_block(x, self.dropout2))


class TransformerDecoderLayer(_Layer):
    """Self-attention over the target, attention to the encoder's memory, feed-forward."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **factory)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **factory)
        self._feed_forward(d_model, dim_feedforward, dropout, activation, layer_norm_eps,
                           norm_first, bias, 3, factory)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        def sa_block(h):
            return self._attend(self.self_attn, h, h, tgt_mask, tgt_key_padding_mask,
                                tgt_is_causal, self.dropout1)

        def mha_block(h):
            return self._attend(self.multihead_attn, h, memory, memory_mask,
                                memory_key_padding_mask, memory_is_causal, self.dropout2)

        x = tgt
        if self.norm_first:
            x = x + sa_block(self.norm1(x))
            x = x + mha_block(self.norm2(x))
            return x + self._ff_block(self.norm3(x), self.dropout3)
        x = self.norm1(x + sa_block(x))
        x = self.norm2(x + mha_block(x))
        return self.norm3(x + self._ff_block(x, self.dropout3))


def _nested_layer(layer):
    """Whether torch's TransformerEncoder may run ``layer`` on nested tensors (its
    ``why_not_sparsity_fast_path`` checks of ``__init__``)."""
    act = layer.activation
    return (isinstance(layer, TransformerEncoderLayer) and not layer.norm_first
            and layer.self_attn.batch_first and layer.self_attn._qkv_same_embed_dim
            and layer.self_attn.in_proj_bias is not None
            and (act in (F.relu, F.gelu) or isinstance(act, (ReLU, GELU)))
            and layer.norm1.eps == layer.norm2.eps and layer.self_attn.num_heads % 2 == 0)


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` (``layers.N``), then ``norm`` if given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check
        self.use_nested_tensor = enable_nested_tensor and _nested_layer(encoder_layer)

    def _nested_path(self, src, mask, padding):
        """The (N, S) padded positions when torch would take its nested-tensor path (its
        outputs there are zeros), else None."""
        first = self.layers[0]
        if (not self.use_nested_tensor or first.training or src.ndim != 3 or padding is None
                or mask is not None or (is_grad_enabled() and (src.requires_grad or any(
                    p.requires_grad for p in first.parameters())))):
            return None
        padded = padding if padding.dtype == np.bool_ else padding != 0
        keep = ~padded.cpu().numpy()
        if self.mask_check and (keep[:, 1:] > keep[:, :-1]).any():  # not right-padded
            return None
        return padded

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        padded = self._nested_path(src, mask, src_key_padding_mask)
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=bool(is_causal))
        if padded is not None:
            out = ops.masked_fill(out, ops.unsqueeze(padded, -1), 0.0)
        return out if self.norm is None else self.norm(out)


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` (``layers.N``), then ``norm`` if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=bool(tgt_is_causal),
                        memory_is_causal=memory_is_causal)
        return out if self.norm is None else self.norm(out)


class Transformer(Module):
    """The encoder-decoder model of "Attention Is All You Need", torch's arguments; every
    parameter with more than one dim starts xavier_uniform_ (as torch's ``_reset_parameters``)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                      batch_first, norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(*layer_args, **factory), num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(*layer_args, **factory), num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        if src.ndim == 3 and src.shape[0 if self.batch_first else 1] != \
                tgt.shape[0 if self.batch_first else 1]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)
