"""Attention: ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention`` and the Transformer
layers.

Without torch: SDPA against a float64 NumPy transcription of torch's math backend on
hypothesis-drawn shapes and masks (cpu and cuda), float64 gradcheck, MultiheadAttention against
a NumPy reference built from its own weights, cuda vs cpu for the layers, and state_dict keys
written out as torch names them. With torch installed (``pytest.importorskip``): outputs and
gradients against torch on copied weights, float32 and float64.

Tolerances: float64 atol 1e-10 (sums in another order); float32 atol 2e-5 (softmax and
LayerNorm of O(1) values; we saw <= 3e-6 against torch).
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigpu as mg
import minigpu.nn.functional as F
from minigpu import nn
from minigpu.autograd import gradcheck


def tol(dtype):
    return dict(atol=2e-5, rtol=1e-5) if dtype == np.float32 else dict(atol=1e-10, rtol=1e-10)


def host(t):
    return t.detach().cpu().numpy()


# --- the NumPy reference of torch's SDPA math backend ---------------------------------------------

def ref_sdpa(q, k, v, mask=None, is_causal=False, scale=None, enable_gqa=False):
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    if enable_gqa:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    L, S = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if is_causal:
        mask = np.tril(np.ones((L, S), bool))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    top = scores.max(-1, keepdims=True)
    dead = top == -np.inf
    e = np.exp(scores - np.where(dead, 0, top))
    w = np.where(dead, 0, e / np.where(dead, 1, e.sum(-1, keepdims=True)))
    return w @ v, w


@st.composite
def sdpa_problems(draw):
    """Batch and heads, ragged L != S, head dims, one of the mask kinds broadcast over a drawn
    subset of (batch, heads), and grouped-query heads."""
    side = st.integers(1, 6)
    B, L, S, E, Ev = draw(side), draw(side), draw(side), draw(st.integers(1, 8)), draw(side)
    Hk = draw(st.integers(1, 2))
    groups = draw(st.integers(1, 2))
    H = Hk * groups
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    q = rng.standard_normal((B, H, L, E))
    k = rng.standard_normal((B, Hk, S, E))
    v = rng.standard_normal((B, Hk, S, Ev))
    kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    mask_shape = (draw(st.sampled_from([B, 1])), draw(st.sampled_from([H, 1])), L, S)
    mask_shape = mask_shape[draw(st.integers(0, 2)):]  # (B|1, H|1, L, S), (H|1, L, S), (L, S)
    mask = None
    if kind == "bool":
        mask = rng.random(mask_shape) > 0.4  # some rows fully masked: they must give zeros
    elif kind == "float":
        mask = rng.standard_normal(mask_shape)
        mask[rng.random(mask_shape) > 0.7] = -np.inf
    scale = draw(st.sampled_from([None, 0.5]))
    return dict(q=q, k=k, v=v, mask=mask, is_causal=kind == "causal", scale=scale,
                enable_gqa=groups > 1)


def run_sdpa(p, device, dtype):
    """Forward and backward of SDPA on ``device``: (out, dq, dk, dv, upstream)."""
    q, k, v = (mg.tensor(p[n].astype(dtype), device=device, requires_grad=True) for n in "qkv")
    mask = p["mask"]
    if mask is not None:
        mask = mg.tensor(mask if mask.dtype == bool else mask.astype(dtype), device=device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=p["is_causal"],
                                         scale=p["scale"], enable_gqa=p["enable_gqa"])
    g = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(dtype)
    out.backward(mg.tensor(g, device=device))
    return host(out), host(q.grad), host(k.grad), host(v.grad)


@given(sdpa_problems(), st.sampled_from([np.float32, np.float64]))
def test_sdpa_cuda_and_cpu_match_numpy_reference(p, dtype):
    want, _ = ref_sdpa(p["q"], p["k"], p["v"], p["mask"], p["is_causal"], p["scale"],
                       p["enable_gqa"])
    cpu = run_sdpa(p, "cpu", dtype)
    cuda = run_sdpa(p, "cuda", dtype)
    np.testing.assert_allclose(cpu[0], want, **tol(dtype))
    np.testing.assert_allclose(cuda[0], want, **tol(dtype))
    assert all(np.isfinite(g).all() for g in cpu[1:])  # dead rows pass no NaN back
    for c, d in zip(cpu[1:], cuda[1:]):
        np.testing.assert_allclose(d, c, **tol(dtype))


@pytest.mark.parametrize("L,S", [(5, 3), (3, 5), (4, 4)])
def test_sdpa_causal_is_the_top_left_triangle(L, S):
    """Every drawn example may miss a mask kind; these fixed ones do not (cpu, float64)."""
    rng = np.random.default_rng(L * 10 + S)
    q, k, v = (rng.standard_normal((2, 3, n, 4)) for n in (L, S, S))
    got = F.scaled_dot_product_attention(*(mg.tensor(a) for a in (q, k, v)), is_causal=True)
    want, w = ref_sdpa(q, k, v, is_causal=True)
    np.testing.assert_allclose(host(got), want, atol=1e-12)
    assert (w[..., 0, 1:] == 0).all() and (w[..., 0, 0] == 1).all()  # the reference: query 0 sees key 0 only


@pytest.mark.parametrize("case", ["plain", "bool_dead_row", "float", "causal_ragged", "gqa",
                                  "scale"])
def test_sdpa_gradcheck(case):
    rng = np.random.default_rng(0)
    L, S = (5, 3) if case == "causal_ragged" else (3, 4)
    q = rng.standard_normal((2, 2, L, 4))
    k = rng.standard_normal((2, 1 if case == "gqa" else 2, S, 4))
    v = rng.standard_normal((2, 1 if case == "gqa" else 2, S, 3))
    kw = {}
    if case == "bool_dead_row":
        m = rng.random((2, 1, L, S)) > 0.4
        m[0, 0, 1] = False
        kw["attn_mask"] = mg.tensor(m)
    elif case == "float":
        kw["attn_mask"] = mg.tensor(rng.standard_normal((L, S)))
    elif case == "causal_ragged":
        kw["is_causal"] = True
    elif case == "gqa":
        kw["enable_gqa"] = True
    elif case == "scale":
        kw["scale"] = 0.3
    args = [mg.tensor(a, requires_grad=True) for a in (q, k, v)]
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, **kw), args)


def test_sdpa_errors_are_torchs():
    x = mg.zeros(1, 2, 2)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when "
                                           "is_causal=True"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=mg.ones(2, 2, dtype=mg.bool),
                                       is_causal=True)
    with pytest.raises(RuntimeError, match="Expected query, key, and value to have the same "
                                           "dtype.*float32.*float64"):
        F.scaled_dot_product_attention(x, x.double(), x)
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype to be bool or float or to "
                                           "match query dtype"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=mg.zeros(2, 2, dtype=mg.float64))
    with pytest.raises(RuntimeError, match=r"number of heads in query \(3\) must be divisible"):
        q, kv = mg.zeros(1, 3, 2, 2), mg.zeros(1, 2, 2, 2)
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)


def test_sdpa_dropout_zeroes_and_rescales_weights():
    q = mg.zeros(1, 4, 2)  # equal scores: every weight is 1/S before dropout
    v = mg.ones(1, 8, 1)
    out = host(F.scaled_dot_product_attention(q, mg.zeros(1, 8, 2), v, dropout_p=0.5))
    kept = out * 8 * 0.5  # each output is (kept keys) / S / (1 - p)
    np.testing.assert_allclose(kept, np.round(kept), atol=1e-5)
    assert 0 <= kept.min() and kept.max() <= 8


# --- MultiheadAttention -------------------------------------------------------------------------

def ref_mha(m, q, k, v, kpm=None, mask=None):
    """NumPy MultiheadAttention over m's own weights, sequence-first (L, N, E) input; masks in
    MHA's sense (True = not allowed)."""
    W = {n: host(p).astype(np.float64) for n, p in m.state_dict().items()}
    E, H = m.embed_dim, m.num_heads
    D = E // H
    if "in_proj_weight" in W:
        wq, wk, wv = np.split(W["in_proj_weight"], 3)
    else:
        wq, wk, wv = W["q_proj_weight"], W["k_proj_weight"], W["v_proj_weight"]
    bq, bk, bv = np.split(W["in_proj_bias"], 3) if "in_proj_bias" in W else (0, 0, 0)
    L, N, S = q.shape[0], q.shape[1], k.shape[0]
    Q, K, V = q @ wq.T + bq, k @ wk.T + bk, v @ wv.T + bv
    add = np.zeros((N, 1, L, S))
    if mask is not None:
        add = add + np.where(mask, -np.inf, 0.0)
    if kpm is not None:
        add = add + np.where(kpm, -np.inf, 0.0)[:, None, None, :]
    if "bias_k" in W:
        K = np.concatenate([K, np.broadcast_to(W["bias_k"], (1, N, E))])
        V = np.concatenate([V, np.broadcast_to(W["bias_v"], (1, N, E))])
        add = np.concatenate([add, np.zeros((N, 1, L, 1))], -1)
    heads = [t.reshape(t.shape[0], N, H, D).transpose(1, 2, 0, 3) for t in (Q, K, V)]
    if m.add_zero_attn:
        heads[1:] = [np.concatenate([t, np.zeros((N, H, 1, D))], 2) for t in heads[1:]]
        add = np.concatenate([add, np.zeros((N, 1, L, 1))], -1)
    out, w = ref_sdpa(*heads, mask=add)
    out = out.transpose(2, 0, 1, 3).reshape(L, N, E) @ W["out_proj.weight"].T
    return out + W.get("out_proj.bias", 0), w.mean(1)


MHA_CASES = {
    "plain": dict(),
    "nobias_kvdim": dict(bias=False, kdim=6, vdim=3),
    "bias_kv_zero_attn": dict(add_bias_kv=True, add_zero_attn=True),
}


@pytest.mark.parametrize("case", list(MHA_CASES))
def test_mha_matches_numpy_reference(case):
    kw = MHA_CASES[case]
    m = nn.MultiheadAttention(8, 2, **kw).double()
    rng = np.random.default_rng(0)
    q = rng.standard_normal((4, 2, 8))
    k = rng.standard_normal((5, 2, kw.get("kdim", 8)))
    v = rng.standard_normal((5, 2, kw.get("vdim", 8)))
    kpm = np.array([[False, False, True, False, True], [False] * 5])
    mask = rng.random((4, 5)) > 0.7
    mask[:, 0] = False
    out, w = m(*(mg.tensor(a) for a in (q, k, v)), key_padding_mask=mg.tensor(kpm),
               attn_mask=mg.tensor(mask))
    want_out, want_w = ref_mha(m, q, k, v, kpm, mask)
    np.testing.assert_allclose(host(out), want_out, atol=1e-12)
    np.testing.assert_allclose(host(w), want_w, atol=1e-12)


def test_mha_batch_first_unbatched_and_weights_per_head():
    m = nn.MultiheadAttention(8, 2, batch_first=True).double()
    x = mg.tensor(np.random.default_rng(0).standard_normal((2, 3, 8)))
    out, w = m(x, x, x, average_attn_weights=False)
    assert tuple(out.shape) == (2, 3, 8) and tuple(w.shape) == (2, 2, 3, 3)
    m.batch_first = False
    ref, _ = m(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    np.testing.assert_allclose(host(out), host(ref.transpose(0, 1)), atol=1e-12)
    one, w1 = m(x[0], x[0], x[0])  # unbatched (L, E)
    assert tuple(one.shape) == (3, 8) and tuple(w1.shape) == (3, 3)
    np.testing.assert_allclose(host(one), host(out[0]), atol=1e-12)
    _, none = m(x[0], x[0], x[0], need_weights=False)
    assert none is None


def test_mha_parameter_names_and_init():
    assert list(nn.MultiheadAttention(8, 2).state_dict()) == [
        "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    assert list(nn.MultiheadAttention(8, 2, add_bias_kv=True, kdim=4, vdim=6).state_dict()) == [
        "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "bias_k", "bias_v",
        "out_proj.weight", "out_proj.bias"]
    assert list(nn.MultiheadAttention(8, 2, bias=False).state_dict()) == [
        "in_proj_weight", "out_proj.weight"]
    m = nn.MultiheadAttention(16, 4, add_bias_kv=True)
    assert tuple(m.in_proj_weight.shape) == (48, 16) and tuple(m.bias_k.shape) == (1, 1, 16)
    bound = math.sqrt(6 / (16 + 48))  # xavier_uniform_ over the packed (3E, E) matrix
    w = host(m.in_proj_weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert not host(m.in_proj_bias).any() and not host(m.out_proj.bias).any()


def test_mha_errors():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="embed_dim and num_heads must be greater than 0"):
        nn.MultiheadAttention(0, 1)
    m = nn.MultiheadAttention(4, 2)
    x = mg.zeros(3, 2, 4)
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask is \[3, 2\], but "
                                           r"should be \(3, 3\)"):
        m(x, x, x, attn_mask=mg.zeros(3, 2))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="query should be unbatched 2D or batched 3D"):
        m(mg.zeros(4), mg.zeros(4), mg.zeros(4))


def _copy(src, build, device, dtype):
    dst = build()
    dst.load_state_dict({k: host(v) for k, v in src.state_dict().items()})
    return dst.to(device).to(dtype)


def _forward_backward(m, inputs, device, dtype, masks=None):
    xs = [mg.tensor(a.astype(dtype), device=device, requires_grad=True) for a in inputs]
    masks = {n: a if isinstance(a, bool) else
             mg.tensor(a if a.dtype == bool else a.astype(dtype), device=device)
             for n, a in (masks or {}).items()}
    out = m(*xs, **masks)
    out = out[0] if isinstance(out, tuple) else out
    g = np.random.default_rng(2).standard_normal(tuple(out.shape)).astype(dtype)
    (out * mg.tensor(g, device=device)).sum().backward()
    return ([host(out)] + [host(x.grad) for x in xs]
            + [host(p.grad) for _, p in m.named_parameters()])


LAYERS = {
    "mha_kpm": (lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True), [(4, 2, 8), (5, 2, 8),
                                                                         (5, 2, 8)],
                {"key_padding_mask": np.array([[False, True, False, True, False], [False] * 5])}),
    "decoder_pre_gelu": (lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0,
                                                            activation="gelu", norm_first=True,
                                                            batch_first=True),
                         [(2, 3, 8), (2, 6, 8)], {"tgt_mask": np.triu(np.ones((3, 3), bool), 1)}),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_layers_cuda_matches_cpu(name):
    build, shapes, masks = LAYERS[name]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s) for s in shapes]
    src = build()
    cpu = _forward_backward(_copy(src, build, "cpu", np.float32), inputs, "cpu", np.float32,
                            masks)
    cuda = _forward_backward(_copy(src, build, "cuda", np.float32), inputs, "cuda", np.float32,
                             masks)
    for c, d in zip(cpu, cuda):
        np.testing.assert_allclose(d, c, **tol(np.float32))


# --- Transformer layers -------------------------------------------------------------------------

def test_transformer_parameter_names_are_torchs():
    attn = ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    ff = ["linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"]

    def norms(n):
        return [f"norm{i}.{p}" for i in range(1, n + 1) for p in ("weight", "bias")]

    enc = [f"self_attn.{a}" for a in attn] + ff + norms(2)
    dec = [f"self_attn.{a}" for a in attn] + [f"multihead_attn.{a}" for a in attn] + ff + norms(3)
    assert list(nn.TransformerEncoderLayer(8, 2, 16).state_dict()) == enc
    assert list(nn.TransformerDecoderLayer(8, 2, 16).state_dict()) == dec
    t = nn.Transformer(8, 2, 2, 1, 16)
    assert list(t.state_dict()) == (
        [f"encoder.layers.{i}.{k}" for i in range(2) for k in enc]
        + ["encoder.norm.weight", "encoder.norm.bias"]
        + [f"decoder.layers.0.{k}" for k in dec] + ["decoder.norm.weight", "decoder.norm.bias"])
    assert list(nn.TransformerEncoderLayer(8, 2, 16, bias=False).state_dict()) == [
        "self_attn.in_proj_weight", "self_attn.out_proj.weight", "linear1.weight",
        "linear2.weight", "norm1.weight", "norm2.weight"]


def test_encoder_layers_are_independent_copies():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2)
    a, b = enc.layers[0].linear1.weight, enc.layers[1].linear1.weight
    np.testing.assert_array_equal(host(a), host(b))
    with mg.no_grad():
        a.add_(1.0)
    assert not np.allclose(host(a), host(b))


def test_encoder_zeroes_padded_positions_in_eval_only():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1)
    x = mg.randn(2, 5, 8)
    pad = mg.tensor([[False] * 3 + [True] * 2, [False] * 5])
    assert host(enc(x, src_key_padding_mask=pad))[0, 3:].any()  # training: computed
    enc.eval()
    with mg.no_grad():
        out = host(enc(x, src_key_padding_mask=pad))
        left_padded = host(enc(x, src_key_padding_mask=mg.tensor([[True] + [False] * 4,
                                                                   [False] * 5])))
    assert not out[0, 3:].any() and out[0, :3].all() and out[1].all()
    assert left_padded[0, 0].any()  # not right-padded: torch's nested path is not taken
    train_pad = host(enc(x, src_key_padding_mask=pad))  # with gradients: computed
    assert train_pad[0, 3:].any()
    np.testing.assert_allclose(train_pad[0, :3], out[0, :3], atol=1e-6)


def test_generate_square_subsequent_mask():
    m = nn.Transformer.generate_square_subsequent_mask(3)
    np.testing.assert_array_equal(host(m), [[0, -np.inf, -np.inf], [0, 0, -np.inf], [0, 0, 0]])
    assert m.dtype == np.float32


def test_encoder_layer_matches_its_definition():
    """Post-norm: norm2(h + ff(h)) with h = norm1(x + self_attn(x)); pre-norm: residuals
    around the normed blocks; on the layer's own submodules."""
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((4, 2, 8)))
    for norm_first in (False, True):
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first).double()

        def sa(h):
            return layer.self_attn(h, h, h, need_weights=False)[0]

        def ff(h):
            return layer.linear2(F.relu(layer.linear1(h)))

        if norm_first:
            h = x + sa(layer.norm1(x))
            want = h + ff(layer.norm2(h))
        else:
            h = layer.norm1(x + sa(x))
            want = layer.norm2(h + ff(h))
        np.testing.assert_allclose(host(layer(x)), host(want), atol=1e-12)


def test_transformer_errors():
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    t = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        t(mg.zeros(3, 2, 8), mg.zeros(3, 1, 8))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to "
                                           "d_model"):
        t(mg.zeros(3, 2, 8), mg.zeros(3, 2, 4))


def test_tied_embedding_and_output_weights():
    """A GPT's weight tying: the output layer reuses the embedding matrix; one Parameter,
    listed once by parameters(), saved under both names, its gradient the sum of both uses."""
    emb, head = nn.Embedding(10, 4, padding_idx=0), nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = nn.ModuleList([emb, head])
    assert [n for n, _ in model.named_parameters()] == ["0.weight"]
    assert list(model.state_dict()) == ["0.weight", "1.weight"]
    idx = mg.tensor([[1, 2, 0], [3, 3, 1]])
    g = np.random.default_rng(0).standard_normal((2, 3, 10)).astype(np.float32)
    (head(emb(idx)) * mg.tensor(g)).sum().backward()
    w = host(emb.weight)
    onehot = np.eye(10, dtype=np.float32)[host(idx)]
    want = np.einsum("btv,btd->vd", g, w[host(idx)])  # through the output layer
    want += np.einsum("btd,btu->ud", g @ w, onehot) * (np.arange(10) != 0)[:, None]  # rows
    np.testing.assert_allclose(host(emb.weight.grad), want, rtol=1e-5, atol=1e-5)


# --- parity with torch (when it is installed) ---------------------------------------------------

TORCH_CASES = {
    "mha": (lambda nn: nn.MultiheadAttention(8, 2), [(4, 2, 8), (5, 2, 8), (5, 2, 8)],
            lambda rng: {"attn_mask": rng.random((4, 5)) > 0.7}),
    "mha_kvdim_bias_kv_zero_attn_bf": (
        lambda nn: nn.MultiheadAttention(8, 2, kdim=6, vdim=3, add_bias_kv=True,
                                         add_zero_attn=True, batch_first=True),
        [(2, 4, 8), (2, 5, 6), (2, 5, 3)],
        lambda rng: {"key_padding_mask": rng.random((2, 5)) > 0.6}),
    "encoder_layer_post_relu_kpm": (
        lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), [(5, 2, 8)],
        lambda rng: {"src_key_padding_mask": np.array([[False, False, True, False, True],
                                                       [False] * 5])}),
    "encoder_layer_pre_gelu_causal": (
        lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu",
                                              norm_first=True, batch_first=True, bias=False),
        [(2, 5, 8)], lambda rng: {"src_mask": np.triu(np.full((5, 5), -np.inf), 1),
                                  "is_causal": True}),
    "decoder_layer": (lambda nn: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0),
                      [(4, 2, 8), (6, 2, 8)],
                      lambda rng: {"tgt_mask": np.triu(np.full((4, 4), -np.inf), 1)}),
    "encoder_x2_norm": (lambda nn: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, nn.LayerNorm(8),
        enable_nested_tensor=False), [(5, 2, 8)], lambda rng: {}),
    "transformer_unbatched_gelu": (
        lambda nn: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, activation="gelu"),
        [(6, 8), (4, 8)], lambda rng: {"tgt_mask": np.triu(np.ones((4, 4), bool), 1),
                                       "tgt_is_causal": True,
                                       "src_key_padding_mask": np.array([False] * 5 + [True])}),
    "encoder_layer_callable_activation": (
        lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=nn.GELU("tanh")),
        [(5, 8)], lambda rng: {}),
    "transformer": (lambda nn: nn.Transformer(8, 2, 1, 2, 16, dropout=0.0, norm_first=True),
                    [(6, 2, 8), (4, 2, 8)],
                    lambda rng: {"tgt_mask": np.triu(np.full((4, 4), -np.inf), 1),
                                 "memory_key_padding_mask": np.array([[False] * 6,
                                                                      [False] * 4 + [True] * 2])}),
}


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_matches_torch_on_copied_weights(name, dtype):
    torch = pytest.importorskip("torch")
    build, shapes, make_masks = TORCH_CASES[name]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s) for s in shapes]
    masks = make_masks(rng)
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    torch.manual_seed(0)
    ref = build(torch.nn).to(tdt)
    assert list(ref.state_dict()) == list(build(nn).state_dict())
    mine = build(nn)
    mine.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    mine.to(dtype)
    got = _forward_backward(mine, inputs, "cpu", dtype, masks)
    xs = [torch.tensor(a, dtype=tdt, requires_grad=True) for a in inputs]
    tmasks = {n: a if isinstance(a, bool) else
              torch.tensor(a) if a.dtype == bool else torch.tensor(a, dtype=tdt)
              for n, a in masks.items()}
    out = ref(*xs, **tmasks)
    out = out[0] if isinstance(out, tuple) else out
    g = np.random.default_rng(2).standard_normal(tuple(out.shape))
    (out * torch.tensor(g, dtype=tdt)).sum().backward()
    params = dict(ref.named_parameters())
    want = ([out.detach().numpy()] + [x.grad.numpy() for x in xs]
            + [params[n].grad.numpy() for n, _ in mine.named_parameters()])
    for w, h in zip(want, got):
        np.testing.assert_allclose(h, w, **tol(dtype))
    back = build(torch.nn).to(tdt)  # and the other way: minigpu's state_dict into torch
    back.load_state_dict({k: torch.tensor(host(v)) for k, v in mine.state_dict().items()})
    for (k, a), b in zip(ref.state_dict().items(), back.state_dict().values()):
        np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=k)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_encoder_eval_matches_torchs_nested_tensor_path():
    """torch's eval encoder zeroes right-padded positions (nested tensors); so does minigpu."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16,
                                                                       batch_first=True), 2)
    mine = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2)
    mine.load_state_dict({k: v.numpy() for k, v in ref.state_dict().items()})
    ref.eval(), mine.eval()
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    pad = np.array([[False] * 3 + [True] * 2, [False] * 5])
    with torch.no_grad():
        want = ref(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)).numpy()
    with mg.no_grad():
        got = host(mine(mg.tensor(x), src_key_padding_mask=mg.tensor(pad)))
    assert not want[0, 3:].any()
    np.testing.assert_allclose(got, want, **tol(np.float32))


def test_sdpa_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 4, 3, 8)), rng.standard_normal((2, 2, 5, 8)), \
        rng.standard_normal((2, 2, 5, 4))
    mask = rng.random((2, 1, 3, 5)) > 0.5
    mask[0, 0, 1] = False  # a dead row: zeros in both
    for kw in ({"attn_mask": mask}, {"is_causal": True}, {"scale": 0.2}):
        want = torch.nn.functional.scaled_dot_product_attention(
            *(torch.tensor(a) for a in (q, k, v)), enable_gqa=True,
            **{n: torch.tensor(a) if isinstance(a, np.ndarray) else a for n, a in kw.items()})
        got = F.scaled_dot_product_attention(
            *(mg.tensor(a) for a in (q, k, v)), enable_gqa=True,
            **{n: mg.tensor(a) if isinstance(a, np.ndarray) else a for n, a in kw.items()})
        np.testing.assert_allclose(host(got), want.numpy(), atol=1e-12)
